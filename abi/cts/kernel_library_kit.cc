#include "abi/cts/kernel_library_kit.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include "tests/support/axe_test_builder.h"

namespace axrt_cts {
namespace {

using namespace axrt_test;

// Bytes of guard around every buffer of a direct call, and their value.
constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xE7;
// What writable buffers hold before the coverage runs.
constexpr uint8_t kSentinel = 0xA5;
constexpr uint8_t kSecondSentinel = 0x5A;
// Direct calls keep grids small enough to run every order quickly.
constexpr uint64_t kMaxDirectWorkgroups = uint64_t{1} << 16;
constexpr size_t kMessageCapacity = 512;
// The smallest table of ABI version 1: up to and including deinit.
constexpr size_t kLibraryV1Size = offsetof(axrt_kernel_library_t, deinit) + sizeof(void*);

std::string Str(const char* s) { return s != nullptr ? s : "<null>"; }

std::string ParamLabel(const axrt_kernel_info_t& kernel, uint32_t index) {
  std::ostringstream out;
  out << "parameter " << index << " ('" << Str(kernel.params[index].name) << "')";
  return out.str();
}

// Offsets of the parameters and the block's size by the C rules of
// docs/kernel-abi.md §1; nullopt when a parameter has no defined size.
struct ArgsLayout {
  std::vector<uint32_t> offsets;
  uint32_t size = 0;
};

std::optional<ArgsLayout> LayoutOf(const axrt_kernel_info_t& kernel) {
  ArgsLayout layout;
  uint64_t offset = 0;
  uint64_t max_alignment = 1;
  for (uint32_t i = 0; i < kernel.param_count; ++i) {
    const axrt_kernel_param_info_t& p = kernel.params[i];
    uint64_t size = 0;
    if (p.kind == AXRT_KERNEL_PARAM_KIND_BUFFER) size = 8;
    if (p.kind == AXRT_KERNEL_PARAM_KIND_SCALAR) size = axrt_kernel_scalar_size(p.scalar_type);
    if (size == 0) return std::nullopt;
    offset = (offset + size - 1) / size * size;
    layout.offsets.push_back(static_cast<uint32_t>(offset));
    offset += size;
    max_alignment = std::max(max_alignment, size);
  }
  layout.size = static_cast<uint32_t>((offset + max_alignment - 1) / max_alignment * max_alignment);
  return layout;
}

const axrt_kernel_info_t* FindKernel(const axrt_kernel_library_t* library,
                                     const std::string& name) {
  for (uint32_t k = 0; k < library->kernel_count; ++k) {
    if (library->kernels[k].name != nullptr && name == library->kernels[k].name) {
      return &library->kernels[k];
    }
  }
  return nullptr;
}

// "" when equal; otherwise how many bytes differ and the first of them.
std::string Difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got == want) return {};
  std::ostringstream out;
  if (got.size() != want.size()) {
    out << got.size() << " bytes instead of " << want.size();
    return out.str();
  }
  size_t count = 0;
  size_t first = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      ++count;
      first = std::min(first, i);
    }
  }
  out << count << " of " << got.size() << " bytes differ, the first at offset " << first << " (0x"
      << std::hex << int{got[first]} << " instead of 0x" << int{want[first]} << ")";
  return out.str();
}

std::string DescribeWorkgroup(axrt_kernel_dim3_t id) {
  std::ostringstream out;
  out << "workgroup (" << id.x << ", " << id.y << ", " << id.z << ")";
  return out.str();
}

axrt_kernel_dim3_t WorkgroupOf(uint64_t linear, axrt_kernel_dim3_t grid) {
  return {static_cast<uint32_t>(linear % grid.x), static_cast<uint32_t>((linear / grid.x) % grid.y),
          static_cast<uint32_t>(linear / (uint64_t{grid.x} * grid.y))};
}

uint64_t WorkgroupCount(axrt_kernel_dim3_t grid) { return uint64_t{grid.x} * grid.y * grid.z; }

// ---------------------------------------------------------------------------
// Lifecycle: init/deinit trampolines over a fixed pool of slots
// ---------------------------------------------------------------------------

constexpr const char kProbeKernel[] = "axrt_kit_library_state_probe";

struct LifecycleSlot {
  std::atomic<bool> busy{false};
  const axrt_kernel_library_t* original = nullptr;
  std::string name;
  std::vector<axrt_kernel_info_t> kernels;
  axrt_kernel_library_t table{};
  // Written by init and deinit, which the runtime never runs concurrently
  // for one library on one device; read by the check after the calls.
  std::mutex mutex;
  int init_calls = 0;
  int deinit_calls = 0;
  void* init_state = nullptr;
  void* deinit_state = nullptr;
  std::string init_device_id;
  uint32_t init_worker_count = 0;
};

std::array<LifecycleSlot, kLifecycleSlots> g_slots;

template <size_t kSlot>
axrt_kernel_result_t SlotInit(const axrt_kernel_library_context_t* context, void** out_state) {
  LifecycleSlot& slot = g_slots[kSlot];
  void* state = nullptr;
  if (slot.original->init != nullptr) {
    const axrt_kernel_result_t result = slot.original->init(context, &state);
    if (result != AXRT_KERNEL_OK) return result;
  }
  std::lock_guard<std::mutex> lock(slot.mutex);
  ++slot.init_calls;
  slot.init_state = state;
  slot.init_device_id = Str(context->device_id);
  slot.init_worker_count = context->worker_count;
  *out_state = state;
  return AXRT_KERNEL_OK;
}

