// The call: bind the tensors, allocate the outputs the caller did not pass
// and the arena from the device's pool, fill the command batch and hand it
// to the stream. Nothing is allocated before every argument check passed.
#include <algorithm>
#include <span>

#include "runtime/buffer.h"
#include "runtime/call.h"

namespace axrt {

namespace {

// Format 1.4: the channel bindings of a call of `f` on `stream`, checked
// before anything is allocated; the groups' sizes go to `call`.
axrt_status_t bind_channels(const ApiCall& api, const Function& f, const Stream& stream,
                            std::span<const axrt_invoke_channel_t> channels, CallState* call) {
  if (channels.size() != f.channels.size()) {
    return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                     "{} has {} channel(s); `options->channels` binds {}", f.label,
                     f.channels.size(), channels.size());
  }
  for (size_t k = 0; k < channels.size(); ++k) {
    const auto& [name, size] = f.channels[k];
    const axrt_invoke_channel_t& binding = channels[k];
    if (binding.group == nullptr) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`options->channels[{}].group` (channel '{}' of {}) is NULL", k, name,
                       f.label);
    }
    axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
    AXRT_RETURN_IF_ERROR(api.prefix(axrt_group_query_info(binding.group, &info)));
    if (size != 0 && info.size != size) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "channel '{}' of {} needs a group of {} members; group '{}' has {}", name,
                       f.label, size, info.label, info.size);
    }
    axrt_device_t member = nullptr;
    if (axrt_status_t status = axrt_group_get_device(binding.group, binding.rank, &member)) {
      return api.prefix(status);
    }
    const bool here = to_handle<axrt_device_t>(stream.device.get()) == member;
    axrt_device_release(member);
    if (!here) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "channel '{}' of {}: member {} of group '{}' is not {}, the device of {}",
                       name, f.label, binding.rank, info.label, stream.device->id(),
                       stream.describe());
    }
    call->channel_sizes.push_back(info.size);
  }
  call->channels = channels;
  return nullptr;
}

// Fails `stream` with `status` (a copy is kept): what the call queued
// before an error must not be mistaken for its result.
axrt_status_t fail_stream(void* user_data, axrt_status_t) {
  return static_cast<axrt_status_t>(user_data);
}

// Queues `batch` (the whole call) as the segments between its collective
// commands, each collective's part through its channel's group between
// them; the last segment carries the arena back (`arena`, flagged
// deallocated only then: until the parts are queued it is a live buffer
// the groups check). After a segment or a part fails to queue, the rest of
// the batch is dropped, the arena returned, the stream failed with the
// error, and the channels' groups aborted naming this member.
axrt_status_t submit_segments(const ApiCall& api, const CallState& call, CommandBatchPtr batch,
                              Ref<Buffer> arena, Function* f, Stream* stream) {
  uint32_t begin = 0;
  axrt_status_t failed = nullptr;
  for (const CallCollective& part : call.collectives) {
    CommandBatchPtr segment = f->batches.take();
    segment->label = batch->label;
    segment->trace_name = batch->trace_name;
    segment->trace_detail = batch->trace_detail;
    segment->owner = batch->owner;
    segment->command_base = begin;
    segment->args = batch->args;
    segment->commands.assign(batch->commands.begin() + begin,
                             batch->commands.begin() + part.command);
    segment->buffers = batch->buffers;
    begin = part.command + 1;
    if (!segment->commands.empty()) {
      if ((failed = stream->vtable->submit_batch(stream, std::move(segment)))) break;
    }
    const CompiledCollective& what = *part.what;
    const axrt_invoke_channel_t& channel = call.channels[what.channel];
    axrt_collective_member_t member = {to_handle<axrt_stream_t>(stream),
                                       to_handle<axrt_buffer_t>(part.send), part.send_offset,
                                       to_handle<axrt_buffer_t>(part.recv), part.recv_offset};
    if ((failed = axrt_group_enqueue_part(channel.group, channel.rank, what.kind, &member,
                                          part.count, what.dtype, what.op, what.root))) {
      failed = api.error(axrt_status_code(failed), "{} command {}: {}", f->label, part.command,
                         axrt_status_message(StatusPtr(failed).get()));
      break;
    }
  }
  batch->commands.erase(batch->commands.begin(),
                        batch->commands.begin() + std::min<size_t>(begin, batch->commands.size()));
  batch->command_base = begin;
  if (failed) {
    // The other members would wait for this one's parts: the groups abort,
    // naming it, so that their streams fail now rather than at a timeout.
    const std::string why = fmt::format("its call of {} failed: {}", f->label,
                                        axrt_status_message(failed));
    for (const axrt_invoke_channel_t& channel : call.channels) {
      if (axrt_status_t status = axrt_group_abort(channel.group, static_cast<int32_t>(channel.rank),
                                                  why.c_str())) {
        status_destroy(status);  // the group's own failure stays the first
      }
    }
    batch->commands.clear();
    // The stream keeps its own copy of the failure; the caller gets this one.
    axrt_status_t copy = make_status(axrt_status_code(failed), "{}", axrt_status_message(failed));
    if (axrt_status_t status = stream->vtable->launch_host_func(stream, fail_stream, copy)) {
      status_destroy(status);
      status_destroy(copy);
    }
  }
  if (arena) {
    arena->deallocated.store(true, std::memory_order_release);
    batch->arena = arena.get();
  }
  if (axrt_status_t status = stream->vtable->submit_batch(stream, std::move(batch))) {
    if (failed) {
      status_destroy(status);
      return failed;
    }
    return status;
  }
  return failed;
}

}  // namespace

axrt_status_t invoke_function(const ApiCall& api, Function* function, Stream* stream,
                              const axrt_tensor_t* inputs, axrt_tensor_t* outputs,
                              const CallDebug* debug,
                              std::span<const axrt_invoke_channel_t> channels) {
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
  const bool collectives = !self->collective_commands.empty();
  if (!self->channels.empty() || !channels.empty()) {
    if (debug) {
      return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                       "{} has collective commands, which the debugging modes do not run",
                       self->label);
    }
    AXRT_RETURN_IF_ERROR(bind_channels(api, *self, *target, channels, &call));
  }

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
  if (collectives) {
    if (arena) batch->buffers.push_back(arena);
    AXRT_RETURN_IF_ERROR(submit_segments(api, call, std::move(batch), std::move(arena), self, target));
  } else if (arena) {
    // The batch owns the arena from here: the driver returns its memory
    // in stream order once the commands ran.
    arena->deallocated.store(true, std::memory_order_release);
    batch->arena = arena.get();
    batch->buffers.push_back(std::move(arena));
  }
  if (collectives) {
    // Queued above.
  } else if (debug) [[unlikely]] {
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
