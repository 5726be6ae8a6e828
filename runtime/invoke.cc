// The call: bind the tensors, allocate the outputs the caller did not pass
// and the arena from the device's pool, fill the command batch and hand it
// to the stream. Nothing is allocated before every argument check passed.
#include <algorithm>

#include "runtime/buffer.h"
#include "runtime/call.h"

namespace axrt {

axrt_status_t invoke_function(const ApiCall& api, Function* function, Stream* stream,
                              const axrt_tensor_t* inputs, axrt_tensor_t* outputs,
                              const CallDebug* debug) {
  Function* self = function;
  Stream* target = stream;
  Executable* exe = self->executable;
  const size_t input_count = self->inputs.size();
  const size_t output_count = self->outputs.size();
  // The call's lists live on this stack unless they outgrow it.
  alignas(std::max_align_t) std::byte scratch[1024];
  std::pmr::monotonic_buffer_resource memory(scratch, sizeof(scratch));
  CallState call(&memory);
  call.function = self;
  call.executable = exe;
  OutputShapes shapes(&memory);
  AXRT_RETURN_IF_ERROR(bind_arguments(api, &call, inputs, outputs, &shapes));

  std::vector<Ref<Tensor>> allocated;
  CommandBatchPtr batch = self->batches.take();
  batch->label = &self->label;
  batch->trace_name = self->trace_name;
  batch->trace_detail = self->trace_executable;
  batch->owner = Ref<Object>(exe);
  batch->last_duration_ns = &self->last_duration_ns;
  Device* device = exe->device.get();
  for (size_t o = 0; o < output_count; ++o) {
    if (call.outputs[o]) continue;
    const ArgumentSignature& arg = self->outputs[o];
    uint64_t count = 1;
    for (int64_t extent : shapes[o]) count *= static_cast<uint64_t>(extent);
    const uint64_t bytes = std::max<uint64_t>(1, dtype_bytes(arg.dtype, count));
    BufferParams params;
    params.alignment = device->properties.buffer_alignment;
    params.label = fmt::format("{} of {}", arg.name, self->label);
    Ref<Buffer> buffer;
    AXRT_RETURN_IF_ERROR(buffer_allocate(api, device, bytes, std::move(params), &buffer));
    allocated.push_back(tensor_wrap(std::move(buffer), arg.dtype, shapes[o]));
    call.outputs[o] = allocated.back().get();
  }
  Ref<Buffer> arena;
  if (self->arena_size > 0) {
    BufferParams params;
    params.alignment = device->properties.buffer_alignment;
    params.borrowed_label = &self->arena_label;  // a batch's buffers go before its owner
    AXRT_RETURN_IF_ERROR(buffer_allocate(api, device, self->arena_size, std::move(params), &arena));
    call.arena = arena.get();
  }
  AXRT_RETURN_IF_ERROR(build_batch(api, call, batch.get()));
  batch->buffers.reserve(input_count + output_count + 1);
  // Inputs, mutable ones (written in place) included, are held like the
  // outputs until the batch completed: every driver keeps a batch's
  // buffers alive to its end, and the stream orders later work after it.
  for (Tensor* t : call.inputs) batch->buffers.emplace_back(t->buffer.get());
  for (Tensor* t : call.outputs) batch->buffers.emplace_back(t->buffer.get());
  if (arena) {
    // The batch owns the arena from here: the driver returns its memory
    // in stream order once the commands ran.
    arena->deallocated.store(true, std::memory_order_release);
    batch->arena = arena.get();
    batch->buffers.push_back(std::move(arena));
  }
  if (debug) [[unlikely]] {
    AXRT_RETURN_IF_ERROR(submit_debug_call(api, call, *debug, outputs, std::move(batch), target));
  } else {
    AXRT_RETURN_IF_ERROR(target->vtable->submit_batch(target, std::move(batch)));
  }
  device->counters.function_calls.fetch_add(1, std::memory_order_relaxed);
  device->counters.dispatches.fetch_add(self->dispatch_count, std::memory_order_relaxed);
  for (size_t o = 0, a = 0; o < output_count; ++o) {
    if (outputs[o] == nullptr) outputs[o] = to_handle<axrt_tensor_t>(allocated[a++].release());
  }
  return nullptr;
}

}  // namespace axrt
