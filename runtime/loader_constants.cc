// Loading constants. Host devices read them where the file is mapped: one
// external buffer over the file, a view per constant, no copy. Other
// devices get one buffer holding every constant, uploaded once.
#include <algorithm>

#include "runtime/api.h"
#include "runtime/buffer.h"
#include "runtime/loader.h"

namespace axrt {
namespace {

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// Devices that do not read host memory get one buffer holding every
// constant, each at its alignment (at least the device's), filled from the
// mapped file through a stream of their own.
axrt_status_t upload_constants(const LoadContext& ctx, Executable* exe) {
  const auto* constants = ctx.meta.constants();
  const uint32_t count = constants->size();
  const uint64_t base_alignment = ctx.device->properties.buffer_alignment;
  std::vector<uint64_t> offsets(count);
  uint64_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const axe::Constant& constant = *constants->Get(i);
    const uint64_t alignment = std::max<uint64_t>(constant.alignment(), base_alignment);
    total = (total + alignment - 1) & ~(alignment - 1);
    offsets[i] = total;
    total += ctx.file.range_bytes(*constant.data()).size();
  }
  static constexpr ApiCall api("axrt_executable_load");
  BufferParams params;
  params.alignment = base_alignment;
  params.label = fmt::format("constants of {}", ctx.name);
  Ref<Buffer> buffer;
  AXRT_RETURN_IF_ERROR(ctx.prefix(buffer_allocate(api, ctx.device, std::max<uint64_t>(total, 1),
                                              std::move(params), &buffer)));
  Stream* raw_stream = nullptr;
  AXRT_RETURN_IF_ERROR(ctx.prefix(ctx.device->vtable->create_stream(ctx.device, &raw_stream)));
  auto stream = Ref<Stream>::adopt(raw_stream);
  stream->device = Ref<Device>(ctx.device);
  stream->label = fmt::format("upload of {}", ctx.name);
  for (uint32_t i = 0; i < count; ++i) {
    const axe::Constant& constant = *constants->Get(i);
    const auto data = ctx.file.range_bytes(*constant.data());
    exe->constants[i].buffer =
        buffer_create_view(buffer.get(), offsets[i], data.size(), str(constant.name()));
    if (data.empty()) continue;
    CopyCommand copy;
    copy.src.host = const_cast<std::byte*>(reinterpret_cast<const std::byte*>(data.data()));
    copy.dst.buffer = buffer.get();
    copy.dst.offset = offsets[i];
    copy.width = data.size();
    copy.height = 1;
    AXRT_RETURN_IF_ERROR(ctx.prefix(stream->vtable->copy(stream.get(), copy)));
  }
  return ctx.prefix(stream->vtable->synchronize(stream.get()));
}

}  // namespace

axrt_status_t make_constants_resident(const LoadContext& ctx, Executable* exe) {
  const auto* constants = ctx.meta.constants();
  const uint32_t count = constants ? constants->size() : 0;
  exe->constants.resize(count);
  if (count == 0) return nullptr;
  if (!ctx.device_runs_host_code()) return upload_constants(ctx, exe);
  // The CPU device reads constants where the file is mapped: one external
  // buffer over the file, a view per constant. The buffer keeps the
  // storage alive.
  const auto bytes = ctx.file.file_bytes();
  using Keep = std::shared_ptr<const axe::Storage>;
  auto keep = std::make_unique<Keep>(ctx.file.storage());
  auto* base = const_cast<std::byte*>(reinterpret_cast<const std::byte*>(bytes.data()));
  std::string label = ctx.name;
  // From here the buffer owns `keep`, even when the call throws.
  Ref<Buffer> file_buffer = buffer_wrap_external(
      ctx.device, base, reinterpret_cast<uintptr_t>(base), bytes.size(),
      AXRT_MEMORY_TYPE_DEVICE_LOCAL, std::move(label),
      [](void* context) { delete static_cast<Keep*>(context); }, keep.release());
  for (uint32_t i = 0; i < count; ++i) {
    const axe::Constant& constant = *constants->Get(i);
    const auto data = ctx.file.range_bytes(*constant.data());
    exe->constants[i].buffer =
        buffer_create_view(file_buffer.get(), static_cast<uint64_t>(data.data() - bytes.data()),
                           data.size(), str(constant.name()));
  }
  return nullptr;
}

}  // namespace axrt
