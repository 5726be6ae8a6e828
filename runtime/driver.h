// The driver interface: everything a driver author needs, in one header.
//
// A driver contributes devices to an instance through a factory, and each
// device brings three `static const` vtables of designated initializers: one
// for itself, one for its streams, one for its events. Driver objects derive
// from the core structs below (`struct MyDevice : Device`) and are created
// by the driver, destroyed through their vtable's `destroy`.
//
// The contract, once for every method:
// - The core has validated every argument before a method runs: handles
//   resolved, ranges checked against buffer sizes (overflow-safe), devices
//   matched, options read. A method only does the work.
// - Errors are returned as statuses made with make_status() (base/status.h)
//   and name what failed; the core adds the API function's name.
// - A method that queues work retains what the work touches (the Ref<>s of
//   the arguments) until the work ran; the core may release its references
//   as soon as the method returns.
// - Methods are called from any thread, concurrently for distinct objects and
//   for the same stream (the core serialises nothing); a stream's operations
//   run in the order they were enqueued.
// - Methods marked (optional) may be null; the core answers UNIMPLEMENTED or
//   does without.
//
// What a driver may call back into the core: make_status() and the Failure
// helpers of base/status.h, Ref<> / object_retain / object_release
// (runtime/object.h), the describe() methods below for messages, and
// buffer_return_memory() for a buffer whose memory a deallocation reached.
//
// Registration: a driver lives in its own folder under runtime/drivers/ (or
// outside the tree, see AXRT_EXTERNAL_DRIVERS) whose CMakeLists.txt calls
// axrt_add_driver() (cmake/axrt_driver.cmake) and defines its factory as
// AXRT_DRIVER_FACTORY(name); the registry is generated from the enabled
// drivers. runtime/drivers/null is the skeleton to copy; runtime/drivers/cpu
// is the reference. docs/architecture.md says more.
#ifndef AXRT_RUNTIME_DRIVER_H_
#define AXRT_RUNTIME_DRIVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "axrt/device.h"
#include "axrt/event.h"
#include "axrt/kernel_abi.h"
#include "axrt/memory.h"
#include "axrt/stream.h"
#include "base/status.h"
#include "runtime/object.h"
#include "base/spent_list.h"
#include "trace/trace.h"

namespace axrt {

struct Buffer;
struct CommandBatch;
struct Device;
struct DeviceGraph;
struct Event;
struct Instance;
struct Stream;

// Drops a batch: back to its cache, or deleted. Drivers drop batches like
// any unique_ptr.
struct CommandBatchDeleter {
  void operator()(CommandBatch* batch) const noexcept;
};
using CommandBatchPtr = std::unique_ptr<CommandBatch, CommandBatchDeleter>;

// ---------------------------------------------------------------------------
// Factories
// ---------------------------------------------------------------------------

// What a driver found when asked for its devices.
struct DriverDevices {
  DriverDevices() = default;
  DriverDevices(const DriverDevices&) = delete;
  DriverDevices& operator=(const DriverDevices&) = delete;
  // Destroys the devices the instance did not adopt (runtime/instance.cc).
  ~DriverDevices();

