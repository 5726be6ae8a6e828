// The checking and dumping modes of a function call: one batch per command,
// each followed by a host function that reads what the command wrote
// (docs/debugging.md). Everything here runs only for calls in such a mode;
// the planning happens on the calling thread, the reading on the stream's.
#include "runtime/debug_calls.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/json_writer.h"
#include "runtime/call.h"

namespace axrt {

std::atomic<uint32_t> g_debug_environment{kDebugEnvironmentUnread};

namespace {

namespace fs = std::filesystem;
using axe::BindingKind;

constexpr const char* kFunction = "axrt_function_invoke";
constexpr uint64_t kNotStaged = UINT64_MAX;

std::atomic<bool> g_always_stage{false};
// Dumped calls of the process, numbering their folders.
std::atomic<uint32_t> g_dumped_calls{0};

// ---------------------------------------------------------------------------
// The environment

// Anything but empty, 0, false, no and off (in any case).
bool is_on(std::string_view value) {
  std::string lower(value);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return !(lower.empty() || lower == "0" || lower == "false" || lower == "no" || lower == "off");
}

struct Environment {
  bool check_finite = false;
  std::string dump_directory;
};

// Read at the process's first call, once.
const Environment& environment() {
  static const Environment env = [] {
    Environment e;
    const char* check = std::getenv("AXRT_CHECK_FINITE");
    e.check_finite = check && is_on(check);
    if (const char* dump = std::getenv("AXRT_DUMP_DIR")) e.dump_directory = dump;
    g_debug_environment.store((e.check_finite ? uint32_t{AXRT_INVOKE_FLAG_CHECK_FINITE} : 0u) |
                                  (e.dump_directory.empty() ? 0u : uint32_t{AXRT_INVOKE_FLAG_DUMP}),
                              std::memory_order_relaxed);
    return e;
  }();
  return env;
}

axrt_status_code_t code_of_errno(int error) {
  switch (error) {
    case ENOENT:
    case ENOTDIR: return AXRT_STATUS_CODE_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS: return AXRT_STATUS_CODE_PERMISSION_DENIED;
    case ENOSPC:
    case EDQUOT: return AXRT_STATUS_CODE_RESOURCE_EXHAUSTED;
    default: return AXRT_STATUS_CODE_UNKNOWN;
  }
}

std::string errno_message(int error) { return std::generic_category().message(error); }

// `name` as a part of a file name: letters, digits, '.', '_' and '-' kept,
// anything else '_'.
std::string file_part(std::string_view name) {
  std::string out(name.empty() ? "_" : name);
  for (char& c : out) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return out;
}

// ---------------------------------------------------------------------------
// NaN and Inf

// Whether elements of `dtype` can be NaN or Inf.
bool may_be_non_finite(axrt_dtype_t dtype) {
  switch (dtype) {
    case AXRT_DTYPE_FLOAT16:
    case AXRT_DTYPE_BFLOAT16:
    case AXRT_DTYPE_FLOAT32:
    case AXRT_DTYPE_FLOAT64:
    case AXRT_DTYPE_FLOAT8_E4M3FN:
    case AXRT_DTYPE_FLOAT8_E5M2:
    case AXRT_DTYPE_FLOAT8_E4M3FNUZ:
    case AXRT_DTYPE_FLOAT8_E5M2FNUZ:
    case AXRT_DTYPE_FLOAT8_E8M0FNU:
      return true;
    default:
      return false;
  }
}

template <typename Bits>
Bits load(const std::byte* p) {
  Bits bits;
  std::memcpy(&bits, p, sizeof(bits));
  return bits;
}

// Whether an element's bits are NaN or Inf, per type.
template <typename Bits, Bits kExponent>
bool ieee_non_finite(Bits bits) {
  return (bits & kExponent) == kExponent;
}
bool e4m3fn_nan(uint8_t bits) { return (bits & 0x7f) == 0x7f; }
bool fnuz_nan(uint8_t bits) { return bits == 0x80; }
bool e8m0_nan(uint8_t bits) { return bits == 0xff; }

bool skipped(std::span<const uint64_t> skip, uint64_t i) {
  return i / 64 < skip.size() && ((skip[i / 64] >> (i % 64)) & 1);
}

// The index of the first element of `count` at `data` that `bad` finds and
// `skip` (a bitmap, may be empty) does not mark; `count` when none.
template <typename Bits, typename Bad>
uint64_t scan(const std::byte* data, uint64_t count, Bad bad, std::span<const uint64_t> skip) {
  // Chunks tested without branches first, so the common all-finite case
  // vectorises.
  constexpr uint64_t kChunk = 1024;
  for (uint64_t begin = 0; begin < count; begin += kChunk) {
    const uint64_t end = std::min(count, begin + kChunk);
    bool any = false;
    for (uint64_t i = begin; i < end; ++i) any |= bad(load<Bits>(data + i * sizeof(Bits)));
    if (!any) continue;
    for (uint64_t i = begin; i < end; ++i) {
      if (bad(load<Bits>(data + i * sizeof(Bits))) && !skipped(skip, i)) return i;
    }
  }
  return count;
}

uint64_t first_non_finite(axrt_dtype_t dtype, const std::byte* data, uint64_t count,
                          std::span<const uint64_t> skip) {
  switch (dtype) {
    case AXRT_DTYPE_FLOAT16:
      return scan<uint16_t>(data, count, ieee_non_finite<uint16_t, 0x7c00>, skip);
    case AXRT_DTYPE_BFLOAT16:
      return scan<uint16_t>(data, count, ieee_non_finite<uint16_t, 0x7f80>, skip);
    case AXRT_DTYPE_FLOAT32:
      return scan<uint32_t>(data, count, ieee_non_finite<uint32_t, 0x7f800000u>, skip);
    case AXRT_DTYPE_FLOAT64:
      return scan<uint64_t>(data, count, ieee_non_finite<uint64_t, 0x7ff0000000000000u>, skip);
    case AXRT_DTYPE_FLOAT8_E4M3FN: return scan<uint8_t>(data, count, e4m3fn_nan, skip);
    case AXRT_DTYPE_FLOAT8_E5M2:
      return scan<uint8_t>(data, count, ieee_non_finite<uint8_t, 0x7c>, skip);
    case AXRT_DTYPE_FLOAT8_E4M3FNUZ:
    case AXRT_DTYPE_FLOAT8_E5M2FNUZ: return scan<uint8_t>(data, count, fnuz_nan, skip);
    case AXRT_DTYPE_FLOAT8_E8M0FNU: return scan<uint8_t>(data, count, e8m0_nan, skip);
    default: return count;
  }
}

// "NaN", "Inf" or "-Inf": what the non-finite element at `p` is.
const char* non_finite_name(axrt_dtype_t dtype, const std::byte* p) {
  uint64_t mantissa = 0;
  bool negative = false;
  switch (dtype) {
    case AXRT_DTYPE_FLOAT16: {
      const auto b = load<uint16_t>(p);
      mantissa = b & 0x03ff;
      negative = b >> 15;
      break;
    }
    case AXRT_DTYPE_BFLOAT16: {
      const auto b = load<uint16_t>(p);
      mantissa = b & 0x007f;
      negative = b >> 15;
      break;
    }
    case AXRT_DTYPE_FLOAT32: {
      const auto b = load<uint32_t>(p);
      mantissa = b & 0x007fffffu;
      negative = b >> 31;
      break;
    }
    case AXRT_DTYPE_FLOAT64: {
      const auto b = load<uint64_t>(p);
      mantissa = b & 0x000fffffffffffffu;
      negative = b >> 63;
      break;
    }
    case AXRT_DTYPE_FLOAT8_E5M2: {
      const auto b = load<uint8_t>(p);
      mantissa = b & 0x03;
      negative = b >> 7;
      break;
    }
    default:  // the other fp8 types have NaN only
      return "NaN";
  }
  if (mantissa != 0) return "NaN";
  return negative ? "-Inf" : "Inf";
}

// A bitmap of the non-finite elements, or empty when there are none.
std::vector<uint64_t> non_finite_bitmap(axrt_dtype_t dtype, const std::byte* data,
                                        uint64_t count) {
  std::vector<uint64_t> bits;
  const uint32_t width = dtype_bits(dtype) / 8;
  for (uint64_t i = first_non_finite(dtype, data, count, {}); i < count;
       i = i + 1 + first_non_finite(dtype, data + (i + 1) * width, count - i - 1, {})) {
    if (bits.empty()) bits.assign((count + 63) / 64, 0);
    bits[i / 64] |= uint64_t{1} << (i % 64);
  }
  return bits;
}

// ---------------------------------------------------------------------------
// .npy files

// How elements of `dtype` are stored in a .npy file: bf16 and fp8 as
// unsigned integers of their width, sub-byte and undeclared types as bytes.
struct NpyType {
  std::string descr;
  uint32_t bytes = 1;  // 0: the binding is written as raw bytes
};

NpyType npy_type(axrt_dtype_t dtype) {
  const char order = std::endian::native == std::endian::little ? '<' : '>';
  auto wide = [&](char kind, uint32_t bytes) {
    return NpyType{fmt::format("{}{}{}", bytes == 1 ? '|' : order, kind, bytes), bytes};
  };
  switch (dtype) {
    case AXRT_DTYPE_BOOL: return wide('b', 1);
    case AXRT_DTYPE_INT8: return wide('i', 1);
    case AXRT_DTYPE_UINT8: return wide('u', 1);
    case AXRT_DTYPE_INT16: return wide('i', 2);
    case AXRT_DTYPE_UINT16: return wide('u', 2);
    case AXRT_DTYPE_INT32: return wide('i', 4);
    case AXRT_DTYPE_UINT32: return wide('u', 4);
    case AXRT_DTYPE_INT64: return wide('i', 8);
    case AXRT_DTYPE_UINT64: return wide('u', 8);
    case AXRT_DTYPE_FLOAT16: return wide('f', 2);
    case AXRT_DTYPE_FLOAT32: return wide('f', 4);
    case AXRT_DTYPE_FLOAT64: return wide('f', 8);
    case AXRT_DTYPE_BFLOAT16: return wide('u', 2);
    case AXRT_DTYPE_FLOAT8_E4M3FN:
    case AXRT_DTYPE_FLOAT8_E5M2:
    case AXRT_DTYPE_FLOAT8_E4M3FNUZ:
    case AXRT_DTYPE_FLOAT8_E5M2FNUZ:
    case AXRT_DTYPE_FLOAT8_E8M0FNU: return wide('u', 1);
    default: return NpyType{"|u1", 0};
  }
}

// The header of a version 1.0 .npy file of `descr` elements in `shape`.
std::string npy_header(const std::string& descr, std::span<const int64_t> shape) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (", descr);
  for (size_t d = 0; d < shape.size(); ++d) {
    dict += fmt::format("{}{}", d ? ", " : "", shape[d]);
  }
  dict += shape.size() == 1 ? ",), }" : "), }";
  // Magic, version, length, dictionary, padded with spaces to a multiple of
  // 64 bytes and ended by a newline.
  const size_t unpadded = 6 + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header("\x93NUMPY\x01\x00", 8);
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

// ---------------------------------------------------------------------------
// What the host functions read

// One binding a host function reads.
struct Capture {
  BufferSource binding;
  Ref<Buffer> buffer;
  uint64_t offset = 0;  // of the bytes, from the start of the allocation
  uint64_t size = 0;
  uint64_t staged = kNotStaged;  // offset into CallRecord::staging, or read in place
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  std::vector<int64_t> dims;  // an input's or output's
  std::string argument;       // an input's or output's name
  std::string param;          // the kernel parameter, "dst", or an input's name
  std::string what;           // "intermediate 'out' (arena bytes [0, 64), f32)"
  std::string file;           // empty: not dumped
  bool scan = false;          // checked for NaN and Inf
  bool baseline = false;      // its NaN and Inf before the call are recorded

  // Of a whole-byte `dtype`.
  uint64_t element_count() const {
    const uint32_t bytes = dtype_bits(dtype) / 8;
    return bytes ? size / bytes : 0;
  }
};

struct DumpEntry {
  std::string file;
  int64_t command = -1;  // -1: the call's start
  std::string kernel;
  BufferSource binding;
  std::string argument;
  std::string param;
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  std::string npy_dtype;
  std::vector<int64_t> shape;
};

// What the host functions of one call share. They run one after another on
// the call's stream, so nothing here needs a lock.
struct CallRecord {
  Ref<Object> executable;  // keeps `function` alive
  const Function* function = nullptr;
  const Executable* exe = nullptr;
  fs::path directory;  // the call's folder; empty: no dumps
  uint32_t number = 0;
  std::unique_ptr<std::byte[]> staging;
  // Per input and output: the elements that were NaN or Inf before the
  // call, which the checks do not report (empty: none).
  std::vector<std::vector<uint64_t>> input_baselines, output_baselines;
  std::vector<DumpEntry> entries;

  std::span<const uint64_t> baseline(const BufferSource& b) const {
    if (b.kind == BindingKind::INPUT) return input_baselines[b.index];
    if (b.kind == BindingKind::OUTPUT) return output_baselines[b.index];
    return {};
  }

  axrt_status_t io_error(const fs::path& path, int error) const {
    return make_status(code_of_errno(error), "{}: {}: cannot write '{}': {}", kFunction,
                       function->label, path.string(), errno_message(error));
  }

  axrt_status_t write_file(const fs::path& path, std::string_view head, const std::byte* data,
                           uint64_t size) const {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    if (!file) return io_error(path, errno);
    bool ok = std::fwrite(head.data(), 1, head.size(), file) == head.size() &&
              (size == 0 || std::fwrite(data, 1, size, file) == size);
    int error = ok ? 0 : errno;
    if (std::fclose(file) != 0 && ok) {
      ok = false;
      error = errno;
    }
    return ok ? nullptr : io_error(path, error ? error : EIO);
  }

  axrt_status_t dump(int64_t command, const std::string& kernel, const Capture& c,
                     const std::byte* data) {
    const NpyType npy = npy_type(c.dtype);
    std::vector<int64_t> shape;
    const uint32_t bits = dtype_bits(c.dtype);
    if (npy.bytes == 0 || npy.bytes * 8 != bits ||
        (c.binding.kind == BindingKind::ARENA && c.size % npy.bytes != 0)) {
      shape = {static_cast<int64_t>(c.size)};  // raw bytes
    } else if (c.binding.kind == BindingKind::ARENA) {
      shape = {static_cast<int64_t>(c.size / npy.bytes)};
    } else {
      shape = c.dims;
    }
    const std::string descr = npy.bytes * 8 == bits ? npy.descr : "|u1";
    AXRT_RETURN_IF_ERROR(
        write_file(directory / c.file, npy_header(descr, shape), data, c.size));
    DumpEntry& e = entries.emplace_back();
    e.file = c.file;
    e.command = command;
    e.kernel = kernel;
    e.binding = c.binding;
    e.argument = c.argument;
    e.param = c.param;
    e.dtype = c.dtype;
    e.npy_dtype = descr;
    e.shape = std::move(shape);
    return nullptr;
  }

  // Writes index.json: every file written so far, and the stream's failure.
  axrt_status_t write_index(axrt_status_t stream_status) const {
    std::string text;
    JsonWriter w(&text);
    w.begin_object();
    w.member("function", std::string_view(function->name));
    w.member("executable", std::string_view(exe->name));
    w.member("call", number);
    w.key("failure");
    if (stream_status) {
      w.value(axrt_status_message(stream_status));
    } else {
      w.null();
    }
    w.key("files");
    w.begin_array();
    for (const DumpEntry& e : entries) {
      w.begin_object();
      w.member("file", std::string_view(e.file));
      w.key("command");
      if (e.command < 0) {
        w.null();
      } else {
        w.value(e.command);
      }
      w.key("kernel");
      if (e.kernel.empty()) {
        w.null();
      } else {
        w.value(std::string_view(e.kernel));
      }
      w.key("param");
      if (e.command < 0) {
        w.null();
      } else {
        w.value(std::string_view(e.param));
      }
      switch (e.binding.kind) {
        case BindingKind::INPUT:
          w.member("binding", "input");
          w.member("index", e.binding.index);
          w.member("name", std::string_view(e.argument));
          break;
        case BindingKind::OUTPUT:
          w.member("binding", "output");
          w.member("index", e.binding.index);
          w.member("name", std::string_view(e.argument));
          break;
        default:
          w.member("binding", "arena");
          w.member("arena_offset", e.binding.offset);
          w.member("arena_size", e.binding.size);
          break;
      }
      w.member("dtype", e.dtype == AXRT_DTYPE_INVALID ? "undeclared" : dtype_name(e.dtype));
      w.member("npy_dtype", std::string_view(e.npy_dtype));
      w.key("shape");
      w.begin_array();
      for (int64_t extent : e.shape) w.value(extent);
      w.end_array();
      w.end_object();
    }
    w.end_array();
    w.end_object();
    text += '\n';
    return write_file(directory / "index.json", text, nullptr, 0);
  }
};

// The host function after one command (or at the call's start).
struct Step {
  std::shared_ptr<CallRecord> call;
  int64_t command = -1;  // -1: the call's start
  std::string kernel;    // the command's kernel name, "copy" or "fill", for dumps
  std::string label;     // "kernel 'fc1' (axrt.cpu:axrt_matmul_f32)", "a copy"
  uint64_t unchecked_before = 0;  // earlier writes of undeclared element type
  std::vector<Capture> captures;

  const std::byte* bytes_of(const Capture& c) const {
    return c.staged == kNotStaged ? c.buffer->host_address(c.offset)
                                  : call->staging.get() + c.staged;
  }

  axrt_status_t run() {
    CallRecord& r = *call;
    for (Capture& c : captures) {
      const std::byte* data = bytes_of(c);
      if (!c.file.empty()) AXRT_RETURN_IF_ERROR(r.dump(command, kernel, c, data));
      if (c.baseline) {
        auto& baselines = c.binding.kind == BindingKind::INPUT ? r.input_baselines
                                                                : r.output_baselines;
        baselines[c.binding.index] = non_finite_bitmap(c.dtype, data, c.element_count());
      }
    }
    for (const Capture& c : captures) {
      if (!c.scan) continue;
      const std::byte* data = bytes_of(c);
      const uint64_t count = c.element_count();
      const uint64_t at = first_non_finite(c.dtype, data, count, r.baseline(c.binding));
      if (at == count) continue;
      return make_status(AXRT_STATUS_CODE_DATA_LOSS,
                         "{}: {}, command {} ({}) wrote {} to {} at element {}{} of {}; {}",
                         kFunction, r.function->label, command, label,
                         non_finite_name(c.dtype, data + at * (dtype_bits(c.dtype) / 8)), c.what,
                         at, position(c, at), count, earlier());
    }
    return nullptr;
  }

  // " ([0, 37])" for an element of a tensor of rank 2 or more.
  static std::string position(const Capture& c, uint64_t at) {
    if (c.binding.kind == BindingKind::ARENA || c.dims.size() < 2) return "";
    std::vector<int64_t> index(c.dims.size());
    for (size_t d = c.dims.size(); d-- > 0;) {
      const auto extent = static_cast<uint64_t>(c.dims[d]);
      index[d] = static_cast<int64_t>(at % extent);
      at /= extent;
    }
    return fmt::format(" ({})", format_shape(index));
  }

  std::string earlier() const {
    if (command == 0) return "it is the function's first command";
    if (unchecked_before == 0) return "every earlier command's writes were finite";
    return fmt::format(
        "every earlier command's writes of floating-point type were finite ({} of undeclared "
        "element type were not checked)",
        unchecked_before);
  }
};

axrt_status_t run_step(void* user_data, axrt_status_t stream_status) {
  std::unique_ptr<Step> step(static_cast<Step*>(user_data));
  // After a failure (this check's or any other) there is nothing to add:
  // the stream keeps its first failure.
  if (stream_status) return nullptr;
  return guard(kFunction, [&] { return step->run(); });
}

struct Finish {
  std::shared_ptr<CallRecord> call;
};

// Writes index.json, even after a failure: it lists what was dumped.
axrt_status_t run_finish(void* user_data, axrt_status_t stream_status) {
  std::unique_ptr<Finish> finish(static_cast<Finish*>(user_data));
  return guard(kFunction, [&] { return finish->call->write_index(stream_status); });
}

// ---------------------------------------------------------------------------
// Planning and queueing

std::string describe_binding(const Capture& c, bool named) {
  const std::string type = c.dtype == AXRT_DTYPE_INVALID ? "undeclared type" : dtype_name(c.dtype);
  switch (c.binding.kind) {
    case BindingKind::INPUT:
      return fmt::format("mutable input '{}' ({}{}{})", c.argument, type, format_shape(c.dims),
                         named ? fmt::format(", parameter '{}'", c.param) : "");
    case BindingKind::OUTPUT:
      return fmt::format("output '{}' ({}{}{})", c.argument, type, format_shape(c.dims),
                         named ? fmt::format(", parameter '{}'", c.param) : "");
    default:
      return fmt::format("intermediate{} (arena bytes [{}, {}), {})",
                         named ? fmt::format(" '{}'", c.param) : "", c.binding.offset,
                         c.binding.offset + c.binding.size, type);
  }
}

Capture capture_of(const CallState& call, const BufferSource& source) {
  Capture c;
  c.binding = source;
  if (source.kind == BindingKind::INPUT || source.kind == BindingKind::OUTPUT) {
    const bool input = source.kind == BindingKind::INPUT;
    const Tensor* t = input ? call.inputs[source.index] : call.outputs[source.index];
    const ArgumentSignature& sig =
        input ? call.function->inputs[source.index] : call.function->outputs[source.index];
    c.buffer = Ref<Buffer>(t->buffer.get());
    c.offset = t->buffer->offset + t->byte_offset;
    c.size = t->contiguous_bytes();
    c.dims.assign(t->dims().begin(), t->dims().end());
    c.argument = sig.name;
    c.dtype = sig.dtype;
  } else {
    c.buffer = Ref<Buffer>(call.arena);
    c.offset = call.arena->offset + source.offset;
    c.size = source.size;
  }
  return c;
}

// An empty batch named as `whole` is, its commands numbered from `base`.
CommandBatchPtr batch_like(const CommandBatch& whole, uint32_t base) {
  CommandBatchPtr batch(new CommandBatch());
  batch->label = whole.label;
  batch->trace_name = whole.trace_name;
  batch->trace_detail = whole.trace_detail;
  batch->command_base = base;
  batch->owner = whole.owner;
  return batch;
}

// One command of `whole` as a batch of its own.
CommandBatchPtr command_batch(const CommandBatch& whole, uint32_t c) {
  CommandBatchPtr batch = batch_like(whole, whole.command_base + c);
  BatchCommand command = whole.commands[c];
  if (command.kind == BatchCommand::Kind::kDispatch) {
    batch->args.assign((command.args_size + 7) / 8, 0);
    if (command.args_size) {
      std::memcpy(batch->args.data(), whole.args_at(command.args_offset), command.args_size);
    }
    command.args_offset = 0;
  }
  batch->commands.push_back(command);
  batch->buffers = whole.buffers;
  return batch;
}

// Queues the copies of `step`'s staged bindings, then the step itself.
axrt_status_t launch(Stream* stream, std::unique_ptr<Step> step) {
  for (const Capture& c : step->captures) {
    if (c.staged == kNotStaged) continue;
    CopyCommand copy;
    copy.src = CopyEndpoint{c.buffer.get(), nullptr, c.offset, 0};
    copy.dst = CopyEndpoint{nullptr, step->call->staging.get() + c.staged, 0, 0};
    copy.width = c.size;
    copy.height = 1;
    AXRT_RETURN_IF_ERROR(stream->vtable->copy(stream, copy));
  }
  AXRT_RETURN_IF_ERROR(stream->vtable->launch_host_func(stream, run_step, step.get()));
  step.release();  // the host function frees it
  return nullptr;
}

}  // namespace

void set_debug_calls_always_stage(bool stage) noexcept {
  g_always_stage.store(stage, std::memory_order_relaxed);
}

axrt_status_t prepare_call_debug(const ApiCall& api, uint32_t flags, const char* dump_directory,
                                 CallDebug* out) {
  const Environment& env = environment();
  out->check_finite = (flags & AXRT_INVOKE_FLAG_CHECK_FINITE) || env.check_finite;
  const bool from_options = (flags & AXRT_INVOKE_FLAG_DUMP) != 0;
  out->dump_directory = from_options ? dump_directory : env.dump_directory;
  if (out->dump_directory.empty()) return nullptr;
  const char* what = from_options ? "`options->dump_directory`" : "AXRT_DUMP_DIR";
  std::error_code error;
  const fs::file_status status = fs::status(out->dump_directory, error);
  if (!fs::exists(status)) {
    return api.error(AXRT_STATUS_CODE_NOT_FOUND, "{} '{}' does not exist{}", what,
                     out->dump_directory, error ? ": " + error.message() : std::string());
  }
  if (!fs::is_directory(status)) {
    return api.error(AXRT_STATUS_CODE_NOT_FOUND, "{} '{}' is not a directory", what,
                     out->dump_directory);
  }
  return nullptr;
}

axrt_status_t submit_debug_call(const ApiCall& api, const CallState& call, const CallDebug& debug,
                                const axrt_tensor_t* caller_outputs, CommandBatchPtr batch,
                                Stream* stream) {
  const Function& f = *call.function;
  const Executable& exe = *call.executable;
  const bool check = debug.check_finite;
  const bool dumping = !debug.dump_directory.empty();
  auto record = std::make_shared<CallRecord>();
  record->executable = Ref<Object>(call.executable);
  record->function = &f;
  record->exe = &exe;
  record->input_baselines.resize(call.inputs.size());
  record->output_baselines.resize(call.outputs.size());
  if (dumping) {
    record->number = g_dumped_calls.fetch_add(1, std::memory_order_relaxed);
    record->directory = fs::path(debug.dump_directory) /
                        fmt::format("{:05}-{}", record->number, file_part(f.name));
    std::error_code error;
    fs::create_directory(record->directory, error);
    if (error) {
      return api.error(code_of_errno(error.value()), "{}: cannot create the dump folder '{}': {}",
                       f.label, record->directory.string(), error.message());
    }
  }

  // Inputs and caller's outputs that a checked command writes: their NaN
  // and Inf before the call are recorded, and not reported.
  std::vector<bool> input_baseline(call.inputs.size()), output_baseline(call.outputs.size());
  if (check) {
    for (const CompiledCommand& command : f.commands) {
      for (const CommandWrite& write : command.writes) {
        if (!may_be_non_finite(write.dtype)) continue;
        if (write.binding.kind == BindingKind::INPUT) input_baseline[write.binding.index] = true;
        if (write.binding.kind == BindingKind::OUTPUT && caller_outputs[write.binding.index]) {
          output_baseline[write.binding.index] = true;
        }
      }
    }
  }

  // The host functions: the call's start, then one per command. They share
  // one staging area for what is not host-visible, since each one's copies
  // run after the one before returned.
  const bool always_stage = g_always_stage.load(std::memory_order_relaxed);
  uint64_t staging_bytes = 0;
  auto plan_staging = [&](Step& step) {
    uint64_t used = 0;
    for (Capture& c : step.captures) {
      if (c.size == 0 || (!always_stage && c.buffer->host_visible())) continue;
      c.staged = used;
      used += (c.size + 63) / 64 * 64;
    }
    staging_bytes = std::max(staging_bytes, used);
  };
  std::vector<std::unique_ptr<Step>> steps;
  auto start = std::make_unique<Step>();
  start->call = record;
  for (uint32_t i = 0; i < call.inputs.size(); ++i) {
    if (!dumping && !input_baseline[i]) continue;
    Capture c = capture_of(call, BufferSource{BindingKind::INPUT, i, 0, 0});
    c.param = c.argument;
    if (dumping) c.file = fmt::format("in-{}.npy", file_part(c.argument));
    c.baseline = input_baseline[i];
    start->captures.push_back(std::move(c));
  }
  for (uint32_t o = 0; o < call.outputs.size(); ++o) {
    if (!output_baseline[o]) continue;
    Capture c = capture_of(call, BufferSource{BindingKind::OUTPUT, o, 0, 0});
    c.param = c.argument;
    c.baseline = true;
    start->captures.push_back(std::move(c));
  }
  plan_staging(*start);
  steps.push_back(std::move(start));

  const auto* kernels = exe.file->metadata().kernels();
  uint64_t unchecked = 0;
  for (uint32_t index = 0; index < f.commands.size(); ++index) {
    const CompiledCommand& command = f.commands[index];
    auto step = std::make_unique<Step>();
    step->call = record;
    step->command = index;
    step->unchecked_before = unchecked;
    const bool dispatch = command.kind == BatchCommand::Kind::kDispatch;
    if (dispatch) {
      const LoadedKernel& kernel = exe.kernels[command.kernel];
      const flatbuffers::String* name = kernels->Get(command.kernel)->name();
      step->kernel = name ? name->str() : std::string();
      step->label = kernel.code ? kernel.device.name : kernel.host.name;
    } else {
      const bool copy = command.kind == BatchCommand::Kind::kCopy;
      step->kernel = copy ? "copy" : "fill";
      step->label = copy ? "a copy" : "a fill";
    }
    for (const CommandWrite& write : command.writes) {
      if (write.binding.kind == BindingKind::CONSTANT) continue;
      Capture c = capture_of(call, write.binding);
      c.param = write.name;
      c.dtype = write.dtype;
      c.scan = check && may_be_non_finite(c.dtype);
      if (check && c.dtype == AXRT_DTYPE_INVALID) ++unchecked;
      if (dumping) {
        c.file = fmt::format("c{:03}-{}-{}.npy", index, file_part(step->kernel),
                             file_part(c.param));
      }
      if (!c.scan && c.file.empty()) continue;
      c.what = describe_binding(c, dispatch);
      step->captures.push_back(std::move(c));
    }
    plan_staging(*step);
    steps.push_back(std::move(step));
  }
  if (staging_bytes) record->staging = std::make_unique_for_overwrite<std::byte[]>(staging_bytes);

  // Queue: the zeroed memory, the start, each command and its host
  // function, the arena's return, index.json.
  // The arena goes back through the last batch below, not with `batch`,
  // which is dropped while the commands that use the arena may still run.
  Buffer* arena = std::exchange(batch->arena, nullptr);
  auto zero = [&](Buffer* buffer) -> axrt_status_t {
    if (buffer->size == 0) return nullptr;
    return stream->vtable->fill(stream, buffer, buffer->offset, buffer->size, 0, 1);
  };
  if (arena) AXRT_RETURN_IF_ERROR(api.prefix(zero(arena)));
  for (size_t o = 0; o < call.outputs.size(); ++o) {
    if (!caller_outputs[o]) AXRT_RETURN_IF_ERROR(api.prefix(zero(call.outputs[o]->buffer.get())));
  }
  AXRT_RETURN_IF_ERROR(api.prefix(launch(stream, std::move(steps[0]))));
  for (uint32_t c = 0; c < f.commands.size(); ++c) {
    AXRT_RETURN_IF_ERROR(
        api.prefix(stream->vtable->submit_batch(stream, command_batch(*batch, c))));
    AXRT_RETURN_IF_ERROR(api.prefix(launch(stream, std::move(steps[1 + c]))));
  }
  if (arena) {
    // An empty batch that only returns the arena, after the last reader.
    CommandBatchPtr last = batch_like(*batch, static_cast<uint32_t>(f.commands.size()));
    last->buffers.emplace_back(arena);
    last->arena = arena;
    AXRT_RETURN_IF_ERROR(api.prefix(stream->vtable->submit_batch(stream, std::move(last))));
  }
  if (dumping) {
    auto finish = std::make_unique<Finish>();
    finish->call = std::move(record);
    AXRT_RETURN_IF_ERROR(
        api.prefix(stream->vtable->launch_host_func(stream, run_finish, finish.get())));
    finish.release();  // the host function frees it
  }
  return nullptr;
}

}  // namespace axrt
