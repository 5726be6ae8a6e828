// Loading functions. Pre-flight checks literal workgroup counts against the
// device's limits. Residency compiles each function into command templates:
// argument blocks with constant addresses and literal scalars already
// written, a short list of patches (input, output and arena addresses,
// symbolic scalars) that each call fills in, and expressions folded to
// literals where they have no symbols.
#include <cstring>

#include "runtime/loader.h"
#include "trace/trace.h"

namespace axrt {
namespace {

using axe::BindingKind;

// A collective command's reduction reaches the group as it is.
static_assert(static_cast<uint32_t>(axe::ReduceOp::SUM) == AXRT_REDUCE_SUM &&
              static_cast<uint32_t>(axe::ReduceOp::MAXIMUM) == AXRT_REDUCE_MAX &&
              static_cast<uint32_t>(axe::ReduceOp::MINIMUM) == AXRT_REDUCE_MIN);

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// Evaluates an expression with no symbols (or returns false when it has).
bool fold_constant(const axe::Expr* expr, uint64_t* out, bool* overflow) {
  *overflow = false;
  for (const axe::ExprOp* op : *expr->ops()) {
    if (op->opcode() == axe::ExprOpcode::SYMBOL) return false;
  }
  // An expression that fails (an overflow, a division by zero) is left to
  // each call, which reports why.
  StatusPtr failed(evaluate_value(ValueSource{expr, 0}, {}, {}, {}, out));
  *overflow = failed != nullptr;
  return true;
}

ArgumentSignature signature_of(const axe::TensorSig& sig) {
  ArgumentSignature arg;
  arg.name = str(sig.name());
  arg.dtype = static_cast<axrt_dtype_t>(sig.dtype());
  arg.is_mutable = sig.mutable_();
  if (sig.shape()) {
    for (const axe::Dim* dim : *sig.shape()) {
      const bool symbolic = dim->symbol() >= 0;
      arg.dims.push_back(symbolic ? -1 : static_cast<int64_t>(dim->value()));
      arg.dim_symbols.push_back(symbolic ? dim->symbol() : -1);
    }
  }
  return arg;
}

ValueSource value_of(const axe::Expr* expr, uint64_t absent) {
  if (!expr) return ValueSource{nullptr, absent};
  uint64_t value = 0;
  bool overflow = false;
  if (fold_constant(expr, &value, &overflow) && !overflow) return ValueSource{nullptr, value};
  return ValueSource{expr, 0};  // symbolic, or failing: evaluated per call
}

BufferSource buffer_of(const axe::Binding& binding) {
  BufferSource source;
  source.kind = binding.kind();
  source.index = binding.index();
  source.offset = binding.offset();
  source.size = binding.size();
  return source;
}

void compile_dispatch(const LoadContext& ctx, Executable* exe,
                      const axe::DispatchCommand& dispatch, CompiledCommand* out) {
  out->kind = BatchCommand::Kind::kDispatch;
  out->kernel = dispatch.kernel();
  const LoadedKernel& kernel = exe->kernels[out->kernel];
  const axe::Kernel& fk = *ctx.meta.kernels()->Get(out->kernel);
  out->workgroup_count[0] = value_of(dispatch.workgroup_count_x(), 1);
  out->workgroup_count[1] = value_of(dispatch.workgroup_count_y(), 1);
  out->workgroup_count[2] = value_of(dispatch.workgroup_count_z(), 1);
  out->args_template.assign((kernel.args_size + 7) / 8, 0);
  auto* block = reinterpret_cast<std::byte*>(out->args_template.data());
  const auto* bindings = dispatch.bindings();
  for (uint32_t p = 0; p < kernel.param_offsets.size(); ++p) {
    const axe::Binding& binding = *bindings->Get(p);
    const axe::KernelParam& param = *fk.params()->Get(p);
    ArgumentPatch patch;
    patch.offset = kernel.param_offsets[p];
    patch.size = kernel.param_sizes[p];
    if (param.kind() == axe::ParamKind::BUFFER) {
      if (binding.kind() == BindingKind::CONSTANT) {
        const ResidentConstant& constant = exe->constants[binding.index()];
        const Ref<Buffer>& buffer =
            static_cast<int32_t>(p) == kernel.packed_param ? constant.packed : constant.buffer;
        const uint64_t address = buffer->device_address(buffer->offset);
        std::memcpy(block + patch.offset, &address, 8);
        continue;
      }
      patch.is_buffer = true;
      patch.buffer = buffer_of(binding);
      if (param.access() == axe::Access::WRITE || param.access() == axe::Access::READ_WRITE) {
        out->writes.push_back(CommandWrite{patch.buffer, str(param.name()),
                                           static_cast<axrt_dtype_t>(param.scalar_type())});
      }
    } else {
      patch.scalar_type = static_cast<axrt_dtype_t>(param.scalar_type());
      // Format 1.3: a signed parameter's negative literal (the verifier
      // allows one nowhere else, and only alone).
      const auto* ops = binding.value()->ops();
      patch.negative = ops->size() == 1 && ops->Get(0)->operand() < 0;
      patch.value = value_of(binding.value(), 0);
      if (!patch.value.expr && encode_scalar_argument(patch, patch.value.literal, block)) continue;
      // Literals that do not fit fail every call with the reason.
      patch.value.expr = binding.value();
    }
    out->patches.push_back(patch);
  }
}

// The element types of what `command` (the function's last) writes: the
// signature's for inputs and outputs; for a copy into the arena, that of its
// source (a signature, a constant, or the latest earlier write of an arena
// range holding the source's).
void type_writes(const LoadContext& ctx, const Function& f, CompiledCommand* command) {
  auto signature_type = [&](const BufferSource& b) -> axrt_dtype_t {
    if (b.kind == BindingKind::INPUT) return f.inputs[b.index].dtype;
    if (b.kind == BindingKind::OUTPUT) return f.outputs[b.index].dtype;
    return AXRT_DTYPE_INVALID;
  };
  for (CommandWrite& write : command->writes) {
    if (axrt_dtype_t dtype = signature_type(write.binding); dtype != AXRT_DTYPE_INVALID) {
      write.dtype = dtype;
    }
  }
  if (command->kind != BatchCommand::Kind::kCopy) return;
  CommandWrite& write = command->writes.front();
  if (write.dtype != AXRT_DTYPE_INVALID) return;
  const BufferSource& src = command->src;
  if (src.kind == BindingKind::CONSTANT) {
    const axe::Constant& constant = *ctx.meta.constants()->Get(src.index);
    write.dtype = static_cast<axrt_dtype_t>(constant.dtype());
    return;
  }
  write.dtype = signature_type(src);
  if (src.kind != BindingKind::ARENA) return;
  for (auto earlier = f.commands.rbegin(); earlier != f.commands.rend(); ++earlier) {
    for (const CommandWrite& w : earlier->writes) {
      if (w.binding.kind == BindingKind::ARENA && w.binding.offset <= src.offset &&
          w.binding.offset + w.binding.size >= src.offset + src.size &&
          w.dtype != AXRT_DTYPE_INVALID) {
        write.dtype = w.dtype;
        return;
      }
    }
  }
}

}  // namespace

// Literal workgroup counts are checked against the device's limits now;
// the others at every call.
axrt_status_t check_dispatches(const LoadContext& ctx) {
  if (!ctx.meta.functions()) return nullptr;
  const axrt_device_properties_t& p = ctx.device->properties;
  for (const axe::Function* function : *ctx.meta.functions()) {
    if (!function->commands()) continue;
    for (uint32_t c = 0; c < function->commands()->size(); ++c) {
      if (function->commands_type()->Get(c) != axe::Command::DispatchCommand) continue;
      const auto* dispatch = function->commands()->GetAs<axe::DispatchCommand>(c);
      const axe::Expr* counts[3] = {dispatch->workgroup_count_x(), dispatch->workgroup_count_y(),
                                    dispatch->workgroup_count_z()};
      for (int d = 0; d < 3; ++d) {
        if (!counts[d]) continue;
        uint64_t value = 0;
        bool overflow = false;
        if (!fold_constant(counts[d], &value, &overflow)) continue;
        if (overflow || value > p.max_workgroup_count[d]) {
          return make_status(AXRT_STATUS_CODE_OUT_OF_RANGE,
                             "{}: function '{}' command {} dispatches {} workgroups along {}, "
                             "beyond {}'s limit of {}",
                             ctx.what(), str(function->name()), c,
                             overflow ? std::string("an overflowing number of")
                                      : std::to_string(value),
                             "xyz"[d], ctx.device->id(), p.max_workgroup_count[d]);
        }
      }
    }
  }
  return nullptr;
}

axrt_status_t compile_functions(const LoadContext& ctx, Executable* exe) {
  const auto* functions = ctx.meta.functions();
  if (!functions) return nullptr;
  const char* const trace_executable = trace::intern(ctx.name);
  for (const axe::Function* fb : *functions) {
    auto function = std::make_unique<Function>();
    Function& f = *function;
    f.executable = exe;
    f.owner = exe;
    f.destroy = nullptr;
    f.name = str(fb->name());
    f.label = fmt::format("function '{}' of executable '{}'", f.name, ctx.name);
    f.arena_label = fmt::format("arena of {}", f.label);
    f.trace_name = trace::intern(f.name);
    f.trace_executable = trace_executable;
    if (fb->symbols() && fb->symbols()->size() > kMaxSymbols) {
      return make_status(AXRT_STATUS_CODE_UNIMPLEMENTED,
                         "{}: function '{}' has {} symbolic dimensions; this runtime binds at "
                         "most {}",
                         ctx.what(), f.name, fb->symbols()->size(), kMaxSymbols);
    }
    if (fb->symbols()) {
      for (const axe::Symbol* symbol : *fb->symbols()) {
        f.symbol_names.push_back(str(symbol->name()));
        f.symbol_bounds.push_back(symbol->upper_bound());
      }
    }
    if (fb->inputs()) {
      for (const axe::TensorSig* sig : *fb->inputs()) f.inputs.push_back(signature_of(*sig));
    }
    if (fb->outputs()) {
      for (const axe::TensorSig* sig : *fb->outputs()) f.outputs.push_back(signature_of(*sig));
    }
    f.arena_size = fb->arena_size();
    if (fb->channels()) {
      for (const axe::Channel* channel : *fb->channels()) {
        f.channels.emplace_back(str(channel->name()), channel->size());
      }
    }
    const uint32_t command_count = fb->commands() ? fb->commands()->size() : 0;
    for (uint32_t c = 0; c < command_count; ++c) {
      CompiledCommand command;
      switch (fb->commands_type()->Get(c)) {
        case axe::Command::DispatchCommand:
          compile_dispatch(ctx, exe, *fb->commands()->GetAs<axe::DispatchCommand>(c), &command);
          f.args_words += (exe->kernels[command.kernel].args_size + 7) / 8;
          break;
        case axe::Command::CopyCommand: {
          const auto& copy = *fb->commands()->GetAs<axe::CopyCommand>(c);
          command.kind = BatchCommand::Kind::kCopy;
          command.src = buffer_of(*copy.src());
          command.dst = buffer_of(*copy.dst());
          command.src_offset = value_of(copy.src_offset(), 0);
          command.dst_offset = value_of(copy.dst_offset(), 0);
          command.length = value_of(copy.length(), 0);
          command.writes.push_back(CommandWrite{command.dst, "dst", AXRT_DTYPE_INVALID});
          break;
        }
        case axe::Command::FillCommand: {
          const auto& fill = *fb->commands()->GetAs<axe::FillCommand>(c);
          command.kind = BatchCommand::Kind::kFill;
          command.dst = buffer_of(*fill.target());
          command.dst_offset = value_of(fill.offset(), 0);
          command.length = value_of(fill.length(), 0);
          command.pattern = fill.pattern();
          command.pattern_size = fill.pattern_size();
          command.writes.push_back(CommandWrite{command.dst, "dst", AXRT_DTYPE_INVALID});
          break;
        }
        case axe::Command::CollectiveCommand: {
          const auto& cc = *fb->commands()->GetAs<axe::CollectiveCommand>(c);
          command.is_collective = true;
          CompiledCollective& out = command.collective;
          switch (cc.kind()) {
            case axe::CollectiveKind::ALL_GATHER: out.kind = AXRT_COLLECTIVE_ALL_GATHER; break;
            case axe::CollectiveKind::REDUCE_SCATTER: out.kind = AXRT_COLLECTIVE_REDUCE_SCATTER; break;
            case axe::CollectiveKind::BROADCAST: out.kind = AXRT_COLLECTIVE_BROADCAST; break;
            default: out.kind = AXRT_COLLECTIVE_ALL_REDUCE; break;
          }
          out.channel = cc.channel();
          out.dtype = static_cast<axrt_dtype_t>(cc.dtype());
          out.op = static_cast<axrt_reduce_op_t>(cc.op());  // the values agree
          out.root = cc.root();
          out.count = value_of(cc.count(), 0);
          command.src = buffer_of(*cc.send());
          command.dst = buffer_of(*cc.recv());
          command.src_offset = value_of(cc.send_offset(), 0);
          command.dst_offset = value_of(cc.recv_offset(), 0);
          command.writes.push_back(CommandWrite{command.dst, "recv", out.dtype});
          f.collective_commands.push_back(c);
          break;
        }
        default:  // the reader refuses unknown commands
          return make_status(AXRT_STATUS_CODE_INTERNAL, "{}: unknown command type", f.label);
      }
      f.dispatch_count += !command.is_collective && command.kind == BatchCommand::Kind::kDispatch;
      type_writes(ctx, f, &command);
      f.commands.push_back(std::move(command));
    }
    exe->functions.push_back(std::move(function));
  }
  return nullptr;
}

}  // namespace axrt
