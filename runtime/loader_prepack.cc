// Pre-packed weights on host devices (docs/kernels.md, "Pre-packed
// weights"). A library may offer a kernel in a second form that reads one
// parameter in another layout, with a packer that makes that layout from the
// canonical one (the built-in library: kernels/cpu/library.h). When every
// dispatch of such a kernel binds that parameter to a constant the packer
// takes, the load packs those constants once, into memory of its own, and
// runs the packed form; the canonical views stay for every other binding.
// A file may carry the packed copy itself (docs/format.md 4.3: a pre-packed
// copy for the host's architecture in the layout the packed form reads, of
// the size the packer gives); the load then reads that copy where the file
// is mapped instead of packing. The results are the same bits: the packed
// form is the same code reading the same words from other places.
#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>

#include "runtime/buffer.h"
#include "runtime/host_code.h"
#include "runtime/loader.h"

namespace axrt {
namespace {

// AXRT_CPU_PREPACK=0 keeps every kernel on the canonical layouts (for
// comparing the two; read at every load).
bool prepack_enabled() {
  const char* value = std::getenv("AXRT_CPU_PREPACK");
  return !value || std::strcmp(value, "0") != 0;
}

std::vector<uint64_t> shape_of(const axe::Constant& constant) {
  std::vector<uint64_t> shape;
  if (constant.shape()) shape.assign(constant.shape()->begin(), constant.shape()->end());
  return shape;
}

// Bytes of `constant`'s packed copy, 0 when `prepack` cannot pack it.
uint64_t packed_size(const LoadContext& ctx, const KernelLibrary::Prepack& prepack,
                     const axe::Constant& constant) {
  const auto* layout = constant.quantization();
  if (!layout || !layout->layout_id() ||
      layout->layout_id()->string_view() != prepack.from_layout) {
    return 0;
  }
  const std::vector<uint64_t> shape = shape_of(constant);
  const uint64_t bytes = ctx.file.range_bytes(*constant.data()).size();
  return prepack.packer->packed_size(shape.data(), static_cast<uint32_t>(shape.size()), bytes);
}

// Every constant bound to parameter `param` of kernel `k`; false when a
// dispatch binds it to anything else (an input, the arena).
bool bound_constants(const LoadContext& ctx, uint32_t k, uint32_t param,
                     std::vector<uint32_t>* out) {
  if (!ctx.meta.functions()) return true;
  for (const axe::Function* function : *ctx.meta.functions()) {
    if (!function->commands()) continue;
    for (uint32_t c = 0; c < function->commands()->size(); ++c) {
      if (function->commands_type()->Get(c) != axe::Command::DispatchCommand) continue;
      const auto* dispatch = function->commands()->GetAs<axe::DispatchCommand>(c);
      if (dispatch->kernel() != k) continue;
      const axe::Binding& binding = *dispatch->bindings()->Get(param);
      if (binding.kind() != axe::BindingKind::CONSTANT) return false;
      out->push_back(binding.index());
    }
  }
  return true;
}

// The file's own copy of `constant` in `layout` for this host, of `size`
// bytes, or null.
const axe::PrepackedCopy* file_copy(const axe::Constant& constant, std::string_view layout,
                                    uint64_t size) {
  if (!constant.prepacked()) return nullptr;
  for (const axe::PrepackedCopy* copy : *constant.prepacked()) {
    if (copy->target() && copy->target()->string_view() == host_architecture() &&
        copy->layout_id() && copy->layout_id()->string_view() == layout &&
        copy->data()->size() == size) {
      return copy;
    }
  }
  return nullptr;
}

}  // namespace

void choose_prepacked(const LoadContext& ctx, std::vector<ResolvedKernel>* resolved) {
  if (!ctx.device_runs_host_code() || !prepack_enabled()) return;
  // The layout each constant is packed into: one per constant.
  std::unordered_map<uint32_t, std::string_view> packed_into;
  for (uint32_t k = 0; k < resolved->size(); ++k) {
    ResolvedKernel& r = (*resolved)[k];
    if (!r.library || !r.info) continue;
    const auto found = r.library->prepacks.find(r.info->name);
    if (found == r.library->prepacks.end()) continue;
    const KernelLibrary::Prepack& prepack = found->second;
    std::vector<uint32_t> constants;
    if (!bound_constants(ctx, k, prepack.param, &constants) || constants.empty()) continue;
    bool packable = true;
    for (uint32_t c : constants) {
      const auto taken = packed_into.find(c);
      packable = packable && (taken == packed_into.end() || taken->second == prepack.to_layout) &&
                 packed_size(ctx, prepack, *ctx.meta.constants()->Get(c)) != 0;
    }
    if (!packable) continue;
    for (uint32_t c : constants) packed_into[c] = prepack.to_layout;
    r.info = prepack.packed;
    r.prepack = &prepack;
    r.packed_constants = std::move(constants);
  }
}

axrt_status_t pack_constants(const LoadContext& ctx, const std::vector<ResolvedKernel>& resolved,
                             Executable* exe) {
  const auto label = [&](const axe::Constant& constant, std::string_view layout) {
    return fmt::format("{} ({})", constant.name() ? constant.name()->str() : "", layout);
  };
  // The constants to pack, each once (choose_prepacked gave each one
  // layout), at the device's buffer alignment in one allocation.
  struct Packing {
    uint32_t constant;
    const KernelLibrary::Prepack* prepack;
    uint64_t offset;
    uint64_t size;
  };
  std::vector<Packing> packings;
  const uint64_t alignment = std::max<uint64_t>(ctx.device->properties.buffer_alignment, 64);
  const std::byte* const file = reinterpret_cast<const std::byte*>(ctx.file.file_bytes().data());
  uint64_t total = 0;
  std::vector<bool> taken(exe->constants.size());
  for (const ResolvedKernel& r : resolved) {
    for (uint32_t c : r.packed_constants) {
      if (taken[c]) continue;  // bound to another kernel's parameter too
      taken[c] = true;
      ResidentConstant& resident = exe->constants[c];
      const axe::Constant& constant = *ctx.meta.constants()->Get(c);
      const uint64_t size = packed_size(ctx, *r.prepack, constant);
      if (const axe::PrepackedCopy* copy = file_copy(constant, r.prepack->to_layout, size)) {
        // A view of the mapped file (the canonical view's root), no copy.
        const auto* bytes =
            reinterpret_cast<const std::byte*>(ctx.file.range_bytes(*copy->data()).data());
        resident.packed = buffer_create_view(resident.buffer->allocation(),
                                             static_cast<uint64_t>(bytes - file), size,
                                             label(constant, r.prepack->to_layout));
        continue;
      }
      total = (total + alignment - 1) / alignment * alignment;
      packings.push_back({c, r.prepack, total, size});
      total += size;
    }
  }
  if (packings.empty()) return nullptr;
  auto* memory = static_cast<std::byte*>(
      ::operator new(total, std::align_val_t(alignment), std::nothrow));
  if (!memory) {
    return ctx.prefix(make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                                  "no host memory for {} bytes of pre-packed weights", total));
  }
  struct Held {
    std::byte* memory;
    std::align_val_t alignment;
  };
  auto* held = new Held{memory, std::align_val_t(alignment)};
  // From here the buffer owns the memory, even when the call throws.
  Ref<Buffer> buffer = buffer_wrap_external(
      ctx.device, memory, reinterpret_cast<uintptr_t>(memory), total,
      AXRT_MEMORY_TYPE_DEVICE_LOCAL, fmt::format("pre-packed weights of {}", ctx.name),
      [](void* context) {
        auto* h = static_cast<Held*>(context);
        ::operator delete(h->memory, h->alignment);
        delete h;
      },
      held);
  for (const Packing& p : packings) {
    const axe::Constant& constant = *ctx.meta.constants()->Get(p.constant);
    const std::vector<uint64_t> shape = shape_of(constant);
    p.prepack->packer->pack(ctx.file.range_bytes(*constant.data()).data(), shape.data(),
                            static_cast<uint32_t>(shape.size()), memory + p.offset);
    exe->constants[p.constant].packed =
        buffer_create_view(buffer.get(), p.offset, p.size, label(constant, p.prepack->to_layout));
  }
  return nullptr;
}

}  // namespace axrt
