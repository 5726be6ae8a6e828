/* axrt instances, drivers and devices.
 *
 * An instance owns the driver registry: the drivers built into the library
 * (the CPU driver always; others behind build options) are asked for their
 * devices when the instance is created. Devices are named "<driver>:<n>",
 * such as "cpu:0" or "cuda:1". Each device has a pooling allocator whose
 * statistics and trimming are reached through the device. */
#ifndef AXRT_DEVICE_H_
#define AXRT_DEVICE_H_

#include "axrt/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axrt_instance_s* axrt_instance_t;
typedef struct axrt_device_s* axrt_device_t;

/* ---------------------------------------------------------------------- */
/* Instance                                                                */
/* ---------------------------------------------------------------------- */

typedef struct axrt_instance_options_t {
  size_t struct_size;
  const void* next;
  /* Comma-separated driver names to enable, such as "cpu" or "cpu,cuda";
   * NULL or "" enables every built-in driver except those that take part
   * only when named (the "null" driver, a skeleton for driver authors,
   * built with the tests). Naming a driver that is not built in fails with
   * NOT_FOUND. */
  const char* drivers;
} axrt_instance_options_t;

#define AXRT_INSTANCE_OPTIONS_INIT { sizeof(axrt_instance_options_t), NULL, NULL }

/* Creates an instance and enumerates the devices of its drivers. `options`
 * may be NULL for defaults. A driver that finds no hardware (for example no
 * CUDA driver installed) contributes zero devices and is not an error; its
 * reason is reported by axrt_instance_query_driver_info(). The caller owns
 * `*out_instance`. */
AXRT_API axrt_status_t axrt_instance_create(
    const axrt_instance_options_t* options, axrt_instance_t* out_instance);

/* Adds a reference to `instance`. NULL is a no-op. */
AXRT_API void axrt_instance_retain(axrt_instance_t instance);

/* Drops a reference to `instance`. NULL is a no-op. Devices, buffers,
 * streams and events keep their instance alive. */
AXRT_API void axrt_instance_release(axrt_instance_t instance);

/* Writes the number of drivers enabled in `instance`. */
AXRT_API axrt_status_t axrt_instance_driver_count(axrt_instance_t instance,
                                                  size_t* out_count);

typedef struct axrt_driver_info_t {
  size_t struct_size;
  const void* next;
  char name[32];             /* "cpu", "cuda" */
  uint32_t device_count;     /* devices this driver contributed */
  /* Why the driver has no devices ("libcuda.so.1 not found: ..."), or ""
   * when it has some. */
  char availability[256];
} axrt_driver_info_t;

#define AXRT_DRIVER_INFO_INIT { sizeof(axrt_driver_info_t), NULL, {0}, 0, {0} }

/* Fills `*out_info` (whose struct_size the caller sets) for the driver at
 * `index`. OUT_OF_RANGE when `index` >= the driver count. */
AXRT_API axrt_status_t axrt_instance_query_driver_info(
    axrt_instance_t instance, size_t index, axrt_driver_info_t* out_info);

/* Writes the number of devices across all drivers of `instance`. */
AXRT_API axrt_status_t axrt_instance_device_count(axrt_instance_t instance,
                                                  size_t* out_count);

/* Writes a new reference to the device at `index` (devices are ordered by
 * driver, then ordinal). The caller releases it. */
AXRT_API axrt_status_t axrt_instance_get_device(axrt_instance_t instance,
                                                size_t index,
                                                axrt_device_t* out_device);

/* Writes a new reference to the device named `name` ("cpu:0"). A NULL or
 * empty `name` selects the default device: the one named by the environment
 * variable AXRT_DEVICE when set, otherwise "cpu:0". NOT_FOUND names the
 * devices that exist. The caller releases the result. */
AXRT_API axrt_status_t axrt_instance_find_device(axrt_instance_t instance,
                                                 const char* name,
                                                 axrt_device_t* out_device);

/* ---------------------------------------------------------------------- */
/* Device                                                                  */
/* ---------------------------------------------------------------------- */

/* Adds a reference to `device`. NULL is a no-op. */
AXRT_API void axrt_device_retain(axrt_device_t device);

