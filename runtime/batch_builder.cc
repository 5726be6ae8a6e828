// Filling a function's command templates into one command batch: the
// argument blocks copied, every buffer address and symbolic scalar patched
// in, grids, offsets and lengths evaluated and checked for this call.
#include <cstring>
#include <tuple>

#include "runtime/call.h"

namespace axrt {
namespace {

// The buffer, offset from its allocation's start, and size of a binding.
struct BoundBuffer {
  Buffer* buffer;
  uint64_t offset;
  uint64_t size;
};

BoundBuffer resolve_binding(const BufferSource& source, const CallState& call) {
  switch (source.kind) {
    case axe::BindingKind::INPUT:
    case axe::BindingKind::OUTPUT: {
      const Tensor* t = source.kind == axe::BindingKind::INPUT ? call.inputs[source.index]
                                                               : call.outputs[source.index];
      return {t->buffer.get(), t->buffer->offset + t->byte_offset, t->contiguous_bytes()};
    }
    case axe::BindingKind::CONSTANT: {
      Buffer* b = call.executable->constants[source.index].buffer.get();
      return {b, b->offset, b->size};
    }
    case axe::BindingKind::ARENA:
      return {call.arena, call.arena->offset + source.offset, source.size};
    default:
      return {nullptr, 0, 0};
  }
}

// A collective command's part: its count and offsets evaluated, its ranges
// checked against its bindings (a block per member where the collective
// takes one, with the size of the group its channel is bound to).
template <typename Eval>
axrt_status_t resolve_collective(const ApiCall& api, CallState& call, size_t c, const Eval& eval) {
  const Function& f = *call.function;
  const CompiledCommand& command = f.commands[c];
  const CompiledCollective& what = command.collective;
  CallCollective out;
  out.command = static_cast<uint32_t>(c);
  out.what = &what;
  uint64_t send_offset = 0, recv_offset = 0;
  AXRT_RETURN_IF_ERROR(eval(what.count, c, "count", &out.count));
  AXRT_RETURN_IF_ERROR(eval(command.src_offset, c, "send offset", &send_offset));
  AXRT_RETURN_IF_ERROR(eval(command.dst_offset, c, "receive offset", &recv_offset));
  const uint64_t members = call.channel_sizes[what.channel];
  if (what.kind == AXRT_COLLECTIVE_BROADCAST && what.root >= members) {
    return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                     "{} command {}: the broadcast's root {} is not a member of the group on "
                     "channel '{}' ({} members)",
                     f.label, c, what.root, f.channels[what.channel].first, members);
  }
  uint64_t block = 0;
  if (__builtin_mul_overflow(out.count, dtype_bytes(what.dtype, 1), &block) ||
      block > UINT64_MAX / members) {
    return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE, "{} command {}: {} elements overflow", f.label,
                     c, out.count);
  }
  const uint64_t send_bytes = what.kind == AXRT_COLLECTIVE_REDUCE_SCATTER ? block * members : block;
  const uint64_t recv_bytes = what.kind == AXRT_COLLECTIVE_ALL_GATHER ? block * members : block;
  const BoundBuffer send = resolve_binding(command.src, call);
  const BoundBuffer recv = resolve_binding(command.dst, call);
  for (const auto& [side, b, offset, bytes] :
       {std::tuple{"send", send, send_offset, send_bytes},
        std::tuple{"receive", recv, recv_offset, recv_bytes}}) {
    if (offset > b.size || bytes > b.size - offset) {
      return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                       "{} command {}: the {} range [{}, {} + {}) lies outside its {}-byte "
                       "binding ({} members of the group on channel '{}')",
                       f.label, c, side, offset, offset, bytes, b.size, members,
                       f.channels[what.channel].first);
    }
  }
  out.send = send.buffer;
  out.send_offset = send.offset - send.buffer->offset + send_offset;
  out.recv = recv.buffer;
  out.recv_offset = recv.offset - recv.buffer->offset + recv_offset;
  call.collectives.push_back(out);
  return nullptr;
}

}  // namespace

