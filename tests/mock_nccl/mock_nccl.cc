// A mock of NCCL (see mock_nccl.h for what it models and how tests control
// it). Layout of this file:
//   1. state: communicators and their cliques, queued parts, faults, counts
//   2. the results of collectives, computed on the host
//   3. the parts: host functions that meet their peers
//   4. the NCCL entry points
//   5. the control API
//
// Concurrency: one mutex (State::mu) guards everything but what a
// communicator's API calls alone touch (NCCL calls on one communicator never
// overlap); State::changed is notified whenever a part arrives, a transfer
// is posted or taken, or a communicator is aborted.
#include "tests/mock_nccl/mock_nccl.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "base/float16.h"
#include "group/nccl_api.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "tests/mock_cuda/mock_cuda.h"

struct ncclComm;

namespace {

// ---------------------------------------------------------------------------
// 1. State
// ---------------------------------------------------------------------------

// The mock CUDA driver's entry points this library uses, fetched the way
// the CUDA driver fetches them.
struct Cuda {
  CUresult (*cuInit)(unsigned int) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuLaunchHostFunc)(CUstream, CUhostFn, void*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  bool ok = false;
};

template <class F>
bool fetch(const char* name, F* out) {
  void* pfn = nullptr;
  int found = 0;
  if (cuGetProcAddress_v2(name, &pfn, 12000, 0, &found) != CUDA_SUCCESS || pfn == nullptr) {
    return false;
  }
  *out = reinterpret_cast<F>(pfn);
  return true;
}

const Cuda& cuda() {
  static const Cuda c = [] {
    Cuda got;
    got.ok = fetch("cuInit", &got.cuInit) && fetch("cuDeviceGet", &got.cuDeviceGet) &&
             fetch("cuDevicePrimaryCtxRetain", &got.cuDevicePrimaryCtxRetain) &&
             fetch("cuDevicePrimaryCtxRelease", &got.cuDevicePrimaryCtxRelease) &&
             fetch("cuCtxGetCurrent", &got.cuCtxGetCurrent) &&
             fetch("cuCtxSetCurrent", &got.cuCtxSetCurrent) &&
             fetch("cuLaunchHostFunc", &got.cuLaunchHostFunc) &&
             fetch("cuDeviceGetCount", &got.cuDeviceGetCount);
    return got;
  }();
  return c;
}

enum class Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSend, kRecv };

// One NCCL call of a rank, as its part will run it.
struct Call {
  Kind kind = Kind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements: per rank for all-gather (sent) and reduce-scatter (received)
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;  // broadcast: the root; send/recv: the peer
  uint64_t sequence = 0;  // which meeting (see Clique)
};

// One collective's meeting: every rank's call, by rank.
struct Meeting {
  std::vector<Call> calls;
  int arrived = 0;
  int left = 0;
  bool done = false;
  ncclResult_t result = ncclSuccess;
};

// A send waiting for its receive.
struct Posted {
  const void* data = nullptr;
  size_t bytes = 0;
  bool taken = false;
};

// The communicators ncclCommInitAll made together.
struct Clique {
  int size = 0;
  std::map<uint64_t, Meeting> meetings;                  // by collective number
  std::map<std::tuple<int, int, uint64_t>, Posted> posted;  // (from, to, n-th)
};

// One host function: a communicator's calls of one group call.
struct Work {
  std::shared_ptr<ncclComm> comm;
  std::vector<Call> calls;
};

struct Fault {
  int kind = 0;
  int code = 0;
};

// A clique ncclCommInitRank calls are making, by unique id: each rank's
// communicator once it called.
struct Forming {
  std::shared_ptr<Clique> clique;
  std::vector<std::shared_ptr<ncclComm>> ranks;
  int arrived = 0;
  int left = 0;
  bool complete = false;
};

struct State {
  std::mutex mu;
  std::condition_variable changed;
  std::map<std::string, Forming> forming;  // by unique id
  uint64_t ids = 0;                        // made by ncclGetUniqueId
  std::map<const ncclComm*, std::shared_ptr<ncclComm>> comms;  // live
  std::map<const Work*, std::shared_ptr<Work>> queued;          // not yet run
  std::map<int, Fault> faults;                                  // by device
  std::map<std::string, uint64_t> counts;
  std::string last_error;
};