/* Drops a reference to `device`. NULL is a no-op. */
AXRT_API void axrt_device_release(axrt_device_t device);

typedef uint32_t axrt_device_type_t;
enum {
  AXRT_DEVICE_TYPE_UNKNOWN = 0,
  AXRT_DEVICE_TYPE_CPU = 1,
  AXRT_DEVICE_TYPE_CUDA = 2,
};

/* Capability bits of axrt_device_properties_t.flags. */
typedef uint32_t axrt_device_flags_t;
enum {
  /* Device-local buffers can be mapped into the host address space. */
  AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY = 1u << 0,
  /* Events created with timing report elapsed time. */
  AXRT_DEVICE_FLAG_EVENT_TIMING = 1u << 1,
  /* Device memory is allocated from a stream-ordered pool. */
  AXRT_DEVICE_FLAG_STREAM_ORDERED_ALLOCATION = 1u << 2,
};

typedef struct axrt_device_properties_t {
  size_t struct_size;
  const void* next;
  char id[32];                  /* "cpu:0" */
  char driver[32];              /* "cpu" */
  char name[128];               /* marketing or CPU model name */
  axrt_device_type_t type;
  uint32_t ordinal;             /* index within its driver */
  axrt_device_flags_t flags;
  uint32_t compute_units;       /* CPU threads for dispatch, CUDA SMs */
  int32_t compute_capability_major; /* CUDA only; 0 elsewhere */
  int32_t compute_capability_minor;
  uint64_t total_memory;        /* bytes */
  uint64_t buffer_alignment;    /* every buffer start is aligned to this */
  uint64_t max_buffer_alignment;/* the largest alignment a buffer may ask */
  uint32_t max_workgroup_size[3];
  uint32_t max_workgroup_invocations;
  uint32_t max_workgroup_count[3];
  uint32_t max_shared_memory_per_workgroup; /* bytes */
  /* A later field (a struct_size that stops before it leaves it
   * unwritten): the NUMA node the device is attached to (CUDA: of its PCI bus; CPU
   * devices: the node of the host memory they allocate from), or -1 when
   * the system does not say. */
  int32_t numa_node;
} axrt_device_properties_t;

#define AXRT_DEVICE_PROPERTIES_INIT                                          \
  { sizeof(axrt_device_properties_t), NULL, {0}, {0}, {0}, 0, 0, 0, 0, 0, 0, \
    0, 0, 0, {0, 0, 0}, 0, {0, 0, 0}, 0, -1 }

/* Fills `*out_properties` (whose struct_size the caller sets). */
AXRT_API axrt_status_t axrt_device_query_properties(
    axrt_device_t device, axrt_device_properties_t* out_properties);

/* ---------------------------------------------------------------------- */
/* Topology: how two devices reach each other's memory                     */
/* ---------------------------------------------------------------------- */

/* The path between two devices (axrt_device_peer_info_t.link). */
typedef uint32_t axrt_device_link_t;
enum {
  /* No direct path: copies between the two are staged through host memory. */
  AXRT_DEVICE_LINK_NONE = 0,
  /* The same device. */
  AXRT_DEVICE_LINK_SELF = 1,
  /* Both devices' memory is host memory (CPU devices): any of them reads and
   * writes the other's directly. */
  AXRT_DEVICE_LINK_HOST_MEMORY = 2,
  /* Peer-to-peer over PCIe. */
  AXRT_DEVICE_LINK_PCIE = 3,
  /* Peer-to-peer over NVLink. */
  AXRT_DEVICE_LINK_NVLINK = 4,
};

typedef struct axrt_device_peer_info_t {
  size_t struct_size;
  const void* next;
  /* `device` can read and write `peer`'s memory directly (its copies need
   * no staging). */
  bool direct_access;
  /* Atomic operations of `device` on `peer`'s memory are native. */
  bool native_atomics;
  axrt_device_link_t link;
  /* NVLink: the links between the two devices; 0 for other paths. */
  uint32_t link_count;
  /* The driver's relative rank of the path among this device's peers
   * (CUDA's P2P performance rank; lower is faster); 0 when not ranked. */
  int32_t performance_rank;
} axrt_device_peer_info_t;

