// Graphs (axrt_function_capture, include/axrt/executable.h): a call bound
// and built once into a command batch that the graph keeps, with its own
// arena, and replayed either as the driver's own graph (DeviceVtable::
// create_graph) or by submitting a copy of that batch.
#include <algorithm>
#include <memory_resource>

#include "runtime/buffer.h"
#include "runtime/call.h"
#include "runtime/object.h"

namespace axrt {
namespace {

// What replays touch: the captured batch and the driver's graph, with what
// they need alive. A replay in flight holds it (a driver's `keep`), and it
// holds no stream, so that a stream released with replays queued finishes
// them and goes.
struct GraphBody : Object {
  static constexpr ObjectType kType = ObjectType::kGraph;
  GraphBody() : Object(kType) {}
  ~GraphBody() {
    native.reset();  // before what its replays touch: the kernels, the buffers
    batch.reset();
  }

  Ref<Function> function;            // retains the executable: its kernels, constants
  std::vector<Ref<Tensor>> tensors;  // the captured inputs and outputs
  // The captured commands, every buffer they touch retained (the arena
  // among them); no cache and no arena to return: replays reuse them.
  std::unique_ptr<CommandBatch> batch;
  std::unique_ptr<DeviceGraph> native;  // null: replays submit the batch
};

// The handle: the body and the stream it replays on.
struct Graph : Object {
  static constexpr ObjectType kType = ObjectType::kGraph;
  Graph() : Object(kType) {}

  Ref<GraphBody> body;
  Ref<Stream> stream;
  std::string label;
  uint64_t arena_bytes = 0;
};

void destroy_body(Object* object) { delete static_cast<GraphBody*>(object); }
void destroy_graph(Object* object) { delete static_cast<Graph*>(object); }

// The batch that one replay submits: a copy of the captured one, from the
// function's cache so that the steady state allocates nothing.
CommandBatchPtr replay_batch(const GraphBody& g) {
  const CommandBatch& from = *g.batch;
  CommandBatchPtr batch = g.function->batches.take();
  batch->label = from.label;
  batch->trace_name = from.trace_name;
  batch->trace_detail = from.trace_detail;
  batch->owner = from.owner;
  batch->commands = from.commands;
  batch->command_base = 0;
  batch->args = from.args;
  batch->buffers = from.buffers;
  batch->last_duration_ns = from.last_duration_ns;
  return batch;
}

axrt_status_t capture(const ApiCall& api, Function* f, Stream* stream, const axrt_tensor_t* inputs,
                      const axrt_tensor_t* outputs, Ref<Graph>* out) {
  if (!f->collective_commands.empty() || !f->channels.empty()) {
    return api.error(AXRT_STATUS_CODE_UNIMPLEMENTED,
                     "{} has collective commands, which graphs do not capture", f->label);
  }
  CallDebug debug;
  AXRT_RETURN_IF_ERROR(prepare_call_debug(api, 0, nullptr, &debug));
  if (debug.active()) {
    return api.error(AXRT_STATUS_CODE_FAILED_PRECONDITION,
                     "a debugging mode of the environment (AXRT_CHECK_FINITE, AXRT_DUMP_DIR) is "
                     "on: it checks each call, and a graph's replays are not calls");
  }
  for (size_t o = 0; o < f->outputs.size(); ++o) {
    if (outputs[o] == nullptr) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "`outputs[{}]` ('{}' of {}) is NULL: a graph writes its replays' results "
                       "into tensors the caller supplies",
                       o, f->outputs[o].name, f->label);
    }
  }
  alignas(std::max_align_t) std::byte scratch[1024];
  std::pmr::monotonic_buffer_resource memory(scratch, sizeof(scratch));
  CallState call(&memory);
  call.function = f;
  call.executable = f->executable;
  OutputShapes shapes(&memory);
  AXRT_RETURN_IF_ERROR(bind_arguments(api, &call, inputs, outputs, &shapes));

  Ref<Graph> g = Ref<Graph>::adopt(new Graph());
  g->destroy = destroy_graph;
  g->body = Ref<GraphBody>::adopt(new GraphBody());
  g->body->destroy = destroy_body;
  GraphBody& body = *g->body;
  body.function = Ref<Function>(f);
  g->stream = Ref<Stream>(stream);
  g->label = fmt::format("{} (graph)", f->label);
  Device* device = f->executable->device.get();
  Ref<Buffer> arena;
  if (f->arena_size > 0) {
    BufferParams params;
    params.alignment = device->properties.buffer_alignment;
    params.label = fmt::format("arena of {}", g->label);
    AXRT_RETURN_IF_ERROR(buffer_allocate(api, device, f->arena_size, std::move(params), &arena));
    call.arena = arena.get();
    g->arena_bytes = f->arena_size;
  }
  body.batch = std::make_unique<CommandBatch>();
  CommandBatch& batch = *body.batch;
  batch.label = &f->label;
  batch.trace_name = f->trace_name;
  batch.trace_detail = f->trace_executable;
  batch.owner = Ref<Object>(f->executable);
  batch.last_duration_ns = &f->last_duration_ns;
  AXRT_RETURN_IF_ERROR(build_batch(api, call, &batch));
  for (Tensor* t : call.inputs) {
    batch.buffers.emplace_back(t->buffer.get());
    body.tensors.emplace_back(t);
  }
  for (Tensor* t : call.outputs) {
    batch.buffers.emplace_back(t->buffer.get());
    body.tensors.emplace_back(t);
  }
  if (arena) batch.buffers.push_back(std::move(arena));