// Never destroyed: parts may still run, or be queued, at exit.
State& state() {
  static State* const s = new State;
  return *s;
}

void count(const char* function) {
  State& s = state();
  std::lock_guard lock(s.mu);
  ++s.counts[function];
}

// Records `message` as the last error and returns `result`.
ncclResult_t fail(ncclResult_t result, std::string message) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.last_error = std::move(message);
  return result;
}

// Calls queued by this thread's open group call, in order.
struct Pending {
  std::shared_ptr<ncclComm> comm;
  cudaStream_t stream;
  Call call;
};
thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_pending;

size_t type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

}  // namespace

// The object behind ncclComm_t.
struct ncclComm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  int device = 0;  // CUDA ordinal
  CUdevice cu_device = 0;
  CUcontext context = nullptr;
  // Touched by the communicator's API calls only.
  uint64_t collectives = 0;             // issued
  std::vector<uint64_t> sent, received;  // issued, by peer
  // Under State::mu.
  bool aborted = false;
  ncclResult_t async_error = ncclSuccess;
};

namespace {

// The live communicator behind `handle`, or null.
std::shared_ptr<ncclComm> live(ncclComm_t handle) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.comms.find(handle);
  return it != s.comms.end() ? it->second : nullptr;
}

// ---------------------------------------------------------------------------
// 2. Results
// ---------------------------------------------------------------------------

template <typename T>
T combine(ncclRedOp_t op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // wraps
    if (op == ncclSum) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    if (op == ncclProd) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    if (op == ncclSum) return a + b;
    if (op == ncclProd) return a * b;
  }
  if (op == ncclMax) return b > a ? b : a;
  return b < a ? b : a;
}

template <typename T>
void combine_all(ncclRedOp_t op, void* acc, const void* x, size_t n) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(x);
  for (size_t i = 0; i < n; ++i) a[i] = combine(op, a[i], b[i]);
}

template <float (*Widen)(uint16_t) noexcept, uint16_t (*Narrow)(float) noexcept>
void combine_16(ncclRedOp_t op, void* acc, const void* x, size_t n) {
  uint16_t* a = static_cast<uint16_t*>(acc);
  const uint16_t* b = static_cast<const uint16_t*>(x);
  for (size_t i = 0; i < n; ++i) a[i] = Narrow(combine(op, Widen(a[i]), Widen(b[i])));
}

// acc[i] = acc[i] (op) x[i] for `n` elements of `type`.
void reduce(ncclDataType_t type, ncclRedOp_t op, void* acc, const void* x, size_t n) {
  switch (type) {
    case ncclInt8: return combine_all<int8_t>(op, acc, x, n);
    case ncclUint8: return combine_all<uint8_t>(op, acc, x, n);
    case ncclInt32: return combine_all<int32_t>(op, acc, x, n);
    case ncclUint32: return combine_all<uint32_t>(op, acc, x, n);
    case ncclInt64: return combine_all<int64_t>(op, acc, x, n);
    case ncclUint64: return combine_all<uint64_t>(op, acc, x, n);
    case ncclFloat16: return combine_16<axrt::half_to_float, axrt::float_to_half>(op, acc, x, n);
    case ncclBfloat16:
      return combine_16<axrt::bfloat16_to_float, axrt::float_to_bfloat16>(op, acc, x, n);
    case ncclFloat32: return combine_all<float>(op, acc, x, n);
    case ncclFloat64: return combine_all<double>(op, acc, x, n);
    default: return;
  }
}

bool same_collective(const Call& a, const Call& b) {
  return a.kind == b.kind && a.count == b.count && a.type == b.type && a.op == b.op &&
         a.root == b.root;
}