#define AXRT_DEVICE_PEER_INFO_INIT \
  { sizeof(axrt_device_peer_info_t), NULL, false, false, 0, 0, 0 }

/* Fills `*out_info` (whose struct_size the caller sets) with how `device`
 * reaches the memory of `peer`, a device of the same instance (another
 * instance's device is INVALID_ARGUMENT), or `device` itself:
 * AXRT_DEVICE_LINK_SELF. Devices of different drivers reach each other
 * through host memory: AXRT_DEVICE_LINK_HOST_MEMORY with direct access only
 * when both devices' memory is host memory (both have
 * AXRT_DEVICE_FLAG_HOST_VISIBLE_MEMORY), else AXRT_DEVICE_LINK_NONE.
 * docs/multi-device.md says what each driver reports and from where.
 * `axrt devices --topology` prints the matrix. Borrows both devices;
 * thread-safe. */
AXRT_API axrt_status_t axrt_device_query_peer(axrt_device_t device,
                                              axrt_device_t peer,
                                              axrt_device_peer_info_t* out_info);

/* The name of `link` ("nvlink", "pcie", "host-memory", "self", "none"), or
 * "unknown": a static string. Thread-safe. */
AXRT_API const char* axrt_device_link_name(axrt_device_link_t link);

/* Blocks until all work on every stream of `device` has completed. Returns
 * OK even if a stream failed: stream failures are reported by that stream. */
AXRT_API axrt_status_t axrt_device_synchronize(axrt_device_t device);

/* ---------------------------------------------------------------------- */
/* The device's pooling allocator                                          */
/* ---------------------------------------------------------------------- */

typedef struct axrt_pool_statistics_t {
  size_t struct_size;
  const void* next;
  uint64_t bytes_in_use;        /* handed out and not yet returned */
  uint64_t bytes_reserved;      /* held from the system: in use + cached */
  uint64_t peak_bytes_in_use;
  uint64_t allocation_count;    /* allocations served since creation */
  uint64_t reuse_count;         /* of those, served from cached blocks */
  uint64_t deallocation_count;
  uint64_t trim_count;          /* blocks handed back to the system */
} axrt_pool_statistics_t;

#define AXRT_POOL_STATISTICS_INIT \
  { sizeof(axrt_pool_statistics_t), NULL, 0, 0, 0, 0, 0, 0, 0 }

/* Fills `*out_statistics` for the device-local pool of `device`. */
AXRT_API axrt_status_t axrt_device_query_pool_statistics(
    axrt_device_t device, axrt_pool_statistics_t* out_statistics);

/* Counters of the work queued on a device's streams since the device was
 * enumerated: what axrt.stats() reports. Counted when the work is queued
 * (an API call returned OK), except `stream_failures`, counted when a stream
 * first fails. */
typedef struct axrt_stream_statistics_t {
  size_t struct_size;
  const void* next;
  uint64_t streams_created;
  uint64_t copies;           /* axrt_stream_copy_* */
  uint64_t copy_bytes;
  uint64_t fills;
  uint64_t fill_bytes;
  uint64_t host_functions;
  uint64_t event_records;
  uint64_t event_waits;
  uint64_t deallocations;    /* axrt_stream_deallocate_buffer */
  uint64_t function_calls;   /* axrt_function_invoke */
  uint64_t dispatches;       /* kernel dispatches of those calls */
  uint64_t stream_failures;
} axrt_stream_statistics_t;

#define AXRT_STREAM_STATISTICS_INIT \
  { sizeof(axrt_stream_statistics_t), NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Fills `*out_statistics` for the streams of `device`: counts since the
 * device was created. Thread-safe; each field is read on its own, so the
 * fields are not one snapshot while other threads queue work. */
AXRT_API axrt_status_t axrt_device_query_stream_statistics(
    axrt_device_t device, axrt_stream_statistics_t* out_statistics);

/* Hands cached, unused blocks of the pool back to the system until at most
 * `keep_bytes` stay cached. Memory in use is never touched. */
AXRT_API axrt_status_t axrt_device_trim_pool(axrt_device_t device,
                                             uint64_t keep_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_DEVICE_H_ */
