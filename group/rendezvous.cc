// The rendezvous stores behind group/rendezvous.h.
//
// The TCP store speaks frames over one connection per member: a request is
// an operation byte, a 4-byte key length, the key, an 8-byte value length
// and the value (little-endian, as the hosts); the reply is a status byte
// and, for get and add, an 8-byte length and the value. The server answers a
// get once its key is set, so a waiting member costs nothing.
#include "group/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"

namespace axrt::group {
namespace {

constexpr uint8_t kSet = 1, kGet = 2, kAdd = 3, kCheck = 4;
// Bounds on a frame: a larger one is a stray client, and is dropped.
constexpr uint32_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = 64ull << 20;

std::string errno_text(int error) { return std::strerror(error); }

int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left.count(), 1000));
}

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() { reset(); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// HOST:PORT -> the host and the port; false when it is not that.
bool split_host_port(std::string_view text, std::string* host, std::string* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return false;
  *host = std::string(text.substr(0, colon));
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  *port = std::string(text.substr(colon + 1));
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port->data(), port->data() + port->size(), value);
  return ec == std::errc() && end == port->data() + port->size() && value > 0 && value < 65536;
}

// ---------------------------------------------------------------------------
// The TCP store's server, in rank 0's process.

class TcpServer {
 public:
  static axrt_status_t start(const std::string& host, const std::string& port,
                             const std::string& where, std::unique_ptr<TcpServer>* out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "rendezvous {}: cannot resolve {}: {}",
                         where, host, gai_strerror(rc));
    }
    std::string failure = "no address";
    Fd listener;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd) continue;
      const int one = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 128) != 0) {
        failure = errno_text(errno);
        continue;
      }
      listener = std::move(fd);
      break;
    }
    freeaddrinfo(found);
    if (!listener) {
      return make_status(AXRT_STATUS_CODE_UNAVAILABLE,
                         "rendezvous {}: rank 0 cannot serve the store there: {}", where, failure);
    }
    auto server = std::unique_ptr<TcpServer>(new TcpServer(std::move(listener)));
    if (!server->wake_) {
      return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "rendezvous {}: eventfd: {}", where,
                         errno_text(errno));
    }
    server->thread_ = std::thread([s = server.get()] { s->run(); });
    *out = std::move(server);
    return nullptr;
  }

  ~TcpServer() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Client {
    Fd fd;
    std::string in;
    std::string out;
  };

  explicit TcpServer(Fd listener)
      : listener_(std::move(listener)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  static void put_u64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

  void answer_get(Client& c, const std::string& value) {
    c.out.push_back(0);
    put_u64(&c.out, value.size());
    c.out += value;
  }

  // Handles the complete requests in `c.in`; false when the client is to go.
  bool serve(int fd, Client& c) {
    for (;;) {
      if (c.in.size() < 5) return true;
      uint32_t key_len = 0;
      std::memcpy(&key_len, c.in.data() + 1, 4);
      if (key_len > kMaxKey) return false;
      if (c.in.size() < 5 + key_len + 8) return true;
      uint64_t value_len = 0;
      std::memcpy(&value_len, c.in.data() + 5 + key_len, 8);
      if (value_len > kMaxValue) return false;
      const size_t frame = 5 + key_len + 8 + value_len;
      if (c.in.size() < frame) return true;
      const uint8_t op = static_cast<uint8_t>(c.in[0]);
      std::string key = c.in.substr(5, key_len);
      std::string value = c.in.substr(5 + key_len + 8, value_len);
      c.in.erase(0, frame);
      if (op == kSet) {
        data_[key] = value;
        c.out.push_back(0);
        auto waiting = waiting_.find(key);
        if (waiting != waiting_.end()) {
          for (int w : waiting->second) {
            auto it = clients_.find(w);
            if (it != clients_.end()) answer_get(it->second, value);
          }
          waiting_.erase(waiting);
        }
      } else if (op == kGet) {
        auto it = data_.find(key);
        if (it != data_.end()) {
          answer_get(c, it->second);
        } else {
          waiting_[key].push_back(fd);
        }
      } else if (op == kCheck) {
        // Status 1: absent (no value follows).
        auto it = data_.find(key);
        if (it != data_.end()) {
          answer_get(c, it->second);
        } else {
          c.out.push_back(1);
        }
      } else if (op == kAdd && value.size() == 8) {
        int64_t delta = 0, now = 0;
        std::memcpy(&delta, value.data(), 8);
        auto it = data_.find(key);
        if (it != data_.end() && it->second.size() == 8) std::memcpy(&now, it->second.data(), 8);
        now += delta;
        data_[key] = std::string(reinterpret_cast<const char*>(&now), 8);
        c.out.push_back(0);
        put_u64(&c.out, 8);
        c.out += data_[key];
      } else {
        return false;
      }
    }
  }

  void drop(int fd) {
    clients_.erase(fd);
    for (auto& [key, fds] : waiting_) std::erase(fds, fd);
  }

  void run() {
    std::vector<pollfd> polls;
    char chunk[65536];
    for (;;) {
      polls.clear();
      polls.push_back({wake_.get(), POLLIN, 0});
      polls.push_back({listener_.get(), POLLIN, 0});
      for (auto& [fd, c] : clients_) {
        polls.push_back({fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      }
      if (::poll(polls.data(), polls.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (polls[0].revents != 0) return;
      if (polls[1].revents & POLLIN) {
        const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          clients_[fd].fd = Fd(fd);
        }
      }
      for (size_t i = 2; i < polls.size(); ++i) {
        const int fd = polls[i].fd;
        auto it = clients_.find(fd);
        if (it == clients_.end()) continue;
        Client& c = it->second;
        bool keep = true;
        if (polls[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
          if (n > 0) {
            c.in.append(chunk, static_cast<size_t>(n));
            keep = serve(fd, c);
          } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            keep = false;
          }
        }
        if (keep && !c.out.empty()) {
          const ssize_t n = ::send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
          if (n > 0) {
            c.out.erase(0, static_cast<size_t>(n));
          } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            keep = false;
          }
        }
        if (!keep) drop(fd);
      }
    }
  }

  Fd listener_;
  Fd wake_;
  std::thread thread_;
  std::map<int, Client> clients_;
  std::map<std::string, std::string> data_;
  std::map<std::string, std::vector<int>> waiting_;
};

// ---------------------------------------------------------------------------
// The TCP store's client, in every member (rank 0 too).

class TcpStore final : public Store {
 public:
  TcpStore(std::string host, std::string port, std::string where)
      : host_(std::move(host)), port_(std::move(port)), where_(std::move(where)) {}

  axrt_status_t connect(Clock::time_point deadline) {
    std::string failure;
    for (;;) {
      if (try_connect(&failure)) return nullptr;
      if (Clock::now() >= deadline) {
        return make_status(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                           "rendezvous {}: no store answered before the deadline (rank 0 serves "
                           "it; is it running?): {}",
                           where_, failure);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  axrt_status_t set(const std::string& key, std::string_view value) override {
    std::string reply;
    return request(kSet, key, value, Clock::now() + std::chrono::seconds(60), false, &reply);
  }
  axrt_status_t get(const std::string& key, Clock::time_point deadline, std::string* out) override {
    return request(kGet, key, {}, deadline, true, out);
  }
  axrt_status_t check(const std::string& key, bool* found, std::string* out) override {
    return request(kCheck, key, {}, Clock::now() + std::chrono::seconds(60), true, out, found);
  }
  axrt_status_t add(const std::string& key, int64_t delta, int64_t* out) override {
    std::string reply;
    AXRT_RETURN_IF_ERROR(request(kAdd, key,
                                 std::string_view(reinterpret_cast<const char*>(&delta), 8),
                                 Clock::now() + std::chrono::seconds(60), true, &reply));
    if (reply.size() != 8) {
      return make_status(AXRT_STATUS_CODE_DATA_LOSS, "rendezvous {}: a malformed reply to add({})",
                         where_, key);
    }
    std::memcpy(out, reply.data(), 8);
    return nullptr;
  }
  const std::string& where() const noexcept override { return where_; }
  std::string local_address() const override { return local_address_; }

 private:
  bool try_connect(std::string* failure) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host_.c_str(), port_.c_str(), &hints, &found); rc != 0) {
      *failure = gai_strerror(rc);
      return false;
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd) continue;
      if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
        const int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fd_ = std::move(fd);
        freeaddrinfo(found);
        sockaddr_storage local{};
        socklen_t length = sizeof(local);
        char text[NI_MAXHOST] = "";
        if (::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
            ::getnameinfo(reinterpret_cast<sockaddr*>(&local), length, text, sizeof(text), nullptr,
                          0, NI_NUMERICHOST) == 0) {
          local_address_ = text;
        }
        return true;
      }
      *failure = errno_text(errno);
    }
    freeaddrinfo(found);
    return false;
  }

  axrt_status_t broken(const char* what) {
    fd_.reset();
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE,
                       "rendezvous {}: the store {} (rank 0, which serves it, may be gone)", where_,
                       what);
  }

  // Reads `n` bytes until `deadline`; a timeout leaves the connection out of
  // step with the server, so it is closed.
  axrt_status_t read_exact(char* out, size_t n, Clock::time_point deadline, const std::string& key) {
    while (n > 0) {
      pollfd p{fd_.get(), POLLIN, 0};
      const int ready = ::poll(&p, 1, milliseconds_until(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (Clock::now() < deadline) continue;
        fd_.reset();
        return make_status(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                           "rendezvous {}: key '{}' did not appear before the deadline", where_, key);
      }
      const ssize_t got = ::recv(fd_.get(), out, n, 0);
      if (got == 0) return broken("closed the connection");
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return broken("connection failed");
      }
      out += got;
      n -= static_cast<size_t>(got);
    }
    return nullptr;
  }

  axrt_status_t request(uint8_t op, const std::string& key, std::string_view value,
                        Clock::time_point deadline, bool has_value, std::string* out,
                        bool* found = nullptr) {
    if (key.size() > kMaxKey || value.size() > kMaxValue) {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "rendezvous {}: key or value too long",
                         where_);
    }
    std::lock_guard lock(mutex_);
    if (!fd_) AXRT_RETURN_IF_ERROR(connect(deadline));
    std::string frame;
    frame.push_back(static_cast<char>(op));
    const uint32_t key_len = static_cast<uint32_t>(key.size());
    const uint64_t value_len = value.size();
    frame.append(reinterpret_cast<const char*>(&key_len), 4);
    frame += key;
    frame.append(reinterpret_cast<const char*>(&value_len), 8);
    frame += value;
    for (size_t sent = 0; sent < frame.size();) {
      const ssize_t n = ::send(fd_.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return broken("connection failed");
      sent += static_cast<size_t>(n);
    }
    char status = 0;
    AXRT_RETURN_IF_ERROR(read_exact(&status, 1, deadline, key));
    if (found != nullptr) *found = status == 0;
    if (!has_value || status != 0) return nullptr;
    uint64_t len = 0;
    AXRT_RETURN_IF_ERROR(read_exact(reinterpret_cast<char*>(&len), 8, deadline, key));
    if (len > kMaxValue) return broken("sent a malformed reply");
    out->resize(len);
    return read_exact(out->data(), len, deadline, key);
  }

  const std::string host_, port_, where_;
  std::mutex mutex_;
  Fd fd_;
  std::string local_address_;
};