// Every rank's result of a meeting where every rank arrived. Reads all the
// inputs before writing any output, so that in-place calls work.
void compute(Meeting& m) {
  const size_t n = m.calls.size();
  const Call& first = m.calls[0];
  for (const Call& c : m.calls) {
    if (!same_collective(c, first)) {
      m.result = ncclInvalidUsage;
      return;
    }
  }
  const size_t bytes = first.count * type_size(first.type);
  if (bytes == 0) return;
  std::vector<std::byte> data;
  auto take = [&](const void* from, size_t size) {
    const auto* p = static_cast<const std::byte*>(from);
    data.insert(data.end(), p, p + size);
  };
  switch (first.kind) {
    case Kind::kAllReduce:
      take(first.send, bytes);
      for (size_t r = 1; r < n; ++r) reduce(first.type, first.op, data.data(), m.calls[r].send, first.count);
      for (const Call& c : m.calls) std::memcpy(c.recv, data.data(), bytes);
      break;
    case Kind::kReduceScatter:
      take(first.send, bytes * n);
      for (size_t r = 1; r < n; ++r) {
        reduce(first.type, first.op, data.data(), m.calls[r].send, first.count * n);
      }
      for (size_t r = 0; r < n; ++r) std::memcpy(m.calls[r].recv, data.data() + r * bytes, bytes);
      break;
    case Kind::kAllGather:
      for (const Call& c : m.calls) take(c.send, bytes);
      for (const Call& c : m.calls) std::memcpy(c.recv, data.data(), bytes * n);
      break;
    case Kind::kBroadcast:
      take(m.calls[static_cast<size_t>(first.root)].send, bytes);
      for (const Call& c : m.calls) std::memcpy(c.recv, data.data(), bytes);
      break;
    case Kind::kSend:
    case Kind::kRecv:
      break;
  }
}

// ---------------------------------------------------------------------------
// 3. Parts
// ---------------------------------------------------------------------------

// Takes part in collective `call`; false when the communicator was aborted
// before its result was there. Under `lock`.
bool meet(std::unique_lock<std::mutex>& lock, ncclComm& comm, const Call& call) {
  State& s = state();
  Clique& clique = *comm.clique;
  Meeting& m = clique.meetings[call.sequence];  // std::map: stays put
  if (m.calls.empty()) m.calls.resize(static_cast<size_t>(clique.size));
  m.calls[static_cast<size_t>(comm.rank)] = call;
  if (++m.arrived == clique.size) {
    compute(m);
    m.done = true;
    s.changed.notify_all();
  } else {
    s.changed.wait(lock, [&] { return m.done || comm.aborted; });
    if (!m.done) return false;
  }
  if (m.result != ncclSuccess) comm.async_error = m.result;
  if (++m.left == clique.size) clique.meetings.erase(call.sequence);
  return true;
}

// The sends and receives of one part: sends are posted first, then each
// receive waits for its send, then the part waits until its sends were
// taken (their buffers are in use until then). Under `lock`.
void exchange(std::unique_lock<std::mutex>& lock, ncclComm& comm, const std::vector<Call>& calls) {
  State& s = state();
  Clique& clique = *comm.clique;
  for (const Call& c : calls) {
    if (c.kind != Kind::kSend) continue;
    clique.posted[{comm.rank, c.root, c.sequence}] = Posted{c.send, c.count * type_size(c.type), false};
    s.changed.notify_all();
  }
  for (const Call& c : calls) {
    if (c.kind != Kind::kRecv) continue;
    const auto key = std::make_tuple(c.root, comm.rank, c.sequence);
    s.changed.wait(lock, [&] { return comm.aborted || clique.posted.count(key) != 0; });
    if (comm.aborted) return;
    Posted& p = clique.posted[key];
    const size_t bytes = c.count * type_size(c.type);
    if (p.bytes != bytes) {
      comm.async_error = ncclInvalidUsage;
    } else if (bytes != 0) {
      std::memcpy(c.recv, p.data, bytes);
    }
    p.taken = true;
    s.changed.notify_all();
  }
  for (const Call& c : calls) {
    if (c.kind != Kind::kSend) continue;
    const auto key = std::make_tuple(comm.rank, c.root, c.sequence);
    s.changed.wait(lock, [&] { return comm.aborted || clique.posted[key].taken; });
    if (comm.aborted) return;
    clique.posted.erase(key);
  }
}

