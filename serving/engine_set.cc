// The serving engine on a tensor-parallel set (docs/multi-device.md,
// "Serving a set"): the members after the head, checked and set up at
// creation, and every step queued on all of them at once.
#include <string>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "axrt/axrt.h"
#include "base/status.h"
#include "serving/contract.h"
#include "serving/engine.h"

namespace axrt::serving {
namespace {

constexpr axrt_status_code_t kInvalid = AXRT_STATUS_CODE_INVALID_ARGUMENT;

}  // namespace

Peer::~Peer() {
  thread.reset();  // first: it may still be queueing work on the stream
  if (stream != nullptr) {
    if (axrt_status_t s = axrt_stream_synchronize(stream)) axrt_status_free(s);
  }
  axrt_tensor_release(cache);
  for (axrt_buffer_t b : {tokens, positions, tables, rows, cache_buffer}) axrt_buffer_release(b);
  axrt_stream_release(stream);
  axrt_device_release(device);
  axrt_function_release(step);
  axrt_executable_release(executable);
}

axrt_status_t setup_member(const ModelShape& shape, uint64_t num_blocks, uint32_t r,
                           size_t members, axrt_executable_t executable, Peer* out) {
  constexpr axrt_argument_kind_t kIn = AXRT_ARGUMENT_KIND_INPUT;
  Peer& p = *out;
  p.rank = r;
  axrt_executable_retain(executable);
  p.executable = executable;
  AXRT_RETURN_IF_ERROR(axrt_executable_get_device(p.executable, &p.device));
  AXRT_RETURN_IF_ERROR(find_function(p.executable, "step", &p.step));
  AXRT_RETURN_IF_ERROR(check_channels(p.step, r, members));
  // The head's inputs; no output: the head alone makes the logits.
  const std::string what = fmt::format("rank {}'s step", r);
  AXRT_RETURN_IF_ERROR(contract_arity(p.step, what.c_str(), 5, 0));
  Argument tokens, positions, tables, rows, cache;
  AXRT_RETURN_IF_ERROR(
      contract_argument(p.step, what.c_str(), kIn, 0, "tokens", AXRT_DTYPE_INT32, "s", &tokens));
  AXRT_RETURN_IF_ERROR(contract_argument(p.step, what.c_str(), kIn, 1, "positions",
                                         AXRT_DTYPE_INT32, "s", &positions));
  AXRT_RETURN_IF_ERROR(contract_argument(p.step, what.c_str(), kIn, 2, "block_tables",
                                         AXRT_DTYPE_INT32, "sf", &tables));
  AXRT_RETURN_IF_ERROR(contract_argument(p.step, what.c_str(), kIn, 3, "logit_rows",
                                         AXRT_DTYPE_INT32, "s", &rows));
  AXRT_RETURN_IF_ERROR(contract_argument(p.step, what.c_str(), kIn, 4, "kv_cache",
                                         shape.cache_dtype, "ffsfff", &cache));
  if (tokens.bounds[0] < shape.max_tokens || rows.bounds[0] < shape.max_rows ||
      tables.bounds[1] != shape.max_blocks || cache.bounds[0] != shape.layers ||
      cache.bounds[1] != 2 || cache.bounds[4] != shape.block_size ||
      cache.bounds[5] != shape.row) {
    return make_status(kInvalid,
                       "axrt_engine_create: {} does not take what the head's takes (tokens, "
                       "rows, block tables and the cache's layers, blocks and heads' size)",
                       what);
  }
  p.kv_heads = cache.bounds[3];
  p.num_blocks = num_blocks;
  AXRT_RETURN_IF_ERROR(axrt_stream_create(p.device, nullptr, &p.stream));
  const uint64_t T = shape.max_tokens;
  const uint64_t S = shape.max_rows;
  const uint64_t block_bytes = shape.layers * 2 * shape.plane_block_bytes(p.kv_heads);
  for (const auto& [buffer, bytes] :
       {std::pair{&p.tokens, T * 4}, std::pair{&p.positions, T * 4},
        std::pair{&p.tables, T * shape.max_blocks * 4}, std::pair{&p.rows, S * 4},
        std::pair{&p.cache_buffer, num_blocks * block_bytes}}) {
    if (axrt_status_t s = axrt_buffer_allocate(p.device, bytes, nullptr, buffer)) {
      if (buffer != &p.cache_buffer) return s;
      StatusPtr owned(s);
      return make_status(axrt_status_code(s),
                         "axrt_engine_create: rank {}'s KV cache of {} blocks ({} bytes): {}", r,
                         num_blocks, bytes, axrt_status_message(s));
    }
  }
  return cache_tensor(shape, p.cache_buffer, num_blocks, p.kv_heads, &p.cache);
}

axrt_status_t queue_member_step(const ModelShape& shape, axrt_group_t group, Peer& p,
                                const MemberStep& in) {
  const uint64_t MB = shape.max_blocks;
  AXRT_RETURN_IF_ERROR(copy_blocks(shape, in.copies, in.copy_count, p.num_blocks, p.stream,
                                   p.cache_buffer, p.kv_heads));
  const uint64_t T = in.T, R = in.R;
  AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(p.stream, in.tokens, p.tokens, 0, T * 4));
  AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(p.stream, in.positions, p.positions, 0, T * 4));
  AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(p.stream, in.tables, p.tables, 0, T * MB * 4));
  AXRT_RETURN_IF_ERROR(axrt_stream_copy_from_host(p.stream, in.rows, p.rows, 0, R * 4));
  StepTensors tensors(4);
  axrt_tensor_t inputs[5] = {nullptr, nullptr, nullptr, nullptr, p.cache};
  const auto i64 = [](uint64_t v) { return static_cast<int64_t>(v); };
  AXRT_RETURN_IF_ERROR(tensors.make(p.tokens, AXRT_DTYPE_INT32, {i64(T)}, &inputs[0]));
  AXRT_RETURN_IF_ERROR(tensors.make(p.positions, AXRT_DTYPE_INT32, {i64(T)}, &inputs[1]));
  AXRT_RETURN_IF_ERROR(tensors.make(p.tables, AXRT_DTYPE_INT32, {i64(T), i64(MB)}, &inputs[2]));
  AXRT_RETURN_IF_ERROR(tensors.make(p.rows, AXRT_DTYPE_INT32, {i64(R)}, &inputs[3]));
  axrt_invoke_channel_t channel = {group, p.rank};
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.channels = &channel;
  options.channel_count = 1;
  return axrt_function_invoke(p.step, p.stream, inputs, 5, nullptr, 0, &options);
}