template <size_t kSlot>
void SlotDeinit(void* state) {
  LifecycleSlot& slot = g_slots[kSlot];
  {
    std::lock_guard<std::mutex> lock(slot.mutex);
    ++slot.deinit_calls;
    slot.deinit_state = state;
  }
  if (slot.original->deinit != nullptr) slot.original->deinit(state);
}

// The extra kernel: writes the dispatch's library_state, and whether the
// worker id was below the worker count, into a uint64[2] buffer.
struct ProbeArgs {
  uint64_t* out;
};
static_assert(sizeof(ProbeArgs) == 8);

axrt_kernel_result_t Probe(const void* args, const axrt_kernel_dispatch_t* dispatch,
                           const axrt_kernel_workgroup_t* workgroup) {
  const auto& a = *static_cast<const ProbeArgs*>(args);
  a.out[0] = reinterpret_cast<uintptr_t>(dispatch->library_state);
  a.out[1] = workgroup->worker_id < dispatch->worker_count ? 1 : 0;
  return AXRT_KERNEL_OK;
}

const axrt_kernel_param_info_t kProbeParams[] = {
    {"out", AXRT_KERNEL_PARAM_KIND_BUFFER, 0, nullptr},
};

template <size_t... kSlots>
constexpr auto MakeInits(std::index_sequence<kSlots...>) {
  return std::array{&SlotInit<kSlots>...};
}
template <size_t... kSlots>
constexpr auto MakeDeinits(std::index_sequence<kSlots...>) {
  return std::array{&SlotDeinit<kSlots>...};
}
constexpr auto kSlotInits = MakeInits(std::make_index_sequence<kLifecycleSlots>());
constexpr auto kSlotDeinits = MakeDeinits(std::make_index_sequence<kLifecycleSlots>());

// Holds a slot bound to one library; frees it when destroyed.
class SlotLease {
 public:
  explicit SlotLease(const axrt_kernel_library_t* library) {
    for (size_t i = 0; i < g_slots.size(); ++i) {
      bool expected = false;
      if (!g_slots[i].busy.compare_exchange_strong(expected, true)) continue;
      slot_ = &g_slots[i];
      LifecycleSlot& s = *slot_;
      s.original = library;
      s.name = std::string(library->name) + ".kit_lifecycle";
      s.kernels.assign(library->kernels, library->kernels + library->kernel_count);
      s.kernels.push_back({kProbeKernel, Probe, kProbeParams, 1, sizeof(ProbeArgs)});
      s.table = {};
      s.table.struct_size = sizeof(axrt_kernel_library_t);
      s.table.abi_version = library->abi_version;
      s.table.version = library->version;
      s.table.name = s.name.c_str();
      s.table.kernels = s.kernels.data();
      s.table.kernel_count = static_cast<uint32_t>(s.kernels.size());
      s.table.init = kSlotInits[i];
      s.table.deinit = kSlotDeinits[i];
      s.init_calls = s.deinit_calls = 0;
      s.init_state = s.deinit_state = nullptr;
      s.init_device_id.clear();
      s.init_worker_count = 0;
      return;
    }
  }
  ~SlotLease() {
    if (slot_ != nullptr) slot_->busy.store(false);
  }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;

  LifecycleSlot* slot() const { return slot_; }

 private:
  LifecycleSlot* slot_ = nullptr;
};

struct SlotCounts {
  int inits;
  int deinits;
};

SlotCounts CountsOf(LifecycleSlot& slot) {
  std::lock_guard<std::mutex> lock(slot.mutex);
  return {slot.init_calls, slot.deinit_calls};
}

std::string ParamName(const axrt_kernel_param_info_t& p, uint32_t index) {
  if (p.name != nullptr && p.name[0] != '\0') return p.name;
  std::string name = "p";
  name += std::to_string(index);
  return name;
}

// An executable declaring every kernel of the slot's table that reads no
// quantization layout (so that the loader matches their parameter tables)
// and one function, "probe", dispatching the probe kernel once.
std::vector<uint8_t> LifecycleFile(const LifecycleSlot& slot) {
  AxeBuilder b;
  const uint32_t lib = b.AddLibrary(slot.name);
  for (const axrt_kernel_info_t& kernel : slot.kernels) {
    if (std::string(kernel.name) == kProbeKernel) continue;
    std::vector<Param> params;
    bool has_layout = false;
    for (uint32_t i = 0; i < kernel.param_count; ++i) {
      const axrt_kernel_param_info_t& p = kernel.params[i];
      has_layout = has_layout || p.layout_id != nullptr;
      params.push_back(p.kind == AXRT_KERNEL_PARAM_KIND_BUFFER
                           ? BufferParam(ParamName(p, i), AXRT_AXE_ACCESS_READ_WRITE)
                           : ScalarParam(ParamName(p, i), p.scalar_type));
    }
    if (!has_layout) b.AddKernel(kernel.name, lib, kernel.name, params);
  }
  const uint32_t probe =
      b.AddKernel("kit.probe", lib, kProbeKernel, {BufferParam("out", AXRT_AXE_ACCESS_WRITE)});
  const uint32_t f = b.AddFunction("probe", {}, {}, {{"out", AXRT_AXE_DTYPE_UINT64, {Fixed(2)}}});
  b.Dispatch(f, probe, {Lit(1)}, {BindOutput(0)});
  return b.Bytes();
}

