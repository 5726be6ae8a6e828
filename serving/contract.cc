#include "serving/contract.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "axrt/axrt.h"
#include "base/status.h"

namespace axrt::serving {
namespace {

constexpr axrt_status_code_t kInvalid = AXRT_STATUS_CODE_INVALID_ARGUMENT;

}  // namespace

axrt_status_t contract_argument(axrt_function_t function, const char* what,
                                axrt_argument_kind_t kind, uint32_t index, const char* name,
                                axrt_dtype_t dtype, const char* symbolic, Argument* out) {
  axrt_argument_info_t info = AXRT_ARGUMENT_INFO_INIT;
  AXRT_RETURN_IF_ERROR(axrt_function_query_argument(function, kind, index, &info));
  out->name = info.name;
  out->dtype = info.dtype;
  for (uint32_t d = 0; d < info.rank; ++d) {
    if (info.dim_symbols[d] < 0) {
      out->bounds.push_back(static_cast<uint64_t>(info.dims[d]));
      out->symbols.emplace_back();
    } else {
      const char* symbol = nullptr;
      uint64_t bound = 0;
      AXRT_RETURN_IF_ERROR(axrt_function_query_symbol(
          function, static_cast<uint32_t>(info.dim_symbols[d]), &symbol, &bound));
      out->bounds.push_back(bound);
      out->symbols.emplace_back(symbol);
    }
  }
  const size_t rank = std::strlen(symbolic);
  bool ok = out->name == name && out->dtype == dtype && out->bounds.size() == rank;
  for (size_t d = 0; ok && d < rank; ++d) {
    ok = (symbolic[d] == 's') == !out->symbols[d].empty() && out->bounds[d] > 0;
  }
  if (!ok) {
    return make_status(kInvalid,
                       "axrt_engine_create: {}'s argument `{}` is not `{}` {} of rank {} as the "
                       "serving contract has it (docs/serving.md)",
                       what, out->name, name, axrt_dtype_name(dtype), rank);
  }
  return nullptr;
}

axrt_status_t cache_dtype(axrt_function_t function, const char* what, axrt_dtype_t* dtype,
                          uint64_t* element_bytes) {
  axrt_argument_info_t info = AXRT_ARGUMENT_INFO_INIT;
  AXRT_RETURN_IF_ERROR(
      axrt_function_query_argument(function, AXRT_ARGUMENT_KIND_INPUT, 4, &info));
  switch (info.dtype) {
    case AXRT_DTYPE_FLOAT32:
      *element_bytes = 4;
      break;
    case AXRT_DTYPE_BFLOAT16:
      *element_bytes = 2;
      break;
    case AXRT_DTYPE_UINT8:
      *element_bytes = 1;
      break;
    default:
      return make_status(kInvalid,
                         "axrt_engine_create: {}'s `kv_cache` holds {}, not f32, bf16 or u8 (fp8 "
                         "codes) as the serving contract has it (docs/serving.md)",
                         what, axrt_dtype_name(info.dtype));
  }
  *dtype = info.dtype;
  return nullptr;
}

axrt_status_t contract_arity(axrt_function_t function, const char* what, uint32_t inputs,
                             uint32_t outputs) {
  axrt_function_info_t info = AXRT_FUNCTION_INFO_INIT;
  AXRT_RETURN_IF_ERROR(axrt_function_query_info(function, &info));
  if (info.input_count != inputs || info.output_count != outputs) {
    return make_status(kInvalid,
                       "axrt_engine_create: `{}` takes {} inputs and {} outputs, not the {} and "
                       "{} of the serving contract (docs/serving.md)",
                       what, info.input_count, info.output_count, inputs, outputs);
  }
  return nullptr;
}

axrt_status_t find_function(axrt_executable_t executable, const char* name,
                            axrt_function_t* out) {
  if (axrt_status_t s = axrt_executable_find_function(executable, name, out)) {
    if (axrt_status_code(s) != AXRT_STATUS_CODE_NOT_FOUND) return s;
    axrt_status_free(s);
    return make_status(kInvalid,
                       "axrt_engine_create: the executable has no `{}` function: it is not a "
                       "model for the serving engine (convert it again with `axrt.llm convert`)",
                       name);
  }
  return nullptr;
}

axrt_status_t check_process_logits(axrt_function_t function, uint64_t vocab, uint64_t* max_rows,
                                   uint64_t* max_entries) {
  constexpr axrt_argument_kind_t kIn = AXRT_ARGUMENT_KIND_INPUT;
  const char* what = "process_logits";
  AXRT_RETURN_IF_ERROR(contract_arity(function, what, 10, 0));
  Argument logits;
  AXRT_RETURN_IF_ERROR(
      contract_argument(function, what, kIn, 0, "logits", AXRT_DTYPE_FLOAT32, "sf", &logits));
  axrt_argument_info_t info = AXRT_ARGUMENT_INFO_INIT;
  AXRT_RETURN_IF_ERROR(axrt_function_query_argument(function, kIn, 0, &info));
  if (logits.bounds[1] != vocab || (info.flags & AXRT_ARGUMENT_FLAG_MUTABLE) == 0) {
    return make_status(kInvalid,
                       "axrt_engine_create: `process_logits` must take mutable logits of {} "
                       "tokens, as `step` makes them",
                       vocab);
  }
  uint32_t index = 1;
  for (const char* name :
       {"temperature", "repetition_penalty", "frequency_penalty", "presence_penalty", "min_p"}) {
    Argument row;
    AXRT_RETURN_IF_ERROR(
        contract_argument(function, what, kIn, index++, name, AXRT_DTYPE_FLOAT32, "s", &row));
  }
  Argument entries;
  for (const char* name : {"entry_tokens", "entry_counts", "entry_in_prompt"}) {
    entries = Argument{};
    AXRT_RETURN_IF_ERROR(
        contract_argument(function, what, kIn, index++, name, AXRT_DTYPE_INT32, "ss", &entries));
  }
  Argument bias;
  AXRT_RETURN_IF_ERROR(
      contract_argument(function, what, kIn, index, "entry_bias", AXRT_DTYPE_FLOAT32, "ss", &bias));
  *max_rows = logits.bounds[0];
  *max_entries = std::min(entries.bounds[1], bias.bounds[1]);
  return nullptr;
}

axrt_status_t check_channels(axrt_function_t step, uint32_t rank, size_t members) {
  axrt_function_info_t info = AXRT_FUNCTION_INFO_INIT;
  AXRT_RETURN_IF_ERROR(axrt_function_query_info(step, &info));
  if (members == 0) {
    if (info.channel_count == 0) return nullptr;
    return make_status(kInvalid,
                       "axrt_engine_create: the executable's `step` runs on a set of devices (it "
                       "has {} channel(s)): give the set's group and executables "
                       "(options.group, options.executables)",
                       info.channel_count);
  }
  const char* name = nullptr;
  uint32_t size = 0;
  if (info.channel_count == 1) {
    AXRT_RETURN_IF_ERROR(axrt_function_query_channel(step, 0, &name, &size));
  }
  if (info.channel_count != 1 || (size != 0 && size != members)) {
    return make_status(kInvalid,
                       "axrt_engine_create: rank {}'s `step` is not a member of a set of {}: it "
                       "has {} channel(s){}",
                       rank, members, info.channel_count,
                       info.channel_count == 1 ? fmt::format(", of {} members", size) : "");
  }
  return nullptr;
}

}  // namespace axrt::serving