  std::vector<Device*> devices;  // owned until the instance adopts them
  // Why there are no devices ("libcuda.so.1 not found"); empty otherwise.
  std::string availability;
};

struct DriverFactory {
  const char* name;  // "cpu"; device ids are "<name>:<ordinal>"
  // Creates the driver's devices for `instance`, numbering ordinals from 0.
  // Finding no hardware is not an error: return OK with no devices and say
  // why in `availability`. An error fails instance creation.
  axrt_status_t (*enumerate_devices)(Instance* instance, DriverDevices* out);
  // When true the driver takes part only in instances that name it
  // (axrt_instance_options_t::drivers), never in the default set: for
  // drivers that exist to be tested (the null driver).
  bool only_when_named = false;
};

// The symbol of driver `name`'s factory, which the generated registry
// refers to: `const DriverFactory AXRT_DRIVER_FACTORY(cpu) = {...};` after
// AXRT_DECLARE_DRIVER_FACTORY(cpu);.
#define AXRT_DRIVER_FACTORY(name) axrt_driver_factory_##name
#define AXRT_DECLARE_DRIVER_FACTORY(name) \
  extern const ::axrt::DriverFactory AXRT_DRIVER_FACTORY(name)

// The drivers compiled into this library, in enumeration order.
std::span<const DriverFactory* const> builtin_drivers() noexcept;

// ---------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------

// One allocation as a driver hands it out.
struct MemoryBlock {
  std::byte* host_pointer = nullptr;  // set when the memory is host-visible
  uint64_t device_address = 0;        // what kernels are given
  uint64_t size = 0;                  // usable bytes, at least those asked for
  void* driver_data = nullptr;        // the driver's own bookkeeping
};

// The kinds of device code a driver may load (the .axe code object kinds
// other than host code).
enum class DeviceCodeKind : uint8_t { kCudaCubin, kCudaFatbin, kCudaPtx };

// What the executable expects of one kernel of device code: its entry
// symbol, its parameters as the kernel ABI lays them out, and its launch
// shape.
struct DeviceKernelRequest {
  std::string_view symbol;
  std::span<const uint32_t> param_offsets;
  std::span<const uint32_t> param_sizes;
  uint32_t args_size = 0;  // of the kernel ABI argument block
  axrt_kernel_dim3_t workgroup_size{1, 1, 1};
  axrt_kernel_dim3_t cluster_dims{0, 0, 0};  // 0: no clusters
  uint32_t dynamic_shared_memory = 0;
};

// A kernel of device code, ready to launch.
struct DeviceKernel {
  void* handle = nullptr;    // the driver's (a CUfunction)
  uint32_t params_size = 0;  // bytes of the argument block the kernel takes
  axrt_kernel_dim3_t workgroup_size{1, 1, 1};
  axrt_kernel_dim3_t cluster_dims{0, 0, 0};
  uint32_t dynamic_shared_memory = 0;
  std::string name;  // "kernel 'fc1' (sm_90 cubin:axrt_matmul_f32)"
  // For traces, interned (trace/trace.h): the kernel's name ("fc1") and
  // the code it runs (the entry symbol or library function).
  const char* trace_name = nullptr;
  const char* trace_symbol = nullptr;
};

// Device code a driver loaded (a CUDA module or library). Unloads when the
// last owner lets go.
struct DeviceCode {
  virtual ~DeviceCode() = default;
  // Finds kernel `request.symbol`, checks it against the request where the
  // driver can, and prepares it for launch. A missing symbol is NOT_FOUND.
  virtual axrt_status_t get_kernel(const DeviceKernelRequest& request, DeviceKernel* out) = 0;
};

struct DeviceVtable {
  // Frees the device; its streams and events are gone by then.
  void (*destroy)(Device* device);
  // Allocates `size` bytes aligned to `alignment` (a power of two the core
  // has checked against the device's limits). RESOURCE_EXHAUSTED when the
  // memory is not there.
  axrt_status_t (*allocate)(Device* device, uint64_t size, uint64_t alignment,
                            axrt_memory_type_t memory_type, MemoryBlock* out_block);
  // Returns a block from allocate(); called exactly once per block.
  void (*deallocate)(Device* device, axrt_memory_type_t memory_type, const MemoryBlock& block);
  // Fills the counters of the device-local pool.
  void (*query_pool_statistics)(Device* device, axrt_pool_statistics_t* out_statistics);
  // Hands cached memory back until at most `keep_bytes` stay cached.
  axrt_status_t (*trim_pool)(Device* device, uint64_t keep_bytes);
  // Creates a stream or event; the core fills in the common fields after.
  axrt_status_t (*create_stream)(Device* device, Stream** out_stream);
  axrt_status_t (*create_event)(Device* device, Event** out_event);
  // Waits for every stream of the device. Stream failures are the streams'
  // to report: an error here is the device's own (DEVICE_LOST).
  axrt_status_t (*synchronize)(Device* device);
  // (optional) Loads a code object of `kind` built for `target`
  // ("sm_80,sm_90", "compute_80"). Null for drivers that run no device code.
  // UNIMPLEMENTED says the device cannot run this object (another variant
  // may do); other errors say the object is broken.
  axrt_status_t (*load_code)(Device* device, DeviceCodeKind kind, std::string_view target,
                             std::span<const std::byte> image, std::shared_ptr<DeviceCode>* out);
  // (optional) Fills `link`, `link_count`, `direct_access`, `native_atomics`
  // and `performance_rank` of `*out` (the rest is the core's) with how
  // `device` reaches the memory of `peer`, another device of this driver.
  // Null: the core answers as for devices of different drivers (host memory
  // both sides: AXRT_DEVICE_LINK_HOST_MEMORY; else AXRT_DEVICE_LINK_NONE).
  axrt_status_t (*query_peer)(Device* device, Device* peer, axrt_device_peer_info_t* out);
  // (optional, with StreamVtable::launch_graph) Makes the commands of
  // `batch` into a graph that replays them, each replay one launch (a CUDA
  // graph). `batch` has no arena to return: its buffers, which the core
  // keeps allocated and retained as long as the graph, are the ones every
  // replay touches, its argument blocks final. UNIMPLEMENTED says this
  // batch or this device cannot be a graph (a command the driver's graphs
  // lack, a driver without graph support): the core then replays by
  // submitting the batch again. Null: always so.
  axrt_status_t (*create_graph)(Device* device, const CommandBatch& batch,
                                std::unique_ptr<DeviceGraph>* out);
};

struct Device : Object {
  static constexpr ObjectType kType = ObjectType::kDevice;