// Calls the probe function of `executable` and returns what it wrote.
std::vector<uint64_t> CallProbe(axrt_executable_t executable) {
  Function fn;
  REQUIRE_OK(axrt_executable_find_function(executable, "probe", Out(fn)));
  Device device;
  REQUIRE_OK(axrt_executable_get_device(executable, Out(device)));
  Stream stream;
  REQUIRE_OK(axrt_stream_create(device.get(), nullptr, Out(stream)));
  axrt_tensor_t outputs[] = {nullptr};
  REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), nullptr, 0, outputs, 1, nullptr));
  Tensor out(outputs[0]);
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  axrt_tensor_info_t info = AXRT_TENSOR_INFO_INIT;
  REQUIRE_OK(axrt_tensor_query_info(out.get(), &info));
  Buffer buffer;
  REQUIRE_OK(axrt_tensor_get_buffer(out.get(), Out(buffer)));
  std::vector<uint64_t> words(2, 0);
  REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), buffer.get(), info.byte_offset, words.data(),
                                      sizeof(uint64_t) * words.size()));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  return words;
}

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

// Checks that `c` fits `kernel`'s table; false (after failed CHECKs) when it
// does not, and the case cannot run.
bool ValidateCase(const axrt_kernel_info_t& kernel, const KernelCase& c,
                  const KitOptions& options) {
  bool ok = true;
  size_t buffers = 0;
  size_t scalars = 0;
  for (uint32_t i = 0; i < kernel.param_count; ++i) {
    const axrt_kernel_param_info_t& p = kernel.params[i];
    INFO(ParamLabel(kernel, i));
    if (p.kind == AXRT_KERNEL_PARAM_KIND_BUFFER) {
      if (buffers < c.buffers.size()) {
        const CaseBuffer& buffer = c.buffers[buffers];
        if (buffer.bytes.empty()) {
          FAIL_CHECK("the case's buffer " << buffers << " is empty; buffers hold at least 1 byte");
          ok = false;
        }
        const std::string wanted = p.layout_id != nullptr ? p.layout_id : "";
        const std::string given =
            buffer.layout != nullptr && buffer.layout->layout_id ? buffer.layout->layout_id : "";
        if (p.layout_id != nullptr && buffer.layout == nullptr) {
          FAIL_CHECK("the kernel reads layout '" << wanted << "' but the case's buffer " << buffers
                                                 << " supplies no layout");
          ok = false;
        } else if (p.layout_id == nullptr && buffer.layout != nullptr) {
          FAIL_CHECK("the kernel reads plain data but the case's buffer "
                     << buffers << " supplies layout '" << given << "'");
          ok = false;
        } else if (wanted != given) {
          FAIL_CHECK("the kernel reads layout '" << wanted << "' but the case's buffer " << buffers
                                                 << " supplies layout '" << given << "'");
          ok = false;
        }
      }
      ++buffers;
    } else {
      if (scalars < c.scalars.size()) {
        const uint32_t size = axrt_kernel_scalar_size(p.scalar_type);
        if (size < 8 && (c.scalars[scalars] >> (8 * size)) != 0) {
          FAIL_CHECK("the case's scalar " << scalars << " (0x" << std::hex << c.scalars[scalars]
                                          << ") does not fit the parameter's " << std::dec << size
                                          << " bytes");
          ok = false;
        }
      }
      ++scalars;
    }
  }
  if (buffers != c.buffers.size()) {
    FAIL_CHECK("the kernel has " << buffers << " buffer parameters but the case gives "
                                 << c.buffers.size() << " buffers");
    ok = false;
  }
  if (scalars != c.scalars.size()) {
    FAIL_CHECK("the kernel has " << scalars << " scalar parameters but the case gives "
                                 << c.scalars.size() << " scalars");
    ok = false;
  }
  if (std::none_of(c.buffers.begin(), c.buffers.end(),
                   [](const CaseBuffer& b) { return b.writable; })) {
    FAIL_CHECK("the case has no writable buffer: there is nothing to check");
    ok = false;
  }
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 ||
      WorkgroupCount(c.grid) > kMaxDirectWorkgroups) {
    FAIL_CHECK("the case's grid (" << c.grid.x << ", " << c.grid.y << ", " << c.grid.z
                                   << ") is empty or has more than " << kMaxDirectWorkgroups
                                   << " workgroups");
    ok = false;
  }
  if (options.reach == KitOptions::Reach::kEmbedded && options.host_shared_object.empty()) {
    FAIL_CHECK("KitOptions::reach is kEmbedded but host_shared_object is empty");
    ok = false;
  }
  if (options.worker_count == 0) {
    FAIL_CHECK("KitOptions::worker_count is 0");
    ok = false;
  }
  return ok;
}