// The host function of a part, on the stream's worker thread. Makes no CUDA
// call (the mock CUDA refuses them there).
void run_part(void* user_data) {
  State& s = state();
  std::unique_lock lock(s.mu);
  auto it = s.queued.find(static_cast<const Work*>(user_data));
  if (it == s.queued.end()) return;
  const std::shared_ptr<Work> work = std::move(it->second);
  s.queued.erase(it);
  ncclComm& comm = *work->comm;
  if (comm.aborted) return;
  if (auto f = s.faults.find(comm.device); f != s.faults.end()) {
    const Fault fault = f->second;
    s.faults.erase(f);
    switch (fault.kind) {
      case AXRT_MOCK_NCCL_HANG:
        s.changed.wait(lock, [&] { return comm.aborted; });
        return;
      case AXRT_MOCK_NCCL_ASYNC_ERROR:
        comm.async_error = fault.code;
        s.last_error = "injected asynchronous error (axrt_mock_nccl_inject_fault)";
        s.changed.wait(lock, [&] { return comm.aborted; });
        return;
      case AXRT_MOCK_NCCL_DEVICE_FAULT:
        lock.unlock();
        axrt_mock_cuda_poison_device(comm.device, fault.code);
        return;
      default:
        break;
    }
  }
  for (const Call& c : work->calls) {
    if (c.kind == Kind::kSend || c.kind == Kind::kRecv) continue;
    if (!meet(lock, comm, c)) return;
  }
  exchange(lock, comm, work->calls);
}

// Queues the calls of the group call that just closed: one part per
// communicator, on its stream.
ncclResult_t launch(std::vector<Pending> pending) {
  std::vector<std::shared_ptr<Work>> works;
  std::vector<cudaStream_t> streams;
  for (Pending& p : pending) {
    size_t w = 0;
    while (w < works.size() && works[w]->comm != p.comm) ++w;
    if (w == works.size()) {
      works.push_back(std::make_shared<Work>(Work{p.comm, {}}));
      streams.push_back(p.stream);
    } else if (streams[w] != p.stream) {
      return fail(ncclInvalidUsage, "one group call gives a communicator two streams");
    }
    ncclComm& comm = *p.comm;
    Call& c = p.call;
    if (c.kind == Kind::kSend) {
      c.sequence = ++comm.sent[static_cast<size_t>(c.root)];
    } else if (c.kind == Kind::kRecv) {
      c.sequence = ++comm.received[static_cast<size_t>(c.root)];
    } else {
      c.sequence = ++comm.collectives;
    }
    works[w]->calls.push_back(c);
  }
  const Cuda& cu = cuda();
  State& s = state();
  ncclResult_t result = ncclSuccess;
  for (size_t w = 0; w < works.size(); ++w) {
    const Work* raw = works[w].get();
    {
      std::lock_guard lock(s.mu);
      s.queued.emplace(raw, works[w]);
    }
    CUcontext previous = nullptr;
    cu.cuCtxGetCurrent(&previous);
    cu.cuCtxSetCurrent(works[w]->comm->context);
    const CUresult queued = cu.cuLaunchHostFunc(streams[w], run_part, const_cast<Work*>(raw));
    cu.cuCtxSetCurrent(previous);
    if (queued != CUDA_SUCCESS) {
      {
        std::lock_guard lock(s.mu);
        s.queued.erase(raw);
      }
      result = fail(ncclUnhandledCudaError,
                    "cuLaunchHostFunc failed with CUresult " + std::to_string(queued));
    }
  }
  return result;
}