// The servers rank 0 started, by address: each serves from the first join
// on its address until the process exits, so that the groups made after a
// failure (under new names) meet where the first did, even while the old
// group is being torn down.
axrt_status_t serve(const std::string& host, const std::string& port, const std::string& where) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<TcpServer>> servers;
  std::lock_guard lock(mutex);
  if (servers.count(where) != 0) return nullptr;
  std::unique_ptr<TcpServer> server;
  AXRT_RETURN_IF_ERROR(TcpServer::start(host, port, where, &server));
  servers.emplace(where, std::move(server));
  return nullptr;
}

// ---------------------------------------------------------------------------
// The file store: DIR/<key, escaped>, written whole and renamed into place.

class FileStore final : public Store {
 public:
  FileStore(std::filesystem::path dir, std::string where)
      : dir_(std::move(dir)), where_(std::move(where)) {}

  axrt_status_t set(const std::string& key, std::string_view value) override {
    const auto path = path_of(key);
    const auto tmp = path.string() + fmt::format(".{}.tmp", ::getpid());
    {
      std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
      file.write(value.data(), static_cast<std::streamsize>(value.size()));
      if (!file.flush()) return io_error("write", tmp);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) return io_error("rename", path);
    return nullptr;
  }

  axrt_status_t get(const std::string& key, Clock::time_point deadline, std::string* out) override {
    const auto path = path_of(key);
    for (;;) {
      std::ifstream file(path, std::ios::binary);
      if (file) {
        out->assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
        return nullptr;
      }
      if (Clock::now() >= deadline) {
        return make_status(AXRT_STATUS_CODE_DEADLINE_EXCEEDED,
                           "rendezvous {}: key '{}' did not appear before the deadline", where_, key);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  axrt_status_t check(const std::string& key, bool* found, std::string* out) override {
    std::ifstream file(path_of(key), std::ios::binary);
    *found = static_cast<bool>(file);
    if (*found) out->assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    return nullptr;
  }

  axrt_status_t add(const std::string& key, int64_t delta, int64_t* out) override {
    const auto path = path_of(key);
    const std::string lock_path = path.string() + ".lock";
    Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!lock || ::flock(lock.get(), LOCK_EX) != 0) return io_error("lock", lock_path);
    std::string text;
    {
      std::ifstream file(path, std::ios::binary);
      if (file) text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    int64_t now = 0;
    if (!text.empty()) std::from_chars(text.data(), text.data() + text.size(), now);
    now += delta;
    AXRT_RETURN_IF_ERROR(set(key, std::to_string(now)));
    *out = now;
    return nullptr;
  }

  const std::string& where() const noexcept override { return where_; }

 private:
  std::filesystem::path path_of(const std::string& key) const {
    std::string name;
    for (const char c : key) {
      const bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      name += plain ? std::string(1, c) : fmt::format("%{:02x}", static_cast<unsigned char>(c));
    }
    return dir_ / name;
  }
  axrt_status_t io_error(const char* what, const std::filesystem::path& path) const {
    return make_status(AXRT_STATUS_CODE_UNAVAILABLE, "rendezvous {}: cannot {} {}: {}", where_, what,
                       path.string(), errno_text(errno));
  }

  const std::filesystem::path dir_;
  const std::string where_;
};

// Every key under "NAME/".
class PrefixStore final : public Store {
 public:
  PrefixStore(std::unique_ptr<Store> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix) + "/") {}
  axrt_status_t set(const std::string& key, std::string_view value) override {
    return inner_->set(prefix_ + key, value);
  }
  axrt_status_t get(const std::string& key, Clock::time_point deadline, std::string* out) override {
    return inner_->get(prefix_ + key, deadline, out);
  }
  axrt_status_t check(const std::string& key, bool* found, std::string* out) override {
    return inner_->check(prefix_ + key, found, out);
  }
  axrt_status_t add(const std::string& key, int64_t delta, int64_t* out) override {
    return inner_->add(prefix_ + key, delta, out);
  }
  const std::string& where() const noexcept override { return inner_->where(); }
  std::string local_address() const override { return inner_->local_address(); }

 private:
  std::unique_ptr<Store> inner_;
  const std::string prefix_;
};

}  // namespace

axrt_status_t open_store(std::string_view id, uint32_t rank, Clock::time_point deadline,
                         std::unique_ptr<Store>* out) {
  return guard("axrt_group_join", [&]() -> axrt_status_t {
    const std::string where(id);
    std::unique_ptr<Store> store;
    std::string name;
    if (id.starts_with("tcp://")) {
      std::string_view rest = id.substr(6);
      const size_t slash = rest.find('/');
      if (slash != std::string_view::npos) {
        name = std::string(rest.substr(slash + 1));
        rest = rest.substr(0, slash);
      }
      std::string host, port;
      if (!split_host_port(rest, &host, &port)) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "group id '{}': expected tcp://HOST:PORT[/NAME] with a port of 1-65535",
                           where);
      }
      const std::string store_where = fmt::format("tcp://{}:{}", host, port);
      if (rank == 0) AXRT_RETURN_IF_ERROR(serve(host, port, store_where));
      auto client = std::make_unique<TcpStore>(host, port, store_where);
      AXRT_RETURN_IF_ERROR(client->connect(deadline));
      store = std::move(client);
    } else if (id.starts_with("file://")) {
      std::string_view rest = id.substr(7);
      const size_t hash = rest.find('#');
      if (hash != std::string_view::npos) {
        name = std::string(rest.substr(hash + 1));
        rest = rest.substr(0, hash);
      }
      if (rest.empty()) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "group id '{}': expected file://DIR[#NAME] naming a directory", where);
      }
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(rest), ec);
      if (ec || !std::filesystem::is_directory(std::filesystem::path(rest))) {
        return make_status(AXRT_STATUS_CODE_UNAVAILABLE,
                           "group id '{}': cannot use {} as the rendezvous directory: {}", where,
                           std::string(rest), ec ? ec.message() : "not a directory");
      }
      store = std::make_unique<FileStore>(std::filesystem::path(rest), where);
    } else {
      return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "group id '{}': expected tcp://HOST:PORT[/NAME] or file://DIR[#NAME]",
                         where);
    }
    if (!name.empty()) store = std::make_unique<PrefixStore>(std::move(store), name);
    *out = std::move(store);
    return nullptr;
  });
}

}  // namespace axrt::group