// The case through the runtime: an executable with one function "main"
// whose inputs are the read-only buffers and outputs the writable ones
// (supplied pre-filled), dispatching the kernel once over the grid. Returns
// every buffer's final bytes, or nullopt after a failed check.
std::optional<std::vector<std::vector<uint8_t>>> RunThroughRuntime(
    const DeviceTest& test, const axrt_kernel_library_t* library, const axrt_kernel_info_t& kernel,
    const KernelCase& c, const KitOptions& options) {
  AxeBuilder b;
  const uint32_t code = options.reach == KitOptions::Reach::kEmbedded
                            ? b.AddCode(AXRT_AXE_CODE_OBJECT_KIND_HOST_SHARED_OBJECT,
                                        AXRT_HOST_CODE_TARGET, options.host_shared_object)
                            : b.AddLibrary(library->name);
  std::vector<Param> params;
  std::vector<Sig> inputs;
  std::vector<Sig> outputs;
  std::vector<Binding> bindings;
  size_t buffer_index = 0;
  size_t scalar_index = 0;
  for (uint32_t i = 0; i < kernel.param_count; ++i) {
    const axrt_kernel_param_info_t& p = kernel.params[i];
    const std::string name = ParamName(p, i);
    if (p.kind == AXRT_KERNEL_PARAM_KIND_SCALAR) {
      params.push_back(ScalarParam(name, p.scalar_type));
      bindings.push_back(BindScalar(Lit(c.scalars[scalar_index++])));
      continue;
    }
    const CaseBuffer& buffer = c.buffers[buffer_index];
    std::string sig_name = "b";
    sig_name += std::to_string(buffer_index);
    sig_name += ".";
    sig_name += name;
    const Sig sig{sig_name, AXRT_AXE_DTYPE_UINT8, {Fixed(buffer.bytes.size())}};
    Param param = BufferParam(name, !buffer.writable       ? AXRT_AXE_ACCESS_READ
                                    : buffer.fully_written ? AXRT_AXE_ACCESS_WRITE
                                                           : AXRT_AXE_ACCESS_READ_WRITE);
    param.layout = buffer.layout;
    params.push_back(param);
    if (buffer.writable) {
      bindings.push_back(BindOutput(static_cast<uint32_t>(outputs.size())));
      outputs.push_back(sig);
    } else {
      bindings.push_back(BindInput(static_cast<uint32_t>(inputs.size())));
      inputs.push_back(sig);
    }
    ++buffer_index;
  }
  const uint32_t k =
      b.AddKernel("kit.kernel", code, kernel.name, params, {1, 1, 1}, c.dynamic_shared_memory);
  const uint32_t f = b.AddFunction("main", {}, inputs, outputs);
  b.Dispatch(f, k, {Lit(c.grid.x), Lit(c.grid.y), Lit(c.grid.z)}, bindings);

  const axrt_executable_load_flags_t flags =
      options.reach == KitOptions::Reach::kEmbedded ? AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE : 0;
  Executable exe;
  {
    Status status(LoadBytes(test.device(), b.Bytes(), flags, Out(exe)));
    INFO("loading the case's executable returned " << Describe(status.get()));
    CHECK(status == nullptr);
    if (status != nullptr) return std::nullopt;
  }
  Function fn;
  REQUIRE_OK(axrt_executable_find_function(exe.get(), "main", Out(fn)));

  std::vector<Tensor> tensors;
  std::vector<axrt_tensor_t> input_handles;
  std::vector<axrt_tensor_t> output_handles;
  for (const CaseBuffer& buffer : c.buffers) {
    tensors.push_back(NewTensor(test, AXRT_DTYPE_UINT8, {static_cast<int64_t>(buffer.bytes.size())},
                                buffer.bytes.data()));
    (buffer.writable ? output_handles : input_handles).push_back(tensors.back().get());
  }
  Stream stream = test.NewStream("kernel library kit");
  {
    Status status(axrt_function_invoke(fn.get(), stream.get(), input_handles.data(),
                                       input_handles.size(), output_handles.data(),
                                       output_handles.size(), nullptr));
    INFO("invoking the case's function returned " << Describe(status.get()));
    CHECK(status == nullptr);
    if (status != nullptr) return std::nullopt;
  }
  {
    Status status(axrt_stream_synchronize(stream.get()));
    INFO("the runtime's dispatch completed with " << Describe(status.get()));
    CHECK(status == nullptr);
    if (status != nullptr) return std::nullopt;
  }
  std::vector<std::vector<uint8_t>> results;
  for (const Tensor& tensor : tensors) results.push_back(ReadTensor(test, tensor.get()));
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    if (c.buffers[i].writable) continue;
    INFO("runtime run: read-only buffer " << i << ": "
                                          << Difference(results[i], c.buffers[i].bytes));
    CHECK(results[i] == c.buffers[i].bytes);
  }
  return results;
}

