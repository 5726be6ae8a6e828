// Executables: loading (the steps of runtime/loader.h, run in order), their
// destruction, and the helpers that loading and calls share to evaluate the
// compiled templates' values.
#include "runtime/executable.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "runtime/handle_table.h"
#include "runtime/loader.h"

namespace axrt {
namespace {

void destroy_executable(Object* object) {
  auto* exe = static_cast<Executable*>(object);
  for (auto& function : exe->functions) {
    if (function->handle) HandleTable::global().remove(function->handle);
  }
  for (const auto& library : exe->acquired_libraries) {
    release_kernel_library(exe->device.get(), *library);
  }
  delete exe;
}

}  // namespace

axrt_status_t evaluate_value(const ValueSource& value, std::span<const uint64_t> symbols,
                             std::span<const bool> symbols_bound,
                             std::span<const std::string> symbol_names, uint64_t* out) {
  if (!value.expr) {
    *out = value.literal;
    return nullptr;
  }
  uint64_t stack[16];
  size_t depth = 0;
  auto fail = [&](const char* reason) {
    return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}", reason);
  };
  for (const axe::ExprOp* op : *value.expr->ops()) {
    const axe::ExprOpcode opcode = op->opcode();
    if (opcode == axe::ExprOpcode::CONST) {
      stack[depth++] = static_cast<uint64_t>(op->operand());
      continue;
    }
    if (opcode == axe::ExprOpcode::SYMBOL) {
      const auto s = static_cast<size_t>(op->operand());
      if (s >= symbols.size() || !symbols_bound[s]) {
        return make_status(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                           "symbol '{}' has no value: no input of the call names it",
                           s < symbol_names.size() ? symbol_names[s] : std::to_string(s));
      }
      stack[depth++] = symbols[s];
      continue;
    }
    const uint64_t b = stack[--depth];
    const uint64_t a = stack[depth - 1];
    uint64_t r = 0;
    switch (opcode) {
      case axe::ExprOpcode::ADD:
        if (__builtin_add_overflow(a, b, &r)) return fail("an addition overflows");
        break;
      case axe::ExprOpcode::SUB:
        if (a < b) return fail("a subtraction goes below zero");
        r = a - b;
        break;
      case axe::ExprOpcode::MUL:
        if (__builtin_mul_overflow(a, b, &r)) return fail("a multiplication overflows");
        break;
      case axe::ExprOpcode::DIV_FLOOR:
        if (b == 0) return fail("division by zero");
        r = a / b;
        break;
      case axe::ExprOpcode::DIV_CEIL:
        if (b == 0) return fail("division by zero");
        r = a / b + (a % b != 0);
        break;
      case axe::ExprOpcode::MOD:
        if (b == 0) return fail("modulo by zero");
        r = a % b;
        break;
      case axe::ExprOpcode::MINIMUM: r = std::min(a, b); break;
      case axe::ExprOpcode::MAXIMUM: r = std::max(a, b); break;
      default: return fail("unknown opcode");  // the reader refuses these
    }
    stack[depth - 1] = r;
  }
  *out = stack[0];
  return nullptr;
}

bool encode_scalar_argument(const ArgumentPatch& patch, uint64_t value, std::byte* block) {
  if (patch.negative) {
    // The verifier allows negative literals for signed types only; their
    // low bytes are the narrower type's two's complement.
    const auto signed_value = static_cast<int64_t>(value);
    switch (patch.scalar_type) {
      case AXRT_DTYPE_INT8: if (signed_value < INT8_MIN) return false; break;
      case AXRT_DTYPE_INT16: if (signed_value < INT16_MIN) return false; break;
      case AXRT_DTYPE_INT32: if (signed_value < INT32_MIN) return false; break;
      default: break;  // int64 and floating point: the bytes as they are
    }
    std::memcpy(block + patch.offset, &value, patch.size);  // little-endian
    return true;
  }
  switch (patch.scalar_type) {
    case AXRT_DTYPE_BOOL: if (value > 1) return false; break;
    case AXRT_DTYPE_INT8: if (value > 0x7f) return false; break;
    case AXRT_DTYPE_UINT8: if (value > 0xff) return false; break;
    case AXRT_DTYPE_INT16: if (value > 0x7fff) return false; break;
    case AXRT_DTYPE_UINT16: if (value > 0xffff) return false; break;
    case AXRT_DTYPE_INT32: if (value > 0x7fffffff) return false; break;
    case AXRT_DTYPE_UINT32: if (value > 0xffffffffu) return false; break;
    case AXRT_DTYPE_INT64: if (value > 0x7fffffffffffffffull) return false; break;
    default: break;  // unsigned 64-bit and floating point: raw bytes
  }
  std::memcpy(block + patch.offset, &value, patch.size);  // little-endian
  return true;
}

axrt_status_t LoadContext::prefix(axrt_status_t status) const {
  if (!status) return nullptr;
  StatusPtr owned(status);
  return make_status(status->code, "{}: {}", what(), status->message);
}

axrt_status_t load_executable(Device* device, std::unique_ptr<axe::AxeFile> file,
                              const LoadParams& params, Ref<Executable>* out) {
  const LoadContext ctx{device, device->instance, *file, file->metadata(), params,
                        params.label.empty() ? file->name() : params.label};
  // Pre-flight: nothing is allocated or initialised until every check
  // passed.
  std::vector<ResolvedKernel> resolved;
  AXRT_RETURN_IF_ERROR(resolve_kernels(ctx, &resolved));
  AXRT_RETURN_IF_ERROR(check_dispatches(ctx));
  choose_prepacked(ctx, &resolved);

  // Residency.
  auto* exe = new Executable();
  Ref<Executable> ref = Ref<Executable>::adopt(exe);
  exe->destroy = destroy_executable;
  exe->device = Ref<Device>(device);
  exe->name = ctx.name;
  AXRT_RETURN_IF_ERROR(load_kernels(ctx, resolved, exe));
  AXRT_RETURN_IF_ERROR(make_constants_resident(ctx, exe));
  AXRT_RETURN_IF_ERROR(pack_constants(ctx, resolved, exe));
  exe->file = std::move(file);  // `ctx.file` stays valid: the object does not move
  AXRT_RETURN_IF_ERROR(compile_functions(ctx, exe));
  object_register(exe);
  for (auto& function : exe->functions) object_register(function.get());
  *out = std::move(ref);
  return nullptr;
}

std::string Function::describe_signature(const ArgumentSignature& arg) const {
  std::vector<std::string> dims;
  for (size_t d = 0; d < arg.dims.size(); ++d) {
    if (arg.dim_symbols[d] >= 0) {
      const auto s = static_cast<size_t>(arg.dim_symbols[d]);
      dims.push_back(fmt::format("{}<={}", symbol_names[s], symbol_bounds[s]));
    } else {
      dims.push_back(std::to_string(arg.dims[d]));
    }
  }
  return fmt::format("{}[{}]", dtype_name(arg.dtype), fmt::join(dims, ", "));
}

}  // namespace axrt