// Adds `call` on `handle` to this thread's group call (a group call of its
// own outside one).
ncclResult_t add(ncclComm_t handle, cudaStream_t stream, const Call& call) {
  std::shared_ptr<ncclComm> comm = live(handle);
  if (!comm) return fail(ncclInvalidArgument, "not a live communicator");
  const int size = comm->clique->size;
  if (type_size(call.type) == 0) return fail(ncclInvalidArgument, "unknown data type");
  if (call.op < ncclSum || call.op > ncclMin) return fail(ncclInvalidArgument, "unknown reduction");
  if (call.root < 0 || call.root >= size) return fail(ncclInvalidArgument, "rank out of range");
  if ((call.kind == Kind::kSend || call.kind == Kind::kRecv) && call.root == comm->rank) {
    return fail(ncclInvalidArgument, "a rank sends to or receives from itself");
  }
  const bool reads = call.kind != Kind::kRecv && (call.kind != Kind::kBroadcast || call.root == comm->rank);
  if (call.count != 0 && ((reads && call.send == nullptr) ||
                          (call.kind != Kind::kSend && call.recv == nullptr))) {
    return fail(ncclInvalidArgument, "a buffer is NULL");
  }
  t_pending.push_back(Pending{std::move(comm), stream, call});
  if (t_group_depth > 0) return ncclSuccess;
  std::vector<Pending> pending = std::move(t_pending);
  t_pending.clear();
  return launch(std::move(pending));
}

// Ends `comm`: wakes its waiting parts, makes its queued ones do nothing,
// and lets its context go.
ncclResult_t end_comm(ncclComm_t handle) {
  State& s = state();
  std::shared_ptr<ncclComm> comm;
  {
    std::lock_guard lock(s.mu);
    auto it = s.comms.find(handle);
    if (it == s.comms.end()) {
      s.last_error = "not a live communicator";
      return ncclInvalidArgument;
    }
    comm = std::move(it->second);
    s.comms.erase(it);
    comm->aborted = true;
  }
  s.changed.notify_all();
  cuda().cuDevicePrimaryCtxRelease(comm->cu_device);
  return ncclSuccess;
}

const char* error_text(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "NCCL operation timed out";
    default: return "unknown result code";
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// 4. The NCCL entry points
// ---------------------------------------------------------------------------

extern "C" {

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  count("ncclGetVersion");
  if (version == nullptr) return fail(ncclInvalidArgument, "version is NULL");
  const char* text = std::getenv("AXRT_MOCK_NCCL_VERSION");
  *version = text != nullptr && *text != '\0' ? std::atoi(text) : 22105;
  return ncclSuccess;
}

AXRT_MOCK_NCCL_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  count("ncclGetErrorString");
  return error_text(result);
}

AXRT_MOCK_NCCL_EXPORT const char* ncclGetLastError(ncclComm_t) {
  count("ncclGetLastError");
  // A copy per thread: valid until this thread's next call.
  thread_local std::string copy;
  State& s = state();
  std::lock_guard lock(s.mu);
  copy = s.last_error;
  return copy.c_str();
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int count_, const int* devices) {
  count("ncclCommInitAll");
  if (comms == nullptr || count_ < 1) return fail(ncclInvalidArgument, "no communicators asked for");
  const Cuda& cu = cuda();
  if (!cu.ok || cu.cuInit(0) != CUDA_SUCCESS) {
    return fail(ncclUnhandledCudaError, "the mock CUDA driver is not usable");
  }
  auto clique = std::make_shared<Clique>();
  clique->size = count_;
  std::vector<std::shared_ptr<ncclComm>> made;
  for (int r = 0; r < count_; ++r) {
    const int device = devices != nullptr ? devices[r] : r;
    for (const auto& other : made) {
      if (other->device == device) return fail(ncclInvalidUsage, "a device is listed twice");
    }
    auto comm = std::make_shared<ncclComm>();
    comm->clique = clique;
    comm->rank = r;
    comm->device = device;
    comm->sent.assign(static_cast<size_t>(count_), 0);
    comm->received.assign(static_cast<size_t>(count_), 0);
    if (cu.cuDeviceGet(&comm->cu_device, device) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&comm->context, comm->cu_device) != CUDA_SUCCESS) {
      for (const auto& other : made) cu.cuDevicePrimaryCtxRelease(other->cu_device);
      return fail(ncclUnhandledCudaError, "CUDA device " + std::to_string(device) + " is not usable");
    }
    made.push_back(std::move(comm));
  }
  State& s = state();
  std::lock_guard lock(s.mu);
  for (int r = 0; r < count_; ++r) {
    comms[r] = made[static_cast<size_t>(r)].get();
    s.comms.emplace(comms[r], made[static_cast<size_t>(r)]);
  }
  return ncclSuccess;
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  count("ncclGetUniqueId");
  if (id == nullptr) return fail(ncclInvalidArgument, "id is NULL");
  State& s = state();
  std::lock_guard lock(s.mu);
  std::memset(id->internal, 0, sizeof(id->internal));
  std::snprintf(id->internal, sizeof(id->internal), "mock-nccl-id %d %llu",
                static_cast<int>(::getpid()), static_cast<unsigned long long>(++s.ids));
  return ncclSuccess;
}