// What init returned for the direct calls; deinit runs on destruction.
class DirectState {
 public:
  DirectState(const axrt_kernel_library_t* library, uint32_t worker_count) : library_(library) {
    if (library->init == nullptr) return;
    char message[kMessageCapacity] = {};
    const std::string device_id = DeviceUnderTestId();
    axrt_kernel_library_context_t context = {};
    context.struct_size = sizeof(context);
    context.device_id = device_id.c_str();
    context.worker_count = worker_count;
    context.error_message = message;
    context.error_message_capacity = sizeof(message);
    const axrt_kernel_result_t result = library->init(&context, &state_);
    message[sizeof(message) - 1] = '\0';
    INFO("init for the direct calls returned " << result << ": " << message);
    CHECK(result == AXRT_KERNEL_OK);
    initialised_ = result == AXRT_KERNEL_OK;
  }
  ~DirectState() {
    if (initialised_ && library_->deinit != nullptr) library_->deinit(state_);
  }
  DirectState(const DirectState&) = delete;
  DirectState& operator=(const DirectState&) = delete;

  bool ok() const { return initialised_ || library_->init == nullptr; }
  void* state() const { return state_; }

 private:
  const axrt_kernel_library_t* library_;
  void* state_ = nullptr;
  bool initialised_ = false;
};

// A buffer of a direct call: 64-byte aligned, with kGuardBytes of
// kGuardByte on each side.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(const std::vector<uint8_t>& initial)
      : size_(initial.size()), storage_(size_ + 2 * kGuardBytes + 63, kGuardByte) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data()) + kGuardBytes;
    offset_ =
        static_cast<size_t>((base + 63) / 64 * 64 - reinterpret_cast<uintptr_t>(storage_.data()));
    std::copy(initial.begin(), initial.end(), storage_.begin() + static_cast<ptrdiff_t>(offset_));
  }
  uint8_t* data() { return storage_.data() + offset_; }
  std::vector<uint8_t> contents() const {
    const auto begin = storage_.begin() + static_cast<ptrdiff_t>(offset_);
    return {begin, begin + static_cast<ptrdiff_t>(size_)};
  }
  // The first guard byte that changed, as an offset from the buffer's start
  // (negative before it), or nullopt.
  std::optional<int64_t> DamagedGuard() const {
    for (size_t i = offset_ - kGuardBytes; i < offset_; ++i) {
      if (storage_[i] != kGuardByte) return static_cast<int64_t>(i) - static_cast<int64_t>(offset_);
    }
    for (size_t i = offset_ + size_; i < offset_ + size_ + kGuardBytes; ++i) {
      if (storage_[i] != kGuardByte) return static_cast<int64_t>(i - offset_);
    }
    return std::nullopt;
  }

 private:
  size_t size_;
  std::vector<uint8_t> storage_;
  size_t offset_ = 0;
};

// Calls the kernel function directly, one workgroup at a time.
class DirectRunner {
 public:
  DirectRunner(const axrt_kernel_info_t& kernel, const ArgsLayout& layout, const KernelCase& c,
               const KitOptions& options, void* state)
      : kernel_(kernel), layout_(layout), case_(c), options_(options), state_(state) {}