  explicit Device(const DeviceVtable* vt) : Object(kType), vtable(vt) { properties.numa_node = -1; }

  const DeviceVtable* vtable;
  Instance* instance = nullptr;  // set by the core; owns the references
  // Filled by the driver at creation (id, driver, name, type, flags, limits;
  // `numa_node` starts at -1, unknown).
  axrt_device_properties_t properties{};

  // Core state, left alone by drivers: the kernel libraries initialised on
  // this device (runtime/kernel_library.cc).
  struct KernelLibraryUse {
    const axrt_kernel_library_t* table;
    void* state;
    uint32_t users;
  };
  std::mutex kernel_libraries_mutex;
  std::vector<KernelLibraryUse> kernel_libraries;

  // Counters of queued work (axrt_device_query_stream_statistics): the core
  // counts what it queues; a driver counts `stream_failures` when one of its
  // streams first fails.
  struct StreamCounters {
    std::atomic<uint64_t> streams_created{0}, copies{0}, copy_bytes{0}, fills{0},
        fill_bytes{0}, host_functions{0}, event_records{0}, event_waits{0}, deallocations{0},
        function_calls{0}, dispatches{0}, stream_failures{0};
  } counters;

  const char* id() const noexcept { return properties.id; }
};

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------

// A byte range of one device allocation. The root buffer owns the memory;
// views retain their root. Drivers read buffers and never create them.
struct Buffer : Object {
  static constexpr ObjectType kType = ObjectType::kBuffer;

  Buffer() : Object(kType) {}

  Ref<Device> device;
  Ref<Buffer> root;     // set for views only
  uint64_t offset = 0;  // of this buffer from the start of its allocation
  uint64_t size = 0;
  std::string label;
  // Used instead of `label` when set: a name owned by whoever made the
  // buffer, which outlives it (a function's name for its arenas), so that
  // making the buffer copies no string.
  const std::string* borrowed_label = nullptr;

  // Meaningful on the root only.
  axrt_memory_type_t memory_type = AXRT_MEMORY_TYPE_DEVICE_LOCAL;
  uint64_t alignment = 0;
  MemoryBlock block;  // from the device's allocate(), or wrapped memory
  // Memory the buffer wraps rather than owns (mapped files, imported
  // tensors): called once instead of returning the block to the device.
  void (*release_external)(void* context) = nullptr;
  void* external_context = nullptr;
  std::atomic<bool> deallocated{false};  // handed to a stream deallocation
  // Set by whoever returns the memory, first: buffer_return_memory(), or a
  // driver handing a batch's arena back to its allocator itself (see
  // CommandBatch::arena).
  std::atomic<bool> memory_returned{false};