// Every rank of `id` calls it, each with the context of its device current
// (NCCL uses the calling thread's device); it returns once all `count` did,
// or fails after 30 s.
AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm_out, int count_,
                                                    ncclUniqueId id, int rank) {
  count("ncclCommInitRank");
  if (comm_out == nullptr || count_ < 1 || rank < 0 || rank >= count_) {
    return fail(ncclInvalidArgument, "bad communicator, count or rank");
  }
  const Cuda& cu = cuda();
  if (!cu.ok || cu.cuInit(0) != CUDA_SUCCESS) {
    return fail(ncclUnhandledCudaError, "the mock CUDA driver is not usable");
  }
  // The current context's device.
  CUcontext current = nullptr;
  cu.cuCtxGetCurrent(&current);
  int devices = 0;
  cu.cuDeviceGetCount(&devices);
  auto comm = std::make_shared<ncclComm>();
  bool found = false;
  for (int d = 0; d < devices && !found; ++d) {
    CUcontext primary = nullptr;
    if (cu.cuDeviceGet(&comm->cu_device, d) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&primary, comm->cu_device) != CUDA_SUCCESS) {
      continue;
    }
    if (primary == current && current != nullptr) {
      found = true;
      comm->device = d;
      comm->context = primary;  // retained until the communicator ends
    } else {
      cu.cuDevicePrimaryCtxRelease(comm->cu_device);
    }
  }
  if (!found) return fail(ncclUnhandledCudaError, "no device's context is current");
  comm->rank = rank;
  comm->sent.assign(static_cast<size_t>(count_), 0);
  comm->received.assign(static_cast<size_t>(count_), 0);
  const std::string key(id.internal, sizeof(id.internal));
  State& s = state();
  std::unique_lock lock(s.mu);
  Forming& f = s.forming[key];
  if (!f.clique) {
    f.clique = std::make_shared<Clique>();
    f.clique->size = count_;
    f.ranks.resize(static_cast<size_t>(count_));
  }
  if (f.clique->size != count_ || f.ranks[static_cast<size_t>(rank)]) {
    lock.unlock();
    cu.cuDevicePrimaryCtxRelease(comm->cu_device);
    return fail(ncclInvalidUsage, "another count, or a rank twice, for one unique id");
  }
  comm->clique = f.clique;
  f.ranks[static_cast<size_t>(rank)] = comm;
  if (++f.arrived == count_) f.complete = true;
  s.changed.notify_all();
  const std::shared_ptr<Clique> clique = f.clique;
  const auto mine = [&]() -> Forming* {
    auto it = s.forming.find(key);
    return it != s.forming.end() && it->second.clique == clique ? &it->second : nullptr;
  };
  const bool complete = s.changed.wait_for(lock, std::chrono::seconds(30), [&] {
    Forming* m = mine();
    return m == nullptr || m->complete;
  });
  Forming* m = mine();
  if (!complete || m == nullptr) {
    if (m != nullptr) s.forming.erase(key);
    lock.unlock();
    cu.cuDevicePrimaryCtxRelease(comm->cu_device);
    return fail(ncclSystemError, "not every rank called ncclCommInitRank within 30 s");
  }
  // The last rank to leave lets the forming record go.
  if (++m->left == count_) s.forming.erase(key);
  s.comms.emplace(comm.get(), comm);
  *comm_out = comm.get();
  return ncclSuccess;
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  count("ncclCommFinalize");
  return live(comm) ? ncclSuccess : fail(ncclInvalidArgument, "not a live communicator");
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  count("ncclCommDestroy");
  return end_comm(comm);
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  count("ncclCommAbort");
  return end_comm(comm);
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t handle, ncclResult_t* error) {
  count("ncclCommGetAsyncError");
  std::shared_ptr<ncclComm> comm = live(handle);
  if (!comm || error == nullptr) return fail(ncclInvalidArgument, "not a live communicator");
  {
    std::lock_guard lock(state().mu);
    *error = comm->async_error;
  }
  if (*error == ncclSuccess && axrt_mock_cuda_sticky_error(comm->device) != 0) {
    *error = ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclGroupStart(void) {
  count("ncclGroupStart");
  ++t_group_depth;
  return ncclSuccess;
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclGroupEnd(void) {
  count("ncclGroupEnd");
  if (t_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<Pending> pending = std::move(t_pending);
  t_pending.clear();
  return launch(std::move(pending));
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count_,
                                                 ncclDataType_t type, ncclRedOp_t op,
                                                 ncclComm_t comm, cudaStream_t stream) {
  count("ncclAllReduce");
  return add(comm, stream, Call{Kind::kAllReduce, send, recv, count_, type, op, 0, 0});
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclAllGather(const void* send, void* recv, size_t send_count,
                                                 ncclDataType_t type, ncclComm_t comm,
                                                 cudaStream_t stream) {
  count("ncclAllGather");
  return add(comm, stream, Call{Kind::kAllGather, send, recv, send_count, type, ncclSum, 0, 0});
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* send, void* recv,
                                                     size_t recv_count, ncclDataType_t type,
                                                     ncclRedOp_t op, ncclComm_t comm,
                                                     cudaStream_t stream) {
  count("ncclReduceScatter");
  return add(comm, stream, Call{Kind::kReduceScatter, send, recv, recv_count, type, op, 0, 0});
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count_,
                                                 ncclDataType_t type, int root, ncclComm_t comm,
                                                 cudaStream_t stream) {
  count("ncclBroadcast");
  return add(comm, stream, Call{Kind::kBroadcast, send, recv, count_, type, ncclSum, root, 0});
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclSend(const void* send, size_t count_, ncclDataType_t type,
                                            int peer, ncclComm_t comm, cudaStream_t stream) {
  count("ncclSend");
  return add(comm, stream, Call{Kind::kSend, send, nullptr, count_, type, ncclSum, peer, 0});
}

AXRT_MOCK_NCCL_EXPORT ncclResult_t ncclRecv(void* recv, size_t count_, ncclDataType_t type,
                                            int peer, ncclComm_t comm, cudaStream_t stream) {
  count("ncclRecv");
  return add(comm, stream, Call{Kind::kRecv, nullptr, recv, count_, type, ncclSum, peer, 0});
}

// ---------------------------------------------------------------------------
// 5. The control API
// ---------------------------------------------------------------------------

AXRT_MOCK_NCCL_EXPORT int axrt_mock_nccl_inject_fault(int device, int fault, int code) {
  if (device < 0 || fault < AXRT_MOCK_NCCL_HANG || fault > AXRT_MOCK_NCCL_DEVICE_FAULT) return 1;
  State& s = state();
  std::lock_guard lock(s.mu);
  s.faults[device] = Fault{fault, code};
  return 0;
}

AXRT_MOCK_NCCL_EXPORT uint64_t axrt_mock_nccl_call_count(const char* function) {
  if (function == nullptr) return 0;
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.counts.find(function);
  return it != s.counts.end() ? it->second : 0;
}

AXRT_MOCK_NCCL_EXPORT uint64_t axrt_mock_nccl_live_comms(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.comms.size();
}

AXRT_MOCK_NCCL_EXPORT void axrt_mock_nccl_reset(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.faults.clear();
  s.counts.clear();
  s.last_error.clear();
}

}  // extern "C"

// The exported entry points are the ones the backend loads, with its types.
#define AXRT_MOCK_NCCL_CHECK_SYMBOL(name, ret, params, required)            \
  static_assert(std::is_same_v<decltype(&::name), ret(*) params>, #name \
                " does not match its declaration in group/nccl_api.h");
AXRT_NCCL_SYMBOLS(AXRT_MOCK_NCCL_CHECK_SYMBOL)
#undef AXRT_MOCK_NCCL_CHECK_SYMBOL