  // Runs the workgroups `order` (linear, x fastest) into fresh buffers whose
  // writable ones start as `fill` bytes, or as the case's bytes when
  // nullopt. Returns every buffer's final bytes, or nullopt after a failed
  // check.
  std::optional<std::vector<std::vector<uint8_t>>> Run(std::span<const uint64_t> order,
                                                       std::optional<uint8_t> fill,
                                                       const std::string& what) const {
    INFO("direct calls, " << what);
    std::vector<GuardedBuffer> buffers;
    for (const CaseBuffer& b : case_.buffers) {
      buffers.emplace_back(b.writable && fill ? std::vector<uint8_t>(b.bytes.size(), *fill)
                                              : b.bytes);
    }
    std::vector<uint64_t> block((layout_.size + 7) / 8 + 1, 0);
    auto* bytes = reinterpret_cast<uint8_t*>(block.data());
    size_t buffer_index = 0;
    size_t scalar_index = 0;
    for (uint32_t i = 0; i < kernel_.param_count; ++i) {
      if (kernel_.params[i].kind == AXRT_KERNEL_PARAM_KIND_BUFFER) {
        const uint64_t address = reinterpret_cast<uintptr_t>(buffers[buffer_index++].data());
        std::memcpy(bytes + layout_.offsets[i], &address, 8);
      } else {
        const uint64_t value = case_.scalars[scalar_index++];
        std::memcpy(bytes + layout_.offsets[i], &value,
                    axrt_kernel_scalar_size(kernel_.params[i].scalar_type));  // little-endian
      }
    }
    const std::vector<uint64_t> block_before = block;

    axrt_kernel_dispatch_t dispatch = {};
    dispatch.struct_size = sizeof(dispatch);
    dispatch.workgroup_count = case_.grid;
    dispatch.workgroup_size = {1, 1, 1};
    dispatch.dynamic_shared_memory_size = case_.dynamic_shared_memory;
    dispatch.worker_count = options_.worker_count;
    dispatch.library_state = state_;
    const axrt_kernel_dispatch_t dispatch_before = dispatch;
    std::vector<uint8_t> scratch_storage(case_.dynamic_shared_memory + 64);
    uint8_t* scratch =
        case_.dynamic_shared_memory == 0
            ? nullptr
            : scratch_storage.data() +
                  (64 - reinterpret_cast<uintptr_t>(scratch_storage.data()) % 64) % 64;

    for (size_t i = 0; i < order.size(); ++i) {
      const axrt_kernel_dim3_t id = WorkgroupOf(order[i], case_.grid);
      // Scratch contents are undefined on entry: give each call other bytes.
      if (scratch != nullptr) {
        std::memset(scratch, static_cast<int>((0x3B + 29 * i) & 0xff), case_.dynamic_shared_memory);
      }
      char message[kMessageCapacity] = {};
      axrt_kernel_workgroup_t workgroup = {};
      workgroup.struct_size = sizeof(workgroup);
      workgroup.workgroup_id = id;
      workgroup.worker_id = static_cast<uint32_t>((i * 7 + order[i]) % options_.worker_count);
      workgroup.dynamic_shared_memory = scratch;
      workgroup.error_message = message;
      workgroup.error_message_capacity = sizeof(message);
      const axrt_kernel_result_t result = kernel_.function(block.data(), &dispatch, &workgroup);
      if (result != AXRT_KERNEL_OK) {
        message[sizeof(message) - 1] = '\0';
        FAIL_CHECK("the kernel returned " << result << " for " << DescribeWorkgroup(id) << ": "
                                          << (message[0] ? message : "no message"));
        return std::nullopt;
      }
    }

    bool ok = true;
    if (block != block_before) {
      FAIL_CHECK("the kernel changed its argument block");
      ok = false;
    }
    if (std::memcmp(&dispatch, &dispatch_before, sizeof(dispatch)) != 0) {
      FAIL_CHECK("the kernel changed its axrt_kernel_dispatch_t");
      ok = false;
    }
    std::vector<std::vector<uint8_t>> results;
    buffer_index = 0;
    for (uint32_t i = 0; i < kernel_.param_count; ++i) {
      if (kernel_.params[i].kind != AXRT_KERNEL_PARAM_KIND_BUFFER) continue;
      INFO("buffer " << buffer_index << ", " << ParamLabel(kernel_, i));
      const GuardedBuffer& buffer = buffers[buffer_index];
      const std::optional<int64_t> damaged = buffer.DamagedGuard();
      if (damaged) {
        FAIL_CHECK("the kernel wrote outside the buffer, at offset "
                   << *damaged << " of a " << case_.buffers[buffer_index].bytes.size()
                   << "-byte buffer");
        ok = false;
      }
      results.push_back(buffer.contents());
      if (!case_.buffers[buffer_index].writable) {
        const std::string difference =
            Difference(results.back(), case_.buffers[buffer_index].bytes);
        INFO("the kernel wrote a read-only buffer: " << difference);
        CHECK(difference.empty());
        ok = ok && difference.empty();
      }
      ++buffer_index;
    }
    if (!ok) return std::nullopt;
    return results;
  }

 private:
  const axrt_kernel_info_t& kernel_;
  const ArgsLayout& layout_;
  const KernelCase& case_;
  const KitOptions& options_;
  void* state_;
};

// Whether any writable buffer differs between `a` and `b`.
bool OutputsDiffer(const KernelCase& c, const std::vector<std::vector<uint8_t>>& a,
                   const std::vector<std::vector<uint8_t>>& b) {
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    if (c.buffers[i].writable && a[i] != b[i]) return true;
  }
  return false;
}

}  // namespace

CaseBuffer InputBuffer(std::vector<uint8_t> bytes, const axrt_axe_quant_layout_t* layout) {
  CaseBuffer buffer;
  buffer.bytes = std::move(bytes);
  buffer.layout = layout;
  return buffer;
}

CaseBuffer OutputBuffer(size_t size) {
  CaseBuffer buffer;
  buffer.bytes.assign(size, 0);
  buffer.writable = true;
  return buffer;
}

uint64_t F32Bits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