  if (device->vtable->create_graph != nullptr && stream->vtable->launch_graph != nullptr) {
    std::unique_ptr<DeviceGraph> native;
    if (axrt_status_t status = device->vtable->create_graph(device, batch, &native)) {
      if (axrt_status_code(status) != AXRT_STATUS_CODE_UNIMPLEMENTED) return api.prefix(status);
      status_destroy(status);  // replays submit the batch
    } else {
      native->trace_name = batch.trace_name;
      native->trace_detail = batch.trace_detail;
      native->label = &f->label;
      native->commands = static_cast<uint32_t>(batch.commands.size());
      body.native = std::move(native);
    }
  }
  object_register(g.get());
  *out = std::move(g);
  return nullptr;
}

axrt_status_t replay(const ApiCall& api, Object* object) {
  auto* g = static_cast<Graph*>(object);
  Stream* stream = g->stream.get();
  GraphBody* body = g->body.get();
  if (body->native) {
    AXRT_RETURN_IF_ERROR(
        api.prefix(stream->vtable->launch_graph(stream, body->native.get(), Ref<Object>(body))));
  } else {
    AXRT_RETURN_IF_ERROR(api.prefix(stream->vtable->submit_batch(stream, replay_batch(*body))));
  }
  Device* device = stream->device.get();
  device->counters.function_calls.fetch_add(1, std::memory_order_relaxed);
  device->counters.dispatches.fetch_add(body->function->dispatch_count, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace
}  // namespace axrt

using namespace axrt;

AXRT_API axrt_status_t axrt_function_capture(axrt_function_t function, axrt_stream_t stream,
                                             const axrt_tensor_t* inputs, size_t input_count,
                                             const axrt_tensor_t* outputs, size_t output_count,
                                             const void* options, axrt_graph_t* out_graph) {
  static constexpr ApiCall api("axrt_function_capture");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    AXRT_RETURN_IF_ERROR(api.require_pointer(out_graph, "out_graph"));
    *out_graph = nullptr;
    Function* self = nullptr;
    Stream* target = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(function, "function", &self));
    trace_scope.set_detail(self->trace_name);
    AXRT_RETURN_IF_ERROR(api.resolve(stream, "stream", &target));
    if (options != nullptr) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT, "`options` is reserved and must be NULL");
    }
    if (target->device.get() != self->executable->device.get()) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{}: {} belongs to {}, but the executable is loaded on {}", self->label,
                       target->describe(), target->device->id(), self->executable->device->id());
    }
    if (input_count != self->inputs.size() || output_count != self->outputs.size()) {
      return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                       "{} takes {} inputs and {} outputs; the capture passes {} and {}",
                       self->label, self->inputs.size(), self->outputs.size(), input_count,
                       output_count);
    }
    if (input_count > 0) AXRT_RETURN_IF_ERROR(api.require_pointer(inputs, "inputs"));
    if (output_count > 0) AXRT_RETURN_IF_ERROR(api.require_pointer(outputs, "outputs"));
    Ref<Graph> graph;
    AXRT_RETURN_IF_ERROR(capture(api, self, target, inputs, outputs, &graph));
    *out_graph = to_handle<axrt_graph_t>(graph.release());
    return nullptr;
  });
}

AXRT_API axrt_status_t axrt_graph_replay(axrt_graph_t graph) {
  static constexpr ApiCall api("axrt_graph_replay");
  trace::ApiScope trace_scope(api.function());
  return guard(api.function(), [&]() -> axrt_status_t {
    Graph* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(graph, "graph", &self));
    trace_scope.set_detail(self->body->function->trace_name);
    return replay(api, self);
  });
}

AXRT_API axrt_status_t axrt_graph_query_info(axrt_graph_t graph, axrt_graph_info_t* out_info) {
  static constexpr ApiCall api("axrt_graph_query_info");
  return guard(api.function(), [&]() -> axrt_status_t {
    Graph* self = nullptr;
    AXRT_RETURN_IF_ERROR(api.resolve(graph, "graph", &self));
    AXRT_RETURN_IF_ERROR(check_query_struct(api, out_info, "out_info", "axrt_graph_info_t"));
    axrt_graph_info_t info = AXRT_GRAPH_INFO_INIT;
    info.label = self->label.c_str();
    info.command_count = static_cast<uint32_t>(self->body->batch->commands.size());
    info.native = self->body->native ? 1 : 0;
    info.arena_bytes = self->arena_bytes;
    write_query_struct(info, out_info);
    return nullptr;
  });
}

AXRT_API void axrt_graph_retain(axrt_graph_t graph) { retain_handle<Graph>(graph); }

AXRT_API void axrt_graph_release(axrt_graph_t graph) { release_handle<Graph>(graph); }