axrt_status_t build_batch(const ApiCall& api, CallState& call, CommandBatch* batch) {
  const Function& f = *call.function;
  const Executable& exe = *call.executable;
  const auto symbols = call.symbol_values();
  const auto bound = call.symbol_bound();
  const auto names = std::span<const std::string>(f.symbol_names);
  batch->commands.resize(f.commands.size());
  batch->args.assign(f.args_words, 0);
  uint32_t args_offset = 0;
  auto eval = [&](const ValueSource& v, size_t c, const char* field, uint64_t* out) -> axrt_status_t {
    if (!v.expr) {
      *out = v.literal;
      return nullptr;
    }
    // The command is named only when it fails: nothing is formatted (or
    // allocated) on the way that succeeds.
    axrt_status_t status = evaluate_value(v, symbols, bound, names, out);
    if (!status) return nullptr;
    StatusPtr owned(status);
    return api.error(axrt_status_code(status), "{} command {} {}: {}", f.label, c, field,
                     axrt_status_message(status));
  };
  call.collectives.clear();
  for (size_t c = 0; c < f.commands.size(); ++c) {
    const CompiledCommand& command = f.commands[c];
    BatchCommand& out = batch->commands[c];
    out.kind = command.kind;
    if (command.is_collective) {
      AXRT_RETURN_IF_ERROR(resolve_collective(api, call, c, eval));
      continue;
    }
    if (command.kind == BatchCommand::Kind::kDispatch) {
      const LoadedKernel& kernel = exe.kernels[command.kernel];
      if (kernel.code) {
        out.device_kernel = &kernel.device;
      } else {
        out.host_kernel = &kernel.host;
      }
      out.args_offset = args_offset;
      out.args_size = kernel.args_size;
      auto* block = reinterpret_cast<std::byte*>(batch->args.data()) + args_offset;
      std::memcpy(block, command.args_template.data(), command.args_template.size() * 8);
      args_offset += static_cast<uint32_t>(command.args_template.size() * 8);
      for (const ArgumentPatch& patch : command.patches) {
        if (patch.is_buffer) {
          const BoundBuffer b = resolve_binding(patch.buffer, call);
          const uint64_t address = b.buffer->device_address(b.offset);
          std::memcpy(block + patch.offset, &address, 8);
          continue;
        }
        uint64_t value = 0;
        AXRT_RETURN_IF_ERROR(eval(patch.value, c, "scalar argument", &value));
        if (!encode_scalar_argument(patch, value, block)) {
          return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "{} command {}: scalar argument value {} does not fit its type {}",
                           f.label, c,
                           patch.negative ? std::to_string(static_cast<int64_t>(value))
                                          : std::to_string(value),
                           dtype_name(patch.scalar_type));
        }
      }
      uint32_t counts[3];
      for (int d = 0; d < 3; ++d) {
        uint64_t value = 0;
        AXRT_RETURN_IF_ERROR(eval(command.workgroup_count[d], c, "workgroup count", &value));
        if (value > exe.device->properties.max_workgroup_count[d]) {
          return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                           "{} command {}: {} workgroups along {} exceed {}'s limit of {}",
                           f.label, c, value, "xyz"[d], exe.device->id(),
                           exe.device->properties.max_workgroup_count[d]);
        }
        counts[d] = static_cast<uint32_t>(value);
      }
      out.workgroup_count = {counts[0], counts[1], counts[2]};
      continue;
    }
    uint64_t dst_offset = 0, length = 0;
    AXRT_RETURN_IF_ERROR(eval(command.dst_offset, c, "offset", &dst_offset));
    AXRT_RETURN_IF_ERROR(eval(command.length, c, "length", &length));
    const BoundBuffer dst = resolve_binding(command.dst, call);
    auto check_range = [&](const BoundBuffer& b, uint64_t offset, const char* side) -> axrt_status_t {
      if (offset > b.size || length > b.size - offset) {
        return api.error(AXRT_STATUS_CODE_OUT_OF_RANGE,
                         "{} command {}: {} range [{}, {} + {}) lies outside its {}-byte binding",
                         f.label, c, side, offset, offset, length, b.size);
      }
      return nullptr;
    };
    AXRT_RETURN_IF_ERROR(check_range(dst, dst_offset, "the destination"));
    if (command.kind == BatchCommand::Kind::kFill) {
      if (length % command.pattern_size != 0) {
        return api.error(AXRT_STATUS_CODE_INVALID_ARGUMENT,
                         "{} command {}: fill length {} is not a multiple of the {}-byte pattern",
                         f.label, c, length, command.pattern_size);
      }
      out.fill_buffer = dst.buffer;
      out.fill_offset = dst.offset + dst_offset;
      out.fill_length = length;
      out.fill_pattern = command.pattern;
      out.fill_pattern_size = command.pattern_size;
      continue;
    }
    uint64_t src_offset = 0;
    AXRT_RETURN_IF_ERROR(eval(command.src_offset, c, "source offset", &src_offset));
    const BoundBuffer src = resolve_binding(command.src, call);
    AXRT_RETURN_IF_ERROR(check_range(src, src_offset, "the source"));
    out.copy.src = CopyEndpoint{src.buffer, nullptr, src.offset + src_offset, 0};
    out.copy.dst = CopyEndpoint{dst.buffer, nullptr, dst.offset + dst_offset, 0};
    out.copy.width = length;
    out.copy.height = 1;
  }
  return nullptr;
}

}  // namespace axrt