  Buffer* allocation() noexcept { return root ? root.get() : this; }
  const Buffer* allocation() const noexcept { return root ? root.get() : this; }
  bool host_visible() const noexcept { return allocation()->block.host_pointer != nullptr; }
  bool is_deallocated() const noexcept {
    return allocation()->deallocated.load(std::memory_order_acquire);
  }
  // Host address of byte `offset` of the allocation (not of this view).
  std::byte* host_address(uint64_t allocation_offset) const noexcept {
    return allocation()->block.host_pointer + allocation_offset;
  }
  uint64_t device_address(uint64_t allocation_offset) const noexcept {
    return allocation()->block.device_address + allocation_offset;
  }
  // True for exactly one caller: the one that must now return the memory.
  bool claim_memory_return() noexcept {
    return !memory_returned.exchange(true, std::memory_order_acq_rel);
  }

  // "buffer 'weights' (4096 bytes on cpu:0)": how error messages name it.
  std::string describe() const;
};

// Returns the memory of root buffer `buffer` (to its device's deallocate(),
// or to its external owner), once; later calls do nothing. Any thread.
void buffer_return_memory(Buffer* buffer) noexcept;

// ---------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------

// One side of a copy: a buffer (offsets from the start of its allocation) or
// host memory. Both are set for host-visible memory of another device that
// the core hands over as host memory (runtime/stream.cc): the driver copies
// through `host` as it would through any host pointer, and retains `buffer`
// until the copy ran, as it retains every buffer of a copy.
struct CopyEndpoint {
  Buffer* buffer = nullptr;
  std::byte* host = nullptr;
  uint64_t offset = 0;
  uint64_t pitch = 0;  // 2-D copies: bytes between rows
};

// A `width` x `height` byte copy; 1-D copies have height 1.
struct CopyCommand {
  CopyEndpoint src;
  CopyEndpoint dst;
  uint64_t width = 0;
  uint64_t height = 0;
};

struct StreamVtable {
  // Frees the stream once its queued work has run (the core holds no more
  // references to it); work still queued completes first.
  void (*destroy)(Stream* stream);
  // Each side is a buffer of the stream's device, a host-pinned buffer of
  // any device, or host memory (`host` set); never host memory on both.
  axrt_status_t (*copy)(Stream* stream, const CopyCommand& copy);
  // Repeats the `pattern_size`-byte (1, 2, 4 or 8) `pattern` over `length`
  // bytes; `offset` is from the start of the buffer's allocation.
  axrt_status_t (*fill)(Stream* stream, Buffer* buffer, uint64_t offset, uint64_t length,
                        uint64_t pattern, uint32_t pattern_size);
  // Runs `func` once the earlier work completed, telling it the stream's
  // failure (or NULL); a status it returns fails the stream.
  axrt_status_t (*launch_host_func)(Stream* stream, axrt_host_func_t func, void* user_data);
  axrt_status_t (*record_event)(Stream* stream, Event* event);
  // `event` may come from another device or driver.
  axrt_status_t (*wait_event)(Stream* stream, Event* event);
  // Returns the memory of root buffer `buffer` in stream order (with
  // buffer_return_memory() or the driver's own allocator).
  axrt_status_t (*deallocate_buffer)(Stream* stream, Buffer* buffer);
  // Runs the commands of `batch` in order, as one unit of stream work (the
  // driver takes ownership). A command that fails fails the stream.
  axrt_status_t (*submit_batch)(Stream* stream, CommandBatchPtr batch);
  // Waits for the work queued so far; returns the sticky failure, if any.
  axrt_status_t (*synchronize)(Stream* stream);
  // Whether the work queued so far has completed; the sticky failure, if any.
  axrt_status_t (*query)(Stream* stream, bool* out_idle);
  // (optional) The driver's own queue behind the stream (a CUstream). Null
  // for drivers without native queues: the core answers UNIMPLEMENTED.
  axrt_status_t (*get_native_handle)(Stream* stream, void** out_handle);
  // (optional) A peer copy: like copy(), where one side or both is
  // device-local memory of another device of this driver (the other side as
  // copy() takes it). The stream orders it against its own work only; what
  // the other device does with that memory the application orders with
  // events. Null for drivers that cannot copy between their own devices:
  // the core then reaches host-visible memory through its host pointer and
  // answers UNIMPLEMENTED for the rest.
  axrt_status_t (*copy_peer)(Stream* stream, const CopyCommand& copy);
  // (optional, with DeviceVtable::create_graph) Queues one replay of
  // `graph`, made by this stream's device, in stream order like a batch:
  // retains `keep` (which owns the graph and the buffers it touches) until
  // the replay ran; a replay that fails fails the stream.
  axrt_status_t (*launch_graph)(Stream* stream, DeviceGraph* graph, Ref<Object> keep);
};

struct Stream : Object {
  static constexpr ObjectType kType = ObjectType::kStream;

