// A function call, one step a file: checking the call's tensors against the
// signature and binding its symbols (call_arguments.cc), filling the
// function's command templates into a command batch (batch_builder.cc),
// and the call itself, which allocates what the caller did not pass and
// hands the batch to the stream (invoke.cc). The C entry point is
// axrt_function_invoke (executable_api.cc).
#ifndef AXRT_RUNTIME_CALL_H_
#define AXRT_RUNTIME_CALL_H_

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <span>
#include <vector>

#include "runtime/api.h"
#include "runtime/debug_calls.h"
#include "runtime/executable.h"
#include "runtime/tensor.h"

namespace axrt {

// The shapes of the outputs a call allocates, one list per output.
using OutputShapes = std::pmr::vector<std::pmr::vector<int64_t>>;

// Format 1.4: one collective command of a call, resolved: the part this
// member queues through its channel's group (runtime/invoke.cc).
struct CallCollective {
  uint32_t command = 0;  // its index among the function's commands
  const CompiledCollective* what = nullptr;
  uint64_t count = 0;
  Buffer* send = nullptr;
  uint64_t send_offset = 0;  // from the start of the buffer (as its handle sees it)
  Buffer* recv = nullptr;
  uint64_t recv_offset = 0;
};

// Everything one call binds, on the stack of invoke_function(); its lists
// take their memory from `memory` (a buffer on that stack, so that a call
// with a usual number of arguments allocates none).
struct CallState {
  explicit CallState(std::pmr::memory_resource* memory)
      : inputs(memory), outputs(memory), collectives(memory) {}

  const Function* function;
  Executable* executable;
  uint64_t symbols[kMaxSymbols];
  bool bound[kMaxSymbols];
  std::pmr::vector<Tensor*> inputs;
  std::pmr::vector<Tensor*> outputs;
  Buffer* arena = nullptr;
  // Format 1.4: the groups the function's channels stand for, and their
  // sizes; the collective commands build_batch() resolved.
  std::span<const axrt_invoke_channel_t> channels;
  std::pmr::vector<uint32_t> channel_sizes{std::pmr::get_default_resource()};
  std::pmr::vector<CallCollective> collectives;

  std::span<const uint64_t> symbol_values() const { return {symbols, function->symbol_names.size()}; }
  std::span<const bool> symbol_bound() const { return {bound, function->symbol_names.size()}; }
};


// "input" or "output".
const char* argument_kind_name(axrt_argument_kind_t kind);

// Resolves and checks the call's tensors against `call->function`'s
// signature, binding its symbols from the inputs. `call->outputs` gets the
// caller's outputs, null where the caller passed none; `out_shapes` the
// shape of each of those, which the inputs imply.
axrt_status_t bind_arguments(const ApiCall& api, CallState* call, const axrt_tensor_t* inputs,
                             const axrt_tensor_t* outputs, OutputShapes* out_shapes);

// Fills `call`'s function templates into `batch`: commands, argument
// blocks with every address and scalar of this call. Collective commands
// (format 1.4) go to `call->collectives` instead, their places in the batch
// left empty. Errors name the command.
axrt_status_t build_batch(const ApiCall& api, CallState& call, CommandBatch* batch);

// Runs `function` on `stream` (both resolved, on the same device, the
// argument counts checked): binds, allocates missing outputs and the arena,
// builds the batch and submits it, or, when `debug` is not null, hands it
// to submit_debug_call (runtime/debug_calls.h). Writes the allocated
// outputs' handles into `outputs` only on success.
axrt_status_t invoke_function(const ApiCall& api, Function* function, Stream* stream,
                              const axrt_tensor_t* inputs, axrt_tensor_t* outputs,
                              const CallDebug* debug,
                              std::span<const axrt_invoke_channel_t> channels = {});

}  // namespace axrt

#endif  // AXRT_RUNTIME_CALL_H_
