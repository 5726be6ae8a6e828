// Executables: an .axe file loaded onto one device, its kernels resolved to
// code the device runs, its constants resident, and its functions compiled
// into command templates that a call fills in (runtime/invoke.cc).
#ifndef AXRT_RUNTIME_EXECUTABLE_H_
#define AXRT_RUNTIME_EXECUTABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "axrt/executable.h"
#include "format/reader.h"
#include "runtime/buffer.h"
#include "runtime/driver.h"
#include "runtime/kernel_library.h"
#include "runtime/object.h"

namespace axrt {

struct Executable;

// The most symbolic dimensions one function may have.
inline constexpr uint32_t kMaxSymbols = 64;

// A kernel resolved for the executable's device: a CPU kernel of a library
// (`library`, `host`) or a kernel of device code (`code`, `device`).
struct LoadedKernel {
  std::shared_ptr<KernelLibrary> library;  // keeps its code loaded
  HostKernel host;
  std::shared_ptr<DeviceCode> code;
  DeviceKernel device;
  uint32_t args_size = 0;
  std::vector<uint32_t> param_offsets;  // into the argument block
  std::vector<uint32_t> param_sizes;
  // The parameter bound to constants' packed copies (a pre-packed form of
  // a library kernel), or -1.
  int32_t packed_param = -1;
};

// A value computed at call time: a literal (folded at load) or an
// expression of the function's symbols.
struct ValueSource {
  const axe::Expr* expr = nullptr;  // null: `literal`
  uint64_t literal = 0;
};

// Where a buffer binding points: an input, an output, a constant or an
// arena slice.
struct BufferSource {
  axe::BindingKind kind = axe::BindingKind::INVALID;
  uint32_t index = 0;
  uint64_t offset = 0;  // ARENA only
  uint64_t size = 0;    // ARENA only
};

// A parameter filled per call.
struct ArgumentPatch {
  uint32_t offset = 0;  // in the argument block
  uint32_t size = 0;
  axrt_dtype_t scalar_type = AXRT_DTYPE_INVALID;  // SCALAR
  // SCALAR: `value` is a negative literal (format 1.3), held as its 64-bit
  // two's complement.
  bool negative = false;
  bool is_buffer = false;
  BufferSource buffer;
  ValueSource value;
};

// A binding a command writes, for the checks and dumps of a call
// (runtime/debug_calls.h): a dispatch's WRITE and READ_WRITE buffer
// parameters other than constants, a copy's or fill's destination.
struct CommandWrite {
  BufferSource binding;
  std::string name;  // the parameter's; "dst" for copies and fills
  // The signature's for outputs and mutable inputs, else the parameter's
  // declared element type; INVALID when neither says.
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
};

// Format 1.4: a collective command, which no driver sees: a call queues
// the batch of the commands before it, then its part through the group its
// channel is bound to (runtime/invoke.cc).
struct CompiledCollective {
  axrt_collective_kind_t kind = AXRT_COLLECTIVE_ALL_REDUCE;
  uint32_t channel = 0;
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  axrt_reduce_op_t op = AXRT_REDUCE_SUM;
  uint32_t root = 0;
  ValueSource count;
};

struct CompiledCommand {
  BatchCommand::Kind kind = BatchCommand::Kind::kDispatch;
  // A collective (src: send, dst: recv) when set; `kind` is then unused.
  bool is_collective = false;
  CompiledCollective collective;
  // kDispatch
  uint32_t kernel = 0;
  ValueSource workgroup_count[3];
  std::vector<uint64_t> args_template;  // constants and literals filled in
  std::vector<ArgumentPatch> patches;
  // kCopy (src, dst) and kFill (dst)
  BufferSource src, dst;
  ValueSource src_offset, dst_offset, length;
  uint64_t pattern = 0;
  uint32_t pattern_size = 0;
  std::vector<CommandWrite> writes;  // read only by the debugging modes
};

struct ArgumentSignature {
  std::string name;
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  std::vector<int64_t> dims;         // -1 where symbolic
  std::vector<int32_t> dim_symbols;  // -1 where fixed
  // Format 1.2: an input the commands write in place; the caller's tensor
  // must be writable.
  bool is_mutable = false;
};

struct Function : Object {
  static constexpr ObjectType kType = ObjectType::kFunction;
  Function() : Object(kType) {}

  Executable* executable = nullptr;  // also `owner`
  std::string name;
  // "function 'main' of executable 'mlp.axe'"
  std::string label;
  // "arena of function 'main' of ...": what its calls' arenas are called.
  std::string arena_label;
  // The function's and the executable's names, for traces (interned).
  const char* trace_name = nullptr;
  const char* trace_executable = nullptr;
  std::vector<std::string> symbol_names;
  std::vector<uint64_t> symbol_bounds;
  std::vector<ArgumentSignature> inputs;
  std::vector<ArgumentSignature> outputs;
  uint64_t arena_size = 0;
  std::vector<CompiledCommand> commands;
  // Format 1.4: the channels (name, members needed or 0) and which
  // commands are collectives.
  std::vector<std::pair<std::string, uint32_t>> channels;
  std::vector<uint32_t> collective_commands;
  uint64_t dispatch_count = 0;  // of `commands`
  size_t args_words = 0;  // of all argument blocks together, in u64 words
  // How long the last call ran on the device, for the inline path.
  std::atomic<uint64_t> last_duration_ns{UINT64_MAX};
  // Spent batches of earlier calls, handed out again.
  BatchCache batches;

  // "[batch<=8, 4]"
  std::string describe_signature(const ArgumentSignature& arg) const;
};

// A constant as kernels reach it.
struct ResidentConstant {
  Ref<Buffer> buffer;  // a view of the mapped file, or an uploaded copy
  // Host devices: the copy in a pre-packed layout that the kernels bound
  // to it in that layout read (loader_prepack.cc); null when none does.
  Ref<Buffer> packed;
};

struct Executable : Object {
  static constexpr ObjectType kType = ObjectType::kExecutable;
  Executable() : Object(kType) {}

  Ref<Device> device;
  std::string name;
  std::unique_ptr<axe::AxeFile> file;
  std::vector<LoadedKernel> kernels;
  std::vector<ResidentConstant> constants;
  std::vector<std::unique_ptr<Function>> functions;
  // Libraries initialised on the device for this executable, released once
  // each when it is destroyed.
  std::vector<std::shared_ptr<KernelLibrary>> acquired_libraries;

  std::string describe() const { return fmt::format("executable '{}'", name); }
};

struct LoadParams {
  axrt_executable_load_flags_t flags = 0;
  std::string label;
};

// Loads `file` (verified) onto `device`; see axrt_executable_load_file().
axrt_status_t load_executable(Device* device, std::unique_ptr<axe::AxeFile> file,
                              const LoadParams& params, Ref<Executable>* out);

// Evaluates `value` with the call's symbol values; `symbols_bound` says
// which have one. Errors say why, for the caller to say where.
axrt_status_t evaluate_value(const ValueSource& value, std::span<const uint64_t> symbols,
                             std::span<const bool> symbols_bound,
                             std::span<const std::string> symbol_names, uint64_t* out);

// Writes scalar `value` into `block` at `patch`'s offset; false when it does
// not fit the patch's integer type (a signed one when `patch.negative`).
// Floating-point scalars take the value's low bytes as their bit pattern.
bool encode_scalar_argument(const ArgumentPatch& patch, uint64_t value, std::byte* block);

}  // namespace axrt

#endif  // AXRT_RUNTIME_EXECUTABLE_H_
