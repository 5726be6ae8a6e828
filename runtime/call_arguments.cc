// Checking a call's tensors against the function's signature: device,
// dtype, rank, extents, symbols and their bounds, contiguity, writability.
#include <array>
#include <string>

#include "runtime/call.h"

namespace axrt {

const char* argument_kind_name(axrt_argument_kind_t kind) {
  return kind == AXRT_ARGUMENT_KIND_INPUT ? "input" : "output";
}

namespace {

// "inputs[3]" for messages, without formatting on the hot path.
const char* indexed_name(const char* base, size_t index) {
  // Never destroyed: a call may still run while the process exits.
  static const auto& inputs = *new std::array<std::string, 32>([] {
    std::array<std::string, 32> names;
    for (size_t i = 0; i < names.size(); ++i) names[i] = fmt::format("inputs[{}]", i);
    return names;
  }());
  static const auto& outputs = *new std::array<std::string, 32>([] {
    std::array<std::string, 32> names;
    for (size_t i = 0; i < names.size(); ++i) names[i] = fmt::format("outputs[{}]", i);
    return names;
  }());
  const bool is_input = base[0] == 'i';
  if (index >= inputs.size()) return is_input ? "an input" : "an output";
  return (is_input ? inputs : outputs)[index].c_str();
}

// The extents `arg` has with the call's symbols; false when one is unbound.
bool resolved_shape(const ArgumentSignature& arg, const CallState& call,
                    std::pmr::vector<int64_t>* out) {
  out->clear();
  for (size_t d = 0; d < arg.dims.size(); ++d) {
    const int32_t s = arg.dim_symbols[d];
    if (s < 0) {
      out->push_back(arg.dims[d]);
    } else if (call.bound[s]) {
      out->push_back(static_cast<int64_t>(call.symbols[s]));
    } else {
      return false;
    }
  }
  return true;
}

// Checks tensor `t` against signature `arg`, binding symbols when `bind`.
axrt_status_t check_argument(const ApiCall& api, CallState* call, axrt_argument_kind_t kind,
                             size_t index, const ArgumentSignature& arg, const Tensor& t,
                             bool bind) {
  const Function& f = *call->function;
  auto mismatch = [&](const std::string& reason) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "{}: {} {} ('{}') {}", f.label,
                     argument_kind_name(kind), index, arg.name, reason);
  };
  if (t.buffer->device.get() != call->executable->device.get()) {
    return mismatch(fmt::format("is on {}, but the executable is loaded on {}",
                                t.buffer->device->id(), call->executable->device->id()));
  }
  if (t.buffer->is_deallocated()) {
    return mismatch(fmt::format("views {}, which was deallocated", t.buffer->describe()));
  }
  if (kind == AXRT_ARGUMENT_KIND_OUTPUT && t.read_only) {
    return mismatch(fmt::format("is read-only (imported from a read-only DLPack tensor over {}); "
                                "an output must be writable",
                                t.buffer->describe()));
  }
  if (kind == AXRT_ARGUMENT_KIND_INPUT && arg.is_mutable && t.read_only) {
    return mismatch(fmt::format("is read-only (imported from a read-only DLPack tensor over {}); "
                                "a mutable input is written in place and must be writable",
                                t.buffer->describe()));
  }
  if (t.dtype != arg.dtype || t.rank != arg.dims.size()) {
    return mismatch(fmt::format("is {}{} but the signature wants {}", dtype_name(t.dtype),
                                format_shape(t.dims()), f.describe_signature(arg)));
  }
  for (size_t d = 0; d < arg.dims.size(); ++d) {
    const int64_t extent = t.shape[d];
    const int32_t s = arg.dim_symbols[d];
    if (s < 0) {
      if (extent != arg.dims[d]) {
        return mismatch(fmt::format("has shape {} but the signature wants {} (dimension {} must "
                                    "be {})",
                                    format_shape(t.dims()), f.describe_signature(arg), d,
                                    arg.dims[d]));
      }
      continue;
    }
    const auto value = static_cast<uint64_t>(extent);
    if (call->bound[s]) {
      if (call->symbols[s] != value) {
        return mismatch(fmt::format("has shape {} but the signature wants {}: dimension {} is "
                                    "{}, while an earlier argument set '{}' to {}",
                                    format_shape(t.dims()), f.describe_signature(arg), d, extent,
                                    f.symbol_names[s], call->symbols[s]));
      }
      continue;
    }
    if (!bind) {
      return mismatch(fmt::format("has shape {}, but symbol '{}' of {} is bound by no input",
                                  format_shape(t.dims()), f.symbol_names[s],
                                  f.describe_signature(arg)));
    }
    if (value > f.symbol_bounds[s]) {
      return mismatch(fmt::format("has shape {} but the signature wants {}: dimension {} is {}, "
                                  "above the bound {} of '{}'",
                                  format_shape(t.dims()), f.describe_signature(arg), d, extent,
                                  f.symbol_bounds[s], f.symbol_names[s]));
    }
    call->symbols[s] = value;
    call->bound[s] = true;
  }
  if (!t.contiguous()) {
    return mismatch(fmt::format("has strides {} for shape {}; functions take contiguous "
                                "row-major tensors",
                                format_shape({t.strides.data(), t.rank}), format_shape(t.dims())));
  }
  return nullptr;
}

}  // namespace

axrt_status_t bind_arguments(const ApiCall& api, CallState* call, const axrt_tensor_t* inputs,
                             const axrt_tensor_t* outputs, OutputShapes* out_shapes) {
  const Function* self = call->function;
  const size_t input_count = self->inputs.size();
  const size_t output_count = self->outputs.size();
  std::fill_n(call->bound, self->symbol_names.size(), false);
  call->inputs.resize(input_count);
  for (size_t i = 0; i < input_count; ++i) {
    AXRT_RETURN_IF_ERROR(api.resolve(inputs[i], indexed_name("inputs", i), &call->inputs[i]));
    AXRT_RETURN_IF_ERROR(check_argument(api, call, AXRT_ARGUMENT_KIND_INPUT, i, self->inputs[i],
                                        *call->inputs[i], true));
  }
  // Outputs: the caller's are checked against the shape the inputs imply;
  // for the others the shape is worked out, and they are allocated once
  // every check has passed.
  call->outputs.assign(output_count, nullptr);
  out_shapes->clear();
  out_shapes->resize(output_count);
  for (size_t o = 0; o < output_count; ++o) {
    const ArgumentSignature& arg = self->outputs[o];
    if (outputs[o] != nullptr) {
      AXRT_RETURN_IF_ERROR(api.resolve(outputs[o], indexed_name("outputs", o), &call->outputs[o]));
      AXRT_RETURN_IF_ERROR(check_argument(api, call, AXRT_ARGUMENT_KIND_OUTPUT, o, arg,
                                          *call->outputs[o], false));
      continue;
    }
    if (!resolved_shape(arg, *call, &(*out_shapes)[o])) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: output {} ('{}') is {}, but no input binds its symbols; pass the "
                       "output tensor",
                       self->label, o, arg.name, self->describe_signature(arg));
    }
  }
  return nullptr;
}

}  // namespace axrt