void CheckLibraryTable(const axrt_kernel_library_t* library) {
  REQUIRE(library != nullptr);
  INFO("kernel library '" << Str(library->name) << "'");
  INFO("struct_size " << library->struct_size << ", ABI version " << library->abi_version
                      << "; ABI version 1 needs at least " << kLibraryV1Size << " bytes");
  CHECK(library->struct_size >= kLibraryV1Size);
  CHECK(library->abi_version >= 1u);
  CHECK(library->abi_version <= AXRT_KERNEL_ABI_VERSION);
  const bool named = library->name != nullptr && library->name[0] != '\0';
  CHECK(named);
  const bool has_kernels = library->kernel_count == 0 || library->kernels != nullptr;
  INFO("kernel_count " << library->kernel_count);
  CHECK(has_kernels);
  if (!has_kernels) return;

  std::set<std::string> names;
  for (uint32_t k = 0; k < library->kernel_count; ++k) {
    const axrt_kernel_info_t& kernel = library->kernels[k];
    INFO("kernel " << k << " ('" << Str(kernel.name) << "')");
    const bool kernel_named = kernel.name != nullptr && kernel.name[0] != '\0';
    CHECK(kernel_named);
    if (kernel_named) {
      const bool unique = names.insert(kernel.name).second;
      INFO("the name appears twice in the table");
      CHECK(unique);
    }
    CHECK(kernel.function != nullptr);
    const bool has_params = kernel.param_count == 0 || kernel.params != nullptr;
    INFO("param_count " << kernel.param_count);
    CHECK(has_params);
    if (!has_params) continue;
    for (uint32_t i = 0; i < kernel.param_count; ++i) {
      const axrt_kernel_param_info_t& p = kernel.params[i];
      INFO(ParamLabel(kernel, i) << ": kind " << p.kind << ", scalar_type " << p.scalar_type
                                 << ", layout_id " << Str(p.layout_id));
      const bool known_kind =
          p.kind == AXRT_KERNEL_PARAM_KIND_BUFFER || p.kind == AXRT_KERNEL_PARAM_KIND_SCALAR;
      CHECK(known_kind);
      if (p.kind == AXRT_KERNEL_PARAM_KIND_BUFFER) {
        CHECK(p.scalar_type == 0u);
        const bool layout_id_ok = p.layout_id == nullptr || p.layout_id[0] != '\0';
        INFO("a layout_id is NULL or non-empty");
        CHECK(layout_id_ok);
      } else if (p.kind == AXRT_KERNEL_PARAM_KIND_SCALAR) {
        const bool known_type = axrt_kernel_scalar_size(p.scalar_type) != 0;
        INFO("scalars are whole-byte types of 1, 2, 4 or 8 bytes");
        CHECK(known_type);
        INFO("only buffers read quantization layouts");
        CHECK(p.layout_id == nullptr);
      }
    }
    const std::optional<ArgsLayout> layout = LayoutOf(kernel);
    if (layout) {
      INFO("args_size " << kernel.args_size << "; the C layout of the parameters is "
                        << layout->size << " bytes");
      CHECK(kernel.args_size == layout->size);
    }
  }
}

void CheckLibraryLifecycle(const DeviceTest& test, const axrt_kernel_library_t* library) {
  REQUIRE(library != nullptr);
  REQUIRE(library->name != nullptr);
  INFO("lifecycle of kernel library '" << library->name << "'");
  if (FindKernel(library, kProbeKernel) != nullptr) {
    FAIL_CHECK("the library has a kernel named '" << kProbeKernel
                                                  << "', the name the kit's probe uses");
    return;
  }
  SlotLease lease(library);
  if (lease.slot() == nullptr) {
    FAIL_CHECK("all " << kLifecycleSlots << " lifecycle slots are in use");
    return;
  }
  LifecycleSlot& slot = *lease.slot();
  const std::string device_id = DeviceUnderTestId();
  {
    Instance instance;
    axrt_instance_options_t options = AXRT_INSTANCE_OPTIONS_INIT;
    options.drivers = test.driver().c_str();
    REQUIRE_OK(axrt_instance_create(&options, Out(instance)));
    Device device;
    REQUIRE_OK(axrt_instance_find_device(instance.get(), device_id.c_str(), Out(device)));
    REQUIRE_OK(axrt_instance_register_kernel_library(instance.get(), &slot.table));
    {
      INFO("registration alone initialises nothing");
      CHECK(CountsOf(slot).inits == 0);
    }
    const std::vector<uint8_t> file = LifecycleFile(slot);

    Executable first;
    REQUIRE_OK(LoadBytes(device.get(), file, 0, Out(first)));
    CHECK(CountsOf(slot).inits == 1);
    CHECK(CountsOf(slot).deinits == 0);
    {
      std::lock_guard<std::mutex> lock(slot.mutex);
      CHECK(slot.init_device_id == device_id);
      CHECK(slot.init_worker_count >= 1u);
    }
    Executable second;
    REQUIRE_OK(LoadBytes(device.get(), file, 0, Out(second)));
    {
      INFO("a second executable on the same device does not initialise again");
      CHECK(CountsOf(slot).inits == 1);
    }
    void* state = nullptr;
    {
      std::lock_guard<std::mutex> lock(slot.mutex);
      state = slot.init_state;
    }
    for (axrt_executable_t exe : {first.get(), second.get()}) {
      const std::vector<uint64_t> probe = CallProbe(exe);
      INFO("dispatches see init's state");
      CHECK(probe[0] == reinterpret_cast<uintptr_t>(state));
      CHECK(probe[1] == 1u);
    }
    first.reset();
    {
      INFO("deinit waits for the last executable");
      CHECK(CountsOf(slot).deinits == 0);
    }
    second.reset();
    CHECK(CountsOf(slot).inits == 1);
    CHECK(CountsOf(slot).deinits == 1);
    {
      std::lock_guard<std::mutex> lock(slot.mutex);
      INFO("deinit receives init's state");
      CHECK(slot.deinit_state == state);
    }
    {
      Executable again;
      REQUIRE_OK(LoadBytes(device.get(), file, 0, Out(again)));
      INFO("loading after the last unload initialises again");
      CHECK(CountsOf(slot).inits == 2);
    }
    CHECK(CountsOf(slot).deinits == 2);
  }
  // The instance is gone: nothing refers to the slot's table any more.
}