  explicit Stream(const StreamVtable* vt) : Object(kType), vtable(vt) {}
  ~Stream();  // forgets the trace track

  const StreamVtable* vtable;
  Ref<Device> device;  // set by the core
  std::string label;
  // The stream's timeline in traces (trace/trace.h), set by the core; 0 for
  // streams the core made for itself. Drivers stamp the operations they
  // queue with it (trace::stamp) and record them when they run.
  uint32_t trace_track = 0;

  // "stream 'prefill' on cpu:0"
  std::string describe() const;
};

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

struct EventVtable {
  void (*destroy)(Event* event);
  // The event has been recorded at least once when these are called.
  axrt_status_t (*query)(Event* event, bool* out_complete);
  // Waits for the latest record; DEADLINE_EXCEEDED after `timeout_ns`.
  axrt_status_t (*wait)(Event* event, uint64_t timeout_ns);
  // Both events belong to the same device and completed.
  axrt_status_t (*elapsed_time)(Event* start, Event* end, int64_t* out_nanoseconds);
  // (optional) Makes `native_stream`, a queue of this driver's native API
  // (not NULL), wait for the latest record. Null for drivers without native
  // queues: the core answers UNIMPLEMENTED.
  axrt_status_t (*enqueue_native_wait)(Event* event, void* native_stream);
};

struct Event : Object {
  static constexpr ObjectType kType = ObjectType::kEvent;

  explicit Event(const EventVtable* vt) : Object(kType), vtable(vt) {}

  const EventVtable* vtable;
  Ref<Device> device;  // set by the core
  axrt_event_flags_t flags = 0;
  std::string label;
  std::atomic<bool> ever_recorded{false};

  // "event 'done' on cpu:0"
  std::string describe() const;
};

// ---------------------------------------------------------------------------
// Command batches: one function call's commands
// ---------------------------------------------------------------------------

// A CPU kernel ready to dispatch: a library's function and its state on the
// device.
struct HostKernel {
  axrt_cpu_kernel_fn_t function = nullptr;
  void* library_state = nullptr;
  axrt_kernel_dim3_t workgroup_size{1, 1, 1};
  uint32_t dynamic_shared_memory = 0;
  std::string name;  // "kernel 'fc1' (axrt.cpu:axrt_matmul_f32)"
  // For traces, interned (trace/trace.h): the kernel's name ("fc1") and
  // the code it runs (the entry symbol or library function).
  const char* trace_name = nullptr;
  const char* trace_symbol = nullptr;
};

struct BatchCommand {
  enum class Kind : uint8_t { kDispatch, kCopy, kFill };
  Kind kind = Kind::kDispatch;
  // kDispatch: a CPU kernel (host devices) or device code (the others)
  const HostKernel* host_kernel = nullptr;
  const DeviceKernel* device_kernel = nullptr;
  uint32_t args_offset = 0;  // in bytes into CommandBatch::args
  uint32_t args_size = 0;
  axrt_kernel_dim3_t workgroup_count{1, 1, 1};
  // kCopy
  CopyCommand copy;
  // kFill
  Buffer* fill_buffer = nullptr;
  uint64_t fill_offset = 0;  // from the start of the allocation
  uint64_t fill_length = 0;
  uint64_t fill_pattern = 0;
  uint32_t fill_pattern_size = 0;
};

// The commands of one function call, resolved to buffers, addresses and
// argument blocks; the driver runs them in order as one unit of stream work.
// Drivers see no format types: the core builds batches from executables.
class BatchCache;

struct CommandBatch {
  CommandBatch() = default;
  CommandBatch(const CommandBatch&) = delete;
  CommandBatch& operator=(const CommandBatch&) = delete;
  // Returns the arena's memory when no driver did: a batch dropped before a
  // stream took it (its submission failed) (runtime/command_batch.cc).
  ~CommandBatch();
  // Back to an empty batch, keeping what its vectors hold room for; does
  // the destructor's work first. `owner` is the caller's to drop.
  void clear() noexcept;

