#include "runtime/drivers/cuda/cuda_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "runtime/drivers/cuda/cuda_nvtx.h"

namespace axrt::cuda {
namespace {

constexpr uint64_t kStagingChunk = 4 * 1024 * 1024;
constexpr size_t kStagingChunks = 3;

struct Endpoint {
  CUdeviceptr address = 0;  // valid when `addressable`
  std::byte* host = nullptr;
  uint64_t pitch = 0;
  bool addressable = false;  // device memory, or host memory CUDA can reach
  // The CUDA device whose device-local memory this is; null for host memory.
  CudaDevice* owner = nullptr;
};

Endpoint resolve(CudaDevice* d, const CopyEndpoint& e, uint64_t width) {
  Endpoint out;
  out.pitch = e.pitch ? e.pitch : width;
  if (e.buffer && !e.host) {
    out.address = e.buffer->device_address(e.offset);
    out.addressable = true;
    if (e.buffer->allocation()->memory_type != AXRT_MEMORY_TYPE_HOST_PINNED &&
        e.buffer->device->vtable == d->vtable) {
      out.owner = static_cast<CudaDevice*>(e.buffer->device.get());
    }
    return out;
  }
  out.host = e.host;
  CUmemorytype type = 0;
  // Pageable memory is unknown to CUDA: INVALID_VALUE, not an error here.
  if (d->cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<uintptr_t>(e.host)) == CUDA_SUCCESS &&
      type != 0) {
    out.address = reinterpret_cast<uintptr_t>(e.host);
    out.addressable = true;
  }
  return out;
}

axrt_status_t copy_direct(CudaStream* s, const Endpoint& src, const Endpoint& dst, uint64_t width,
                          uint64_t height) {
  CudaDevice* d = s->cuda_device();
  const bool contiguous = height == 1 || (src.pitch == width && dst.pitch == width);
  // Between the memory of two devices: CUDA copies peer to peer where
  // access was enabled (CudaDevice::prepare_peer_access), else through host
  // memory itself. Unified addressing makes the plain copies below legal
  // too, for the strided case and for drivers without cuMemcpyPeerAsync.
  if (contiguous && src.owner && dst.owner && src.owner != dst.owner && d->cu.cuMemcpyPeerAsync) {
    return d->check(d->cu.cuMemcpyPeerAsync(dst.address, dst.owner->context, src.address,
                                            src.owner->context, width * height, s->stream),
                    "cuMemcpyPeerAsync");
  }
  if (contiguous) {
    return d->check(d->cu.cuMemcpyAsync(dst.address, src.address, width * height, s->stream),
                    "cuMemcpyAsync");
  }
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  copy.srcDevice = src.address;
  copy.srcPitch = src.pitch;
  copy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  copy.dstDevice = dst.address;
  copy.dstPitch = dst.pitch;
  copy.WidthInBytes = width;
  copy.Height = height;
  return d->check(d->cu.cuMemcpy2DAsync(&copy, s->stream), "cuMemcpy2DAsync");
}

axrt_status_t ensure_staging(CudaStream* s) {
  if (!s->staging.empty()) return nullptr;
  CudaDevice* d = s->cuda_device();
  AXRT_RETURN_IF_ERROR(
      d->check(d->cu.cuStreamCreate(&s->staging_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  nvtx::name_stream(s->staging_stream, fmt::format("{}: staging", s->describe()).c_str());
  for (size_t i = 0; i < kStagingChunks; ++i) {
    CudaStream::StagingChunk chunk;
    uint64_t block = 0;
    chunk.host = static_cast<std::byte*>(d->pinned_pool->allocate(kStagingChunk, 4096, &block));
    chunk.size = block;
    if (!chunk.host) {
      return make_status(AXRT_STATUS_CODE_RESOURCE_EXHAUSTED,
                         "cannot pin {} bytes of staging memory for copies on {}", kStagingChunk,
                         s->describe());
    }
    const CUresult created = d->cu.cuEventCreate(&chunk.free, CU_EVENT_DISABLE_TIMING);
    if (created != CUDA_SUCCESS) {
      d->pinned_pool->deallocate(chunk.host, chunk.size, 4096);
      return d->check(created, "cuEventCreate");
    }
    s->staging.push_back(chunk);
  }
  return nullptr;
}

// One piece of a staged copy: `rows` rows of `width` bytes between pageable
// memory (row pitch `host_pitch`) and a chunk, and between the chunk and
// `device` (row pitch `device_pitch`).
struct Piece {
  std::byte* host;
  uint64_t host_pitch;
  CUdeviceptr device;
  uint64_t device_pitch;
  uint64_t width;
  uint64_t rows;
};

axrt_status_t chunk_dma(CudaStream* s, const Piece& p, const CudaStream::StagingChunk& chunk,
                        bool to_device) {
  Endpoint staged{reinterpret_cast<uintptr_t>(chunk.host), nullptr, p.width, true};
  Endpoint device{p.device, nullptr, p.device_pitch, true};
  return to_device ? copy_direct(s, staged, device, p.width, p.rows)
                   : copy_direct(s, device, staged, p.width, p.rows);
}

void gather(std::byte* dst, const std::byte* src, uint64_t src_pitch, uint64_t width,
            uint64_t rows) {
  for (uint64_t r = 0; r < rows; ++r) std::memcpy(dst + r * width, src + r * src_pitch, width);
}

void scatter(std::byte* dst, uint64_t dst_pitch, const std::byte* src, uint64_t width,
             uint64_t rows) {
  for (uint64_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_pitch, src + r * width, width);
}

// Splits a width x height copy into pieces of at most one chunk.
std::vector<Piece> split(std::byte* host, uint64_t host_pitch, CUdeviceptr device,
                         uint64_t device_pitch, uint64_t width, uint64_t height) {
  std::vector<Piece> pieces;
  if (width <= kStagingChunk) {
    const uint64_t rows_per = std::max<uint64_t>(1, kStagingChunk / width);
    for (uint64_t row = 0; row < height; row += rows_per) {
      const uint64_t rows = std::min(rows_per, height - row);
      pieces.push_back(
          {host + row * host_pitch, width, device + row * device_pitch, width, width, rows});
      pieces.back().host_pitch = host_pitch;
      pieces.back().device_pitch = device_pitch;
    }
    return pieces;
  }
  for (uint64_t row = 0; row < height; ++row) {
    for (uint64_t x = 0; x < width; x += kStagingChunk) {
      const uint64_t w = std::min(kStagingChunk, width - x);
      pieces.push_back({host + row * host_pitch + x, w, device + row * device_pitch + x, w, w, 1});
    }
  }
  return pieces;
}

// Copies between pageable host memory and memory CUDA reaches, in stream
// order, through the stream's pinned chunks: the staging stream runs the
// host-side copies, the stream itself the DMA, so that the two overlap.
axrt_status_t copy_staged(CudaStream* s, std::byte* host, uint64_t host_pitch, CUdeviceptr device,
                          uint64_t device_pitch, uint64_t width, uint64_t height, bool to_device) {
  AXRT_RETURN_IF_ERROR(ensure_staging(s));
  CudaDevice* d = s->cuda_device();
  const CudaApi& cu = d->cu;
  CUevent order = nullptr;
  AXRT_RETURN_IF_ERROR(d->acquire_fence(&order));
  struct FenceBack {
    CudaDevice* d;
    CUevent e;
    ~FenceBack() { d->recycle_fence(e); }
  } fence_back{d, order};
  // The host side starts after the work queued before the copy.
  AXRT_RETURN_IF_ERROR(d->check(cu.cuEventRecord(order, s->stream), "cuEventRecord"));
  AXRT_RETURN_IF_ERROR(
      d->check(cu.cuStreamWaitEvent(s->staging_stream, order, 0), "cuStreamWaitEvent"));
  const std::vector<Piece> pieces = split(host, host_pitch, device, device_pitch, width, height);
  std::vector<CUevent> ready(s->staging.size(), nullptr);
  struct ReadyBack {
    CudaDevice* d;
    std::vector<CUevent>* events;
    ~ReadyBack() {
      for (CUevent e : *events) {
        if (e) d->recycle_fence(e);
      }
    }
  } ready_back{d, &ready};
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece p = pieces[i];
    CudaStream::StagingChunk& chunk = s->staging[i % s->staging.size()];
    CUevent& chunk_ready = ready[i % s->staging.size()];
    if (!chunk_ready) AXRT_RETURN_IF_ERROR(d->acquire_fence(&chunk_ready));
    std::byte* const staged = chunk.host;
    if (to_device) {
      // Staging stream: wait until the chunk's last DMA finished, fill it.
      if (chunk.used) {
        AXRT_RETURN_IF_ERROR(d->check(cu.cuStreamWaitEvent(s->staging_stream, chunk.free, 0),
                                      "cuStreamWaitEvent"));
      }
      AXRT_RETURN_IF_ERROR(enqueue_staging_call(s, [p, staged](axrt_status_t) {
        gather(staged, p.host, p.host_pitch, p.width, p.rows);
        return axrt_status_t{nullptr};
      }));
      AXRT_RETURN_IF_ERROR(
          d->check(cu.cuEventRecord(chunk_ready, s->staging_stream), "cuEventRecord"));
      // Stream: wait for the chunk, move it to the device.
      AXRT_RETURN_IF_ERROR(
          d->check(cu.cuStreamWaitEvent(s->stream, chunk_ready, 0), "cuStreamWaitEvent"));
      AXRT_RETURN_IF_ERROR(chunk_dma(s, p, chunk, true));
      AXRT_RETURN_IF_ERROR(d->check(cu.cuEventRecord(chunk.free, s->stream), "cuEventRecord"));
    } else {
      // Stream: wait until the chunk was emptied, move device data into it.
      if (chunk.used) {
        AXRT_RETURN_IF_ERROR(
            d->check(cu.cuStreamWaitEvent(s->stream, chunk.free, 0), "cuStreamWaitEvent"));
      }
      AXRT_RETURN_IF_ERROR(chunk_dma(s, p, chunk, false));
      AXRT_RETURN_IF_ERROR(d->check(cu.cuEventRecord(chunk_ready, s->stream), "cuEventRecord"));
      // Staging stream: empty the chunk into the user's memory.
      AXRT_RETURN_IF_ERROR(d->check(cu.cuStreamWaitEvent(s->staging_stream, chunk_ready, 0),
                                    "cuStreamWaitEvent"));
      AXRT_RETURN_IF_ERROR(enqueue_staging_call(s, [p, staged](axrt_status_t) {
        scatter(p.host, p.host_pitch, staged, p.width, p.rows);
        return axrt_status_t{nullptr};
      }));
      AXRT_RETURN_IF_ERROR(
          d->check(cu.cuEventRecord(chunk.free, s->staging_stream), "cuEventRecord"));
    }
    chunk.used = true;
  }
  if (!to_device) {
    // Later work on the stream sees the data in host memory.
    AXRT_RETURN_IF_ERROR(d->check(cu.cuEventRecord(order, s->staging_stream), "cuEventRecord"));
    AXRT_RETURN_IF_ERROR(d->check(cu.cuStreamWaitEvent(s->stream, order, 0), "cuStreamWaitEvent"));
  }
  // The `ready` events may be reused at once: waits already captured them.
  return nullptr;
}

}  // namespace

axrt_status_t run_copy(CudaStream* s, const CopyCommand& copy) {
  CudaDevice* d = s->cuda_device();
  if (copy.width == 0 || copy.height == 0) return nullptr;
  const Endpoint src = resolve(d, copy.src, copy.width);
  const Endpoint dst = resolve(d, copy.dst, copy.width);
  if (src.addressable && dst.addressable) return copy_direct(s, src, dst, copy.width, copy.height);
  // One side is a buffer (the core allows no host-to-host copy), and
  // buffers are always addressable: the other side is pageable memory.
  if (dst.addressable) {
    return copy_staged(s, src.host, src.pitch, dst.address, dst.pitch, copy.width, copy.height,
                       true);
  }
  return copy_staged(s, dst.host, dst.pitch, src.address, src.pitch, copy.width, copy.height,
                     false);
}

axrt_status_t run_fill(CudaStream* s, Buffer* buffer, uint64_t offset, uint64_t length,
                       uint64_t pattern, uint32_t pattern_size) {
  CudaDevice* d = s->cuda_device();
  const CudaApi& cu = d->cu;
  if (length == 0) return nullptr;
  const CUdeviceptr address = buffer->device_address(offset);
  switch (pattern_size) {
    case 1:
      return d->check(cu.cuMemsetD8Async(address, static_cast<unsigned char>(pattern), length,
                                         s->stream),
                      "cuMemsetD8Async");
    case 2:
      return d->check(cu.cuMemsetD16Async(address, static_cast<unsigned short>(pattern),
                                          length / 2, s->stream),
                      "cuMemsetD16Async");
    case 4:
      return d->check(cu.cuMemsetD32Async(address, static_cast<unsigned int>(pattern), length / 4,
                                          s->stream),
                      "cuMemsetD32Async");
    default: {
      // An 8-byte pattern: its two halves as 4-byte columns of an 8-byte
      // pitched 2-D fill.
      const auto low = static_cast<unsigned int>(pattern);
      const auto high = static_cast<unsigned int>(pattern >> 32);
      if (low == high) {
        return d->check(cu.cuMemsetD32Async(address, low, length / 4, s->stream),
                        "cuMemsetD32Async");
      }
      AXRT_RETURN_IF_ERROR(
          d->check(cu.cuMemsetD2D32Async(address, 8, low, 1, length / 8, s->stream),
                   "cuMemsetD2D32Async"));
      return d->check(cu.cuMemsetD2D32Async(address + 4, 8, high, 1, length / 8, s->stream),
                      "cuMemsetD2D32Async");
    }
  }
}

}  // namespace axrt::cuda