axrt_status_t Engine::init_peers(const axrt_engine_options_t& options, uint64_t num_blocks) {
  const size_t members = options.executable_count;
  axrt_device_t head = nullptr;
  AXRT_RETURN_IF_ERROR(axrt_group_get_device(group_, 0, &head));
  axrt_device_release(head);  // only compared
  if (head != device_) {
    return make_status(kInvalid,
                       "axrt_engine_create: executables[0] is not loaded on the group's member 0");
  }
  for (uint32_t r = 1; r < members; ++r) {
    auto peer = std::make_unique<Peer>();
    try {
      peer->thread = std::make_unique<MemberThread>(r);
    } catch (const std::system_error& e) {
      return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                         "axrt_engine_create: no thread for member {}: {}", r, e.what());
    }
    if (options.executables[r] == nullptr) {
      return make_status(kInvalid, "axrt_engine_create: options.executables[{}] is NULL", r);
    }
    axrt_device_t device = nullptr;
    AXRT_RETURN_IF_ERROR(axrt_executable_get_device(options.executables[r], &device));
    axrt_device_release(device);  // only compared
    axrt_device_t member = nullptr;
    AXRT_RETURN_IF_ERROR(axrt_group_get_device(group_, r, &member));
    axrt_device_release(member);  // only compared
    if (member != device) {
      return make_status(kInvalid,
                         "axrt_engine_create: executables[{}] is not loaded on the group's "
                         "member {}",
                         r, r);
    }
    AXRT_RETURN_IF_ERROR(setup_member(shape_, num_blocks, r, members, options.executables[r], peer.get()));
    peers_.push_back(std::move(peer));
  }
  return nullptr;
}

axrt_status_t Engine::execute_peer(Peer& p, const StepPlan& plan, uint64_t T, uint64_t R) {
  const Staging& h = staging_;
  MemberStep in;
  in.tokens = h.tokens.data();
  in.positions = h.positions.data();
  in.tables = h.tables.data();
  in.rows = h.rows.data();
  in.copies = plan.copies.data();
  in.copy_count = plan.copies.size();
  in.T = T;
  in.R = R;
  return queue_member_step(shape_, group_, p, in);
}

axrt_status_t Engine::execute_set(axrt_tensor_t* inputs, axrt_tensor_t logits,
                                  const StepPlan& plan, uint64_t T, uint64_t R) {
  if (remote_) return execute_remote(inputs, logits, plan, T, R);
  // The other members first, each on its thread; then the head here.
  for (const auto& peer : peers_) {
    Peer& p = *peer;
    p.engine = this;
    p.plan = &plan;
    p.T = T;
    p.R = R;
    p.thread->post(
        [](void* context) -> axrt_status_t {
          Peer& member = *static_cast<Peer*>(context);
          return member.engine->execute_peer(member, *member.plan, member.T, member.R);
        },
        &p);
  }
  axrt_invoke_channel_t channel = {group_, 0};
  axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
  options.channels = &channel;
  options.channel_count = 1;
  StatusPtr failed(axrt_function_invoke(step_, stream_, inputs, 5, &logits, 1, &options));
  // A member that could not queue its step leaves the others' collectives
  // waiting for its parts: the group ends them, so that no member's thread
  // waits for it.
  if (failed) abort_group(axrt_status_message(failed.get()));
  for (const auto& peer : peers_) {
    StatusPtr s(peer->thread->wait());
    if (s && !failed) {
      abort_group(axrt_status_message(s.get()));
      failed = std::move(s);
    }
  }
  return failed.release();
}

}  // namespace axrt::serving