  // What the batch is, for failure messages: "function 'main' of
  // executable 'mlp.axe'".
  const std::string* label = nullptr;
  // For traces (interned): the function's name and its executable's.
  const char* trace_name = nullptr;
  const char* trace_detail = nullptr;
  std::vector<BatchCommand> commands;
  // The index of `commands[0]` among the function's commands, which
  // failure messages and traces give as `command_base + i`: 0 for a whole
  // call; a call split into one batch per command (the checks and dumps of
  // runtime/debug_calls.h) numbers each batch's command as the function does.
  uint32_t command_base = 0;
  // The argument blocks, each at an 8-byte aligned offset.
  std::vector<uint64_t> args;
  // Every buffer the commands touch, and the object that owns the kernels.
  std::vector<Ref<Buffer>> buffers;
  Ref<Object> owner;
  // The call's transient memory (a root buffer of the stream's device, also
  // in `buffers`), or null. Nothing outside the batch uses it: once the
  // commands ran, failed or were skipped, the driver returns its memory in
  // stream order itself (claim_memory_return(), then its own allocator),
  // as deallocate_buffer() would.
  Buffer* arena = nullptr;
  // When set, the driver stores how long the batch ran (ns), and may run
  // the batch on the calling thread when the last run was short.
  std::atomic<uint64_t>* last_duration_ns = nullptr;
  // Where the batch goes back when dropped, or null (then it is deleted).
  BatchCache* cache = nullptr;

  const void* args_at(uint32_t offset) const noexcept {
    return reinterpret_cast<const std::byte*>(args.data()) + offset;
  }
};

// A function's spent batches, kept with the room their vectors grew to, so
// that a call in the steady state allocates no host memory for its batch.
// Thread-safe: batches come back on whichever thread the stream drops them.
class BatchCache {
 public:
  BatchCache() = default;
  BatchCache(const BatchCache&) = delete;
  BatchCache& operator=(const BatchCache&) = delete;
  ~BatchCache();

  // A spent batch, or a new one (throws std::bad_alloc).
  CommandBatchPtr take();
  // Clears `batch` and keeps it, or deletes it when the cache is full.
  void put(CommandBatch* batch) noexcept;

 private:
  SpentList<CommandBatch, 8> spent_;  // batches in flight per function, enough
};

// ---------------------------------------------------------------------------
// Graphs: a captured call that the driver replays whole
// ---------------------------------------------------------------------------

// What DeviceVtable::create_graph makes: the driver's own replayable form of
// a batch. Destroyed by the core with no replay in flight (every replay
// retains the owner of the graph until it ran).
struct DeviceGraph {
  DeviceGraph() = default;
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;
  virtual ~DeviceGraph() = default;

  // For traces and messages, from the batch: the function's names (interned)
  // and its label ("function 'step' of executable 'model.axe'"), which the
  // owner outlives the graph with.
  const char* trace_name = nullptr;
  const char* trace_detail = nullptr;
  const std::string* label = nullptr;
  uint32_t commands = 0;  // of the batch it was made from
};

// What a driver records in a trace for `command`, command `index` of its
// function (trace/trace.h); the driver sets the times and the track.
inline trace::Record command_trace_record(const BatchCommand& command, size_t index) noexcept {
  trace::Record r;
  r.a[0] = static_cast<int64_t>(index);
  switch (command.kind) {
    case BatchCommand::Kind::kDispatch:
      if (const HostKernel* k = command.host_kernel) {
        trace::set_dispatch(&r, index, k->trace_name, k->trace_symbol, command.workgroup_count,
                            k->workgroup_size);
      } else if (const DeviceKernel* k = command.device_kernel) {
        trace::set_dispatch(&r, index, k->trace_name, k->trace_symbol, command.workgroup_count,
                            k->workgroup_size);
      } else {
        r.kind = trace::Kind::kDispatch;
      }
      break;
    case BatchCommand::Kind::kCopy:
      r.kind = trace::Kind::kBatchCopy;
      r.a[1] = static_cast<int64_t>(command.copy.width * command.copy.height);
      break;
    case BatchCommand::Kind::kFill:
      r.kind = trace::Kind::kBatchFill;
      r.a[1] = static_cast<int64_t>(command.fill_length);
      break;
  }
  return r;
}

}  // namespace axrt

#endif  // AXRT_RUNTIME_DRIVER_H_