void RunKernelCase(const DeviceTest& test, const axrt_kernel_library_t* library,
                   const KernelCase& c, const KitOptions& options) {
  REQUIRE(library != nullptr);
  INFO("kernel library '" << Str(library->name) << "', kernel '" << c.kernel << "'"
                          << (c.description.empty() ? "" : ", case: ") << c.description);
  const axrt_kernel_info_t* kernel = FindKernel(library, c.kernel);
  if (kernel == nullptr) {
    FAIL_CHECK("the library has no kernel of that name");
    return;
  }
  const std::optional<ArgsLayout> layout = LayoutOf(*kernel);
  if (!layout || kernel->function == nullptr) {
    FAIL_CHECK("the kernel's table entry is broken (see CheckLibraryTable)");
    return;
  }
  if (!ValidateCase(*kernel, c, options)) return;

  // (a) Through the runtime.
  const std::optional<std::vector<std::vector<uint8_t>>> runtime =
      options.run_through_runtime ? RunThroughRuntime(test, library, *kernel, c, options)
                                  : std::nullopt;

  // (b) Directly, in three orders.
  DirectState state(library, options.worker_count);
  if (!state.ok()) return;
  const DirectRunner runner(*kernel, *layout, c, options, state.state());
  const uint64_t count = WorkgroupCount(c.grid);
  std::vector<uint64_t> forward(count);
  std::iota(forward.begin(), forward.end(), uint64_t{0});
  std::vector<uint64_t> reverse(forward.rbegin(), forward.rend());
  std::vector<uint64_t> shuffled = forward;
  std::mt19937_64 random(0x6b69745f6f726465ull ^ count);
  std::shuffle(shuffled.begin(), shuffled.end(), random);

  const auto in_order = runner.Run(forward, std::nullopt, "workgroups in forward order");
  if (!in_order) return;
  for (const auto& [order, name] :
       {std::pair{&reverse, "reverse"}, std::pair{&shuffled, "shuffled"}}) {
    const auto other =
        runner.Run(*order, std::nullopt, std::string("workgroups in ") + name + " order");
    if (!other) continue;
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      const std::string difference = Difference((*other)[i], (*in_order)[i]);
      INFO("buffer " << i << " after the " << name
                     << " order differs from the forward order: " << difference);
      CHECK(difference.empty());
    }
  }

  // (c) Coverage: every output byte written, every workgroup contributing.
  const auto full = runner.Run(forward, kSentinel, "all workgroups, outputs from 0xA5");
  const auto full_second =
      runner.Run(forward, kSecondSentinel, "all workgroups, outputs from 0x5A");
  if (full && full_second) {
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      if (!c.buffers[i].writable || !c.buffers[i].fully_written) continue;
      const std::string difference = Difference((*full)[i], (*full_second)[i]);
      INFO("buffer " << i << " keeps bytes of its initial contents (no workgroup writes them): "
                     << difference);
      CHECK(difference.empty());
    }
    std::vector<uint64_t> samples;
    const uint64_t max_samples = std::max<uint64_t>(options.max_coverage_samples, 2);
    if (count <= max_samples) {
      samples = forward;
    } else {
      // Evenly spread, first and last included.
      for (uint64_t j = 0; j < max_samples; ++j) {
        samples.push_back(j * (count - 1) / (max_samples - 1));
      }
    }
    for (const uint64_t dropped : samples) {
      std::vector<uint64_t> order;
      order.reserve(count - 1);
      for (uint64_t w = 0; w < count; ++w) {
        if (w != dropped) order.push_back(w);
      }
      const std::string what =
          "all workgroups but " + DescribeWorkgroup(WorkgroupOf(dropped, c.grid));
      const auto partial = runner.Run(order, kSentinel, what + ", outputs from 0xA5");
      if (!partial) continue;
      INFO(what << " write the same outputs as all of them: that workgroup writes nothing");
      CHECK(OutputsDiffer(c, *partial, *full));
    }
  }

  // (d) The runtime agrees with the direct calls; the author's check.
  if (runtime) {
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      const std::string difference = Difference((*runtime)[i], (*in_order)[i]);
      INFO("buffer " << i << " after the runtime's dispatch differs from the direct calls: "
                     << difference);
      CHECK(difference.empty());
    }
    if (c.check) c.check(*runtime);
  } else if (!options.run_through_runtime && c.check) {
    c.check(*in_order);
  }
}

void RunKernelLibraryKit(const DeviceTest& test, const axrt_kernel_library_t* library,
                         std::span<const KernelCase> cases, const KitOptions& options) {
  CheckLibraryTable(library);
  if (options.reach == KitOptions::Reach::kRegister && options.run_through_runtime) {
    REQUIRE_OK(axrt_instance_register_kernel_library(test.instance(), library));
  }
  if (options.check_lifecycle) CheckLibraryLifecycle(test, library);
  for (uint32_t k = 0; k < library->kernel_count; ++k) {
    const std::string name = Str(library->kernels[k].name);
    if (std::none_of(cases.begin(), cases.end(),
                     [&](const KernelCase& c) { return c.kernel == name; })) {
      WARN("kernel library '" << Str(library->name) << "': kernel '" << name
                              << "' has no case; only its table entry was checked");
    }
  }
  for (const KernelCase& c : cases) RunKernelCase(test, library, c, options);
}

}  // namespace axrt_cts
