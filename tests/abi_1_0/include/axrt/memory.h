/* axrt buffers: device-local and host-pinned memory, sub-views and host
 * mapping.
 *
 * A buffer is a byte range of one allocation. Allocations come from the
 * device's pooling allocator and return to it when the last buffer (or
 * sub-view, or queued operation) referring to them is released, or earlier,
 * in stream order, through axrt_stream_deallocate_buffer(). Every buffer
 * start is aligned to the device's `buffer_alignment` (at least 256 bytes)
 * or to the larger alignment asked for. */
#ifndef AXRT_MEMORY_H_
#define AXRT_MEMORY_H_

#include "axrt/base.h"
#include "axrt/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axrt_buffer_s* axrt_buffer_t;

typedef uint32_t axrt_memory_type_t;
enum {
  /* Memory local to the device; host-visible only where the device sets
   * AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY (the CPU device does). */
  AXRT_MEMORY_TYPE_DEVICE_LOCAL = 1,
  /* Page-locked host memory the device can reach directly: the fast path
   * for host<->device copies. Always host-visible. */
  AXRT_MEMORY_TYPE_HOST_PINNED = 2,
};

typedef struct axrt_buffer_options_t {
  size_t struct_size;
  const void* next; /* may carry an axrt_debug_label_t */
  axrt_memory_type_t memory_type; /* default AXRT_MEMORY_TYPE_DEVICE_LOCAL */
  /* A power of two; 0 means the device's `buffer_alignment`. At most the
   * device's `max_buffer_alignment`. */
  uint64_t alignment;
} axrt_buffer_options_t;

#define AXRT_BUFFER_OPTIONS_INIT \
  { sizeof(axrt_buffer_options_t), NULL, AXRT_MEMORY_TYPE_DEVICE_LOCAL, 0 }

/* Allocates `size` bytes (at least 1) on `device` from its pool, usable at
 * once by every stream. `options` may be NULL for defaults. Contents are
 * undefined. RESOURCE_EXHAUSTED when the memory is not there. The caller
 * owns `*out_buffer`. */
AXRT_API axrt_status_t axrt_buffer_allocate(axrt_device_t device,
                                            uint64_t size,
                                            const axrt_buffer_options_t* options,
                                            axrt_buffer_t* out_buffer);

/* Creates a view of `length` bytes of `buffer` starting at `offset`. The view
 * retains `buffer`'s allocation. OUT_OF_RANGE when the range does not fit.
 * The caller owns `*out_view`. */
AXRT_API axrt_status_t axrt_buffer_create_view(axrt_buffer_t buffer,
                                               uint64_t offset, uint64_t length,
                                               axrt_buffer_t* out_view);

/* Adds a reference to `buffer`. NULL is a no-op. */
AXRT_API void axrt_buffer_retain(axrt_buffer_t buffer);

/* Drops a reference to `buffer`. NULL is a no-op. Operations already queued
 * on streams hold their own references, so releasing right after enqueueing
 * is safe. */
AXRT_API void axrt_buffer_release(axrt_buffer_t buffer);

typedef struct axrt_buffer_info_t {
  size_t struct_size;
  const void* next;
  uint64_t size;                  /* bytes in this buffer or view */
  uint64_t offset;                /* of this view within its allocation */
  uint64_t allocation_size;       /* bytes of the whole allocation */
  uint64_t alignment;             /* the start of this buffer is aligned to
                                     at least this power of two */
  uint64_t device_address;        /* as kernels see it (kernel ABI) */
  axrt_memory_type_t memory_type;
  bool host_visible;              /* axrt_buffer_map() succeeds */
  bool deallocated;               /* passed to axrt_stream_deallocate_buffer */
} axrt_buffer_info_t;

#define AXRT_BUFFER_INFO_INIT \
  { sizeof(axrt_buffer_info_t), NULL, 0, 0, 0, 0, 0, 0, false, false }

/* Fills `*out_info` (whose struct_size the caller sets). */
AXRT_API axrt_status_t axrt_buffer_query_info(axrt_buffer_t buffer,
                                              axrt_buffer_info_t* out_info);

/* Writes a new reference to the device `buffer` belongs to. */
AXRT_API axrt_status_t axrt_buffer_get_device(axrt_buffer_t buffer,
                                              axrt_device_t* out_device);

/* Writes the host address of the first byte of `buffer`, valid while the
 * buffer is alive. FAILED_PRECONDITION when the memory is not host-visible
 * or the buffer was deallocated. The caller orders host accesses against
 * queued device work (for example with axrt_stream_synchronize()). */
AXRT_API axrt_status_t axrt_buffer_map(axrt_buffer_t buffer,
                                       void** out_host_pointer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_MEMORY_H_ */
