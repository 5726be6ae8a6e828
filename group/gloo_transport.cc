// libaxrt_gloo.so: group/transport.h over gloo's TCP transport (Debian's
// libgloo0). A pair of processes talks through one TCP connection of gloo's
// full mesh; an operation is one of gloo's unbound buffers with one send or
// receive posted. gloo signals a pair's failure (the peer closed or reset the
// connection) to the operations on that pair as an exception, and a wait
// that times out fails every pair of the context (gloo's rule); both come
// back here as codes. Nothing gloo throws crosses this file's C functions.
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "group/transport.h"

namespace {

void write_error(char* error, size_t error_size, const std::string& text) noexcept {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min(text.size(), error_size - 1);
  std::memcpy(error, text.data(), n);
  error[n] = '\0';
}

// Writing to a connection whose peer is gone raises SIGPIPE, whose default
// action ends the process; gloo writes with writev(), which cannot ask for
// no signal. So every call into gloo runs with SIGPIPE blocked in the
// calling thread and drains the one it raised, and gloo's own I/O thread,
// made inside connect(), inherits the blocked mask. The process's own
// disposition of SIGPIPE is left alone.
class NoSigpipe {
 public:
  NoSigpipe() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{0, 0};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

// Runs `body`, which returns 0, with SIGPIPE held off; whatever it throws
// becomes -1 and `error`.
template <typename Body>
int guarded(char* error, size_t error_size, Body&& body) noexcept {
  NoSigpipe quiet;
  try {
    return body();
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
  } catch (...) {
    write_error(error, error_size, "unknown error in gloo");
  }
  return -1;
}

std::chrono::milliseconds clamp_ms(uint64_t ms) {
  // gloo waits with std::chrono; keep far from overflow (a day is "forever"
  // for a wait whose caller slices it anyway).
  return std::chrono::milliseconds(std::min<uint64_t>(ms, 24ull * 3600 * 1000));
}

// libaxrt's store, as gloo's rendezvous wants one.
class Store final : public gloo::rendezvous::Store {
 public:
  Store(const axrt_transport_store_t& store, uint64_t timeout_ms)
      : store_(store), timeout_ms_(timeout_ms) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    char error[512] = "";
    if (store_.set(store_.context, key.c_str(), data.data(), data.size(), error, sizeof(error)) != 0) {
      throw gloo::IoException(error);
    }
  }
  std::vector<char> get(const std::string& key) override { return get(key, timeout_ms_); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, clamp_ms(timeout_ms_)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) get(key, static_cast<uint64_t>(timeout.count()));
  }

 private:
  std::vector<char> get(const std::string& key, uint64_t timeout_ms) {
    std::vector<char> out;
    char error[512] = "";
    auto sink = [](void* context, const void* data, size_t size) {
      auto* v = static_cast<std::vector<char>*>(context);
      v->assign(static_cast<const char*>(data), static_cast<const char*>(data) + size);
    };
    if (store_.get(store_.context, key.c_str(), timeout_ms, sink, &out, error, sizeof(error)) != 0) {
      throw gloo::IoException(error);
    }
    return out;
  }

  const axrt_transport_store_t store_;
  const uint64_t timeout_ms_;
};

struct Transport {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
};

struct Operation {
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  bool is_send = false;
  int peer = 0;
};

int connect(const axrt_transport_store_t* store, const char* prefix, int rank, int size,
            const char* hostname, uint64_t timeout_ms, void** out, char* error,
            size_t error_size) noexcept {
  return guarded(error, error_size, [&] {
    gloo::transport::tcp::attr attr;
    if (hostname != nullptr && hostname[0] != '\0') {
      attr.hostname = hostname;
    } else {
      char name[256] = "";
      ::gethostname(name, sizeof(name) - 1);
      attr.hostname = name;
    }
    auto transport = std::make_unique<Transport>();
    transport->device = gloo::transport::tcp::CreateDevice(attr);
    transport->context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    transport->context->setTimeout(clamp_ms(timeout_ms));
    Store lent(*store, timeout_ms);
    gloo::rendezvous::PrefixStore prefixed(prefix ? prefix : "", lent);
    transport->context->connectFullMesh(prefixed, transport->device);
    *out = transport.release();
    return 0;
  });
}

void destroy(void* transport) noexcept {
  NoSigpipe quiet;
  try {
    delete static_cast<Transport*>(transport);
  } catch (...) {
  }
}

int post(void* transport, int is_send, int peer, uint64_t slot, void* data, size_t bytes,
         void** out, char* error, size_t error_size) noexcept {
  return guarded(error, error_size, [&] {
    auto* t = static_cast<Transport*>(transport);
    auto op = std::make_unique<Operation>();
    op->buffer = t->context->createUnboundBuffer(data, bytes);
    op->is_send = is_send != 0;
    op->peer = peer;
    if (op->is_send) {
      op->buffer->send(peer, slot, 0, bytes);
    } else {
      op->buffer->recv(peer, slot, 0, bytes);
    }
    *out = op.release();
    return 0;
  });
}

int wait(void* operation, uint64_t timeout_ms, char* error, size_t error_size) noexcept {
  NoSigpipe quiet;
  auto* op = static_cast<Operation*>(operation);
  const auto start = std::chrono::steady_clock::now();
  const auto timeout = clamp_ms(timeout_ms);
  try {
    const bool done = op->is_send ? op->buffer->waitSend(timeout) : op->buffer->waitRecv(timeout);
    return done ? AXRT_TRANSPORT_DONE : AXRT_TRANSPORT_ABORTED;
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
  } catch (...) {
    write_error(error, error_size, "unknown error in gloo");
  }
  return std::chrono::steady_clock::now() - start >= timeout ? AXRT_TRANSPORT_TIMED_OUT
                                                             : AXRT_TRANSPORT_FAILED;
}

void abort_operation(void* operation) noexcept {
  NoSigpipe quiet;
  auto* op = static_cast<Operation*>(operation);
  try {
    if (op->is_send) {
      op->buffer->abortWaitSend();
    } else {
      op->buffer->abortWaitRecv();
    }
  } catch (...) {
  }
}

void release(void* operation) noexcept {
  NoSigpipe quiet;
  try {
    delete static_cast<Operation*>(operation);
  } catch (...) {
  }
}

const axrt_transport_api_t kApi = {
    .version = AXRT_TRANSPORT_API_VERSION,
    .name = "gloo",
    .connect = connect,
    .destroy = destroy,
    .post = post,
    .wait = wait,
    .abort = abort_operation,
    .release = release,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const axrt_transport_api_t*
axrt_transport_api_v1(void) {
  return &kApi;
}
