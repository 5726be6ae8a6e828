// Reading the serving contract (docs/serving.md) from a model's function
// signatures: what the engine checks of `step` and `sample`, on the head
// and on every other member of a set.
#ifndef AXRT_SERVING_CONTRACT_H_
#define AXRT_SERVING_CONTRACT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "axrt/executable.h"

namespace axrt::serving {

// One argument of a function: its name, dtype, and each extent's bound (the
// extent, or the symbol's upper bound) and symbol name ("" when fixed).
struct Argument {
  std::string name;
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  std::vector<uint64_t> bounds;
  std::vector<std::string> symbols;
};

// Reads argument `index` of `function` (`what` in messages) into `out` and
// checks that it is the serving contract's `name`: `dtype`, with symbolic
// extents where `symbolic` says (a string of 's' and 'f', one per
// dimension).
axrt_status_t contract_argument(axrt_function_t function, const char* what,
                                axrt_argument_kind_t kind, uint32_t index, const char* name,
                                axrt_dtype_t dtype, const char* symbolic, Argument* out);

// The element type of `function`'s `kv_cache` (input 4): f32, bf16, or u8
// (fp8 e4m3 codes with a scale per row, docs/serving.md), and its bytes.
axrt_status_t cache_dtype(axrt_function_t function, const char* what, axrt_dtype_t* dtype,
                          uint64_t* element_bytes);

// Checks that `function` (`what`) takes the contract's numbers of inputs
// and outputs.
axrt_status_t contract_arity(axrt_function_t function, const char* what, uint32_t inputs,
                             uint32_t outputs);

// The function `name` of `executable`; INVALID_ARGUMENT saying that the
// file is not a model for the engine when it has none.
axrt_status_t find_function(axrt_executable_t executable, const char* name,
                            axrt_function_t* out);

// Checks `process_logits` (docs/serving.md) against the contract, for
// logits of `vocab` tokens; writes the bounds of its rows and of its entries
// a row.
axrt_status_t check_process_logits(axrt_function_t function, uint64_t vocab, uint64_t* max_rows,
                                   uint64_t* max_entries);

// The channels `step` declares: none on one device; one, the set's, in a
// tensor-parallel set (of `members` members).
axrt_status_t check_channels(axrt_function_t step, uint32_t rank, size_t members);

}  // namespace axrt::serving

#endif  // AXRT_SERVING_CONTRACT_H_
