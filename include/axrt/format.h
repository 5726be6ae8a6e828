/* axrt format: building .axe executables.
 *
 * An .axe file carries compiled kernels, weights with explicit quantization
 * layouts and the functions that run them (docs/format.md is the full
 * specification). A compiler in any language makes one with an
 * axrt_axe_builder_t: add code objects, kernels (with their variants for
 * other devices), constants, functions and their commands, then write the
 * result to a file or to memory.
 *
 * The builder copies everything it is given: strings, arrays, layouts and
 * payload bytes are borrowed for the call only. Objects are numbered in the
 * order they are added, from 0 per kind, and every index in a description
 * (a kernel's code object, a dispatch's kernel, a binding's constant, a
 * layout's scale constant) must name an object added earlier, so files are
 * built in dependency order and never hold cycles. Names of kernels,
 * constants and functions are unique within the file.
 *
 * The one exception to copying: a constant added with
 * axrt_axe_builder_add_constant_from_source() gives its bytes through a
 * callback, which the builder calls only while it writes the file, so that
 * converting a checkpoint of many gigabytes never needs memory for it.
 *
 * Every write runs the complete verification of the reader (with segment
 * checksums) over the bytes it produced, so the builder never emits a file
 * that axrt refuses; when it does refuse, the write fails with the reader's
 * message. Output is deterministic: the same calls in the same order give
 * identical bytes (given the same bytes from the callbacks).
 *
 * Layout of the output: each code object gets its own code segment; all
 * constants share one constant segment, in the order added, each starting
 * at a multiple of its alignment; pre-packed copies share one pre-packed
 * segment the same way. Segments start on 4096-byte boundaries.
 *
 * Thread safety: unlike most of axrt, a builder is used from one thread at a
 * time (retain and release excepted); distinct builders are independent.
 *
 * Arrays of structs that start with `struct_size` (parameters, symbols,
 * signatures, bindings) are read with the stride of their first element's
 * struct_size, which every element must share; an array from an older or a
 * newer header is therefore read correctly. Small value structs without
 * `struct_size` (axrt_axe_dim_t, axrt_axe_expr_op_t, and the parts of
 * axrt_axe_quant_layout_t) mirror fixed parts of the format and never grow. */
#ifndef AXRT_FORMAT_H_
#define AXRT_FORMAT_H_

#include "axrt/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* Enumerations (the numbers are those of format/axe.fbs)                  */
/* ---------------------------------------------------------------------- */

typedef uint32_t axrt_axe_dtype_t;
enum {
  AXRT_AXE_DTYPE_INVALID = 0,
  AXRT_AXE_DTYPE_BOOL = 1,
  AXRT_AXE_DTYPE_INT8 = 2,
  AXRT_AXE_DTYPE_UINT8 = 3,
  AXRT_AXE_DTYPE_INT16 = 4,
  AXRT_AXE_DTYPE_UINT16 = 5,
  AXRT_AXE_DTYPE_INT32 = 6,
  AXRT_AXE_DTYPE_UINT32 = 7,
  AXRT_AXE_DTYPE_INT64 = 8,
  AXRT_AXE_DTYPE_UINT64 = 9,
  AXRT_AXE_DTYPE_FLOAT16 = 10,
  AXRT_AXE_DTYPE_BFLOAT16 = 11,
  AXRT_AXE_DTYPE_FLOAT32 = 12,
  AXRT_AXE_DTYPE_FLOAT64 = 13,
  AXRT_AXE_DTYPE_INT4 = 14,
  AXRT_AXE_DTYPE_UINT4 = 15,
  AXRT_AXE_DTYPE_INT2 = 16,
  AXRT_AXE_DTYPE_UINT2 = 17,
  AXRT_AXE_DTYPE_FLOAT8_E4M3FN = 18,
  AXRT_AXE_DTYPE_FLOAT8_E5M2 = 19,
  AXRT_AXE_DTYPE_FLOAT8_E4M3FNUZ = 20,
  AXRT_AXE_DTYPE_FLOAT8_E5M2FNUZ = 21,
  AXRT_AXE_DTYPE_FLOAT4_E2M1 = 22,
  /* Exponent-only unsigned scale of the MX formats: 2^(bits - 127). */
  AXRT_AXE_DTYPE_FLOAT8_E8M0FNU = 23,
};

typedef uint32_t axrt_axe_code_object_kind_t;
enum {
  AXRT_AXE_CODE_OBJECT_KIND_INVALID = 0,
  AXRT_AXE_CODE_OBJECT_KIND_CUDA_CUBIN = 1,
  AXRT_AXE_CODE_OBJECT_KIND_CUDA_FATBIN = 2,
  AXRT_AXE_CODE_OBJECT_KIND_CUDA_PTX = 3,
  AXRT_AXE_CODE_OBJECT_KIND_HOST_SHARED_OBJECT = 4,
  /* A kernel library the runtime already has, named rather than carried. */
  AXRT_AXE_CODE_OBJECT_KIND_KERNEL_LIBRARY = 5,
};

typedef uint32_t axrt_axe_param_kind_t;
enum {
  AXRT_AXE_PARAM_KIND_INVALID = 0,
  AXRT_AXE_PARAM_KIND_BUFFER = 1, /* a 64-bit device address */
  AXRT_AXE_PARAM_KIND_SCALAR = 2, /* a value of `scalar_type` */
};

typedef uint32_t axrt_axe_access_t;
enum {
  AXRT_AXE_ACCESS_NONE = 0,
  AXRT_AXE_ACCESS_READ = 1,
  AXRT_AXE_ACCESS_WRITE = 2,
  AXRT_AXE_ACCESS_READ_WRITE = 3,
};

typedef uint32_t axrt_axe_zero_point_kind_t;
enum {
  AXRT_AXE_ZERO_POINT_KIND_NONE = 0,
  AXRT_AXE_ZERO_POINT_KIND_INTEGER = 1, /* value = (q - zp) * scale */
  AXRT_AXE_ZERO_POINT_KIND_FLOAT = 2,   /* value = q * scale + m */
};

typedef uint32_t axrt_axe_element_order_t;
enum {
  /* Element i of a word sits at bits [i*bits, (i+1)*bits). */
  AXRT_AXE_ELEMENT_ORDER_SEQUENTIAL = 0,
  /* AWQ's int4 order in a 32-bit word: elements 0,2,4,6,1,3,5,7. */
  AXRT_AXE_ELEMENT_ORDER_AWQ = 1,
};

typedef uint32_t axrt_axe_sign_encoding_t;
enum {
  AXRT_AXE_SIGN_ENCODING_TWOS_COMPLEMENT = 0,
  /* Stored unsigned with an implicit bias of 2^(bits-1). */
  AXRT_AXE_SIGN_ENCODING_OFFSET_BINARY = 1,
};

typedef uint32_t axrt_axe_padding_rule_t;
enum {
  AXRT_AXE_PADDING_RULE_EXACT = 0, /* the packed axis fills whole words */
  AXRT_AXE_PADDING_RULE_ZERO = 1,  /* each row's last word is zero-padded */
};

typedef uint32_t axrt_axe_scale_layout_t;
enum {
  AXRT_AXE_SCALE_LAYOUT_GRID = 0,            /* the block grid, row-major */
  AXRT_AXE_SCALE_LAYOUT_GRID_TRANSPOSED = 1, /* last two dims swapped */
  AXRT_AXE_SCALE_LAYOUT_SWIZZLED_128X4 = 2,  /* NVIDIA's MX / NVFP4 tiles */
};

typedef uint32_t axrt_axe_expr_opcode_t;
enum {
  AXRT_AXE_EXPR_OPCODE_INVALID = 0,
  AXRT_AXE_EXPR_OPCODE_CONST = 1,  /* push `operand` */
  AXRT_AXE_EXPR_OPCODE_SYMBOL = 2, /* push the value of symbol `operand` */
  AXRT_AXE_EXPR_OPCODE_ADD = 3,
  AXRT_AXE_EXPR_OPCODE_SUB = 4,
  AXRT_AXE_EXPR_OPCODE_MUL = 5,
  AXRT_AXE_EXPR_OPCODE_DIV_FLOOR = 6,
  AXRT_AXE_EXPR_OPCODE_DIV_CEIL = 7,
  AXRT_AXE_EXPR_OPCODE_MOD = 8,
  AXRT_AXE_EXPR_OPCODE_MINIMUM = 9,
  AXRT_AXE_EXPR_OPCODE_MAXIMUM = 10,
};

typedef uint32_t axrt_axe_binding_kind_t;
enum {
  AXRT_AXE_BINDING_KIND_INVALID = 0,
  AXRT_AXE_BINDING_KIND_INPUT = 1,    /* the function's input `index` */
  AXRT_AXE_BINDING_KIND_OUTPUT = 2,   /* the function's output `index` */
  AXRT_AXE_BINDING_KIND_CONSTANT = 3, /* constant `index` */
  AXRT_AXE_BINDING_KIND_ARENA = 4,    /* arena bytes [offset, offset + size) */
  AXRT_AXE_BINDING_KIND_SCALAR = 5,   /* the value of `value` */
};

/* Format 1.4: collectives over a function's channels. */
typedef uint32_t axrt_axe_collective_kind_t;
enum {
  AXRT_AXE_COLLECTIVE_INVALID = 0,
  AXRT_AXE_COLLECTIVE_ALL_REDUCE = 1,
  AXRT_AXE_COLLECTIVE_ALL_GATHER = 2,
  AXRT_AXE_COLLECTIVE_REDUCE_SCATTER = 3,
  AXRT_AXE_COLLECTIVE_BROADCAST = 4,
};

typedef uint32_t axrt_axe_reduce_op_t;
enum {
  AXRT_AXE_REDUCE_SUM = 0,
  AXRT_AXE_REDUCE_MAX = 1,
  AXRT_AXE_REDUCE_MIN = 2,
};

/* ---------------------------------------------------------------------- */
/* The builder                                                             */
/* ---------------------------------------------------------------------- */

typedef struct axrt_axe_builder_s* axrt_axe_builder_t;

typedef struct axrt_axe_builder_options_t {
  size_t struct_size;
  const void* next;             /* no extensions are taken */
  const char* producer_name;    /* copied; NULL reads as "" */
  const char* producer_version; /* copied; NULL reads as "" */
} axrt_axe_builder_options_t;

#define AXRT_AXE_BUILDER_OPTIONS_INIT \
  { sizeof(axrt_axe_builder_options_t), NULL, NULL, NULL }

/* Creates an empty builder. `options` may be NULL (no producer named). The
 * caller owns `*out_builder`. */
AXRT_API axrt_status_t axrt_axe_builder_create(const axrt_axe_builder_options_t* options,
                                               axrt_axe_builder_t* out_builder);

/* Adds a reference to `builder`. NULL is a no-op. Thread-safe. */
AXRT_API void axrt_axe_builder_retain(axrt_axe_builder_t builder);

/* Drops a reference to `builder`, freeing it and every copied payload with
 * the last one. NULL is a no-op. Thread-safe. */
AXRT_API void axrt_axe_builder_release(axrt_axe_builder_t builder);

/* Declares that readers must understand `feature` (copied, non-empty) to run
 * the file; a reader that does not know it refuses the file. The builder's
 * own verification accepts the features declared here. The features of the
 * format that the file uses ("quantization.v1", "kernel-library.v1" ...;
 * docs/format.md, "Required features") need no call: the builder lists each
 * one the file uses when it writes it. ALREADY_EXISTS when `feature` was
 * added before. */
AXRT_API axrt_status_t axrt_axe_builder_add_required_feature(axrt_axe_builder_t builder,
                                                             const char* feature);

/* Adds a free-form entry; `key` (non-empty) and `value` are copied.
 * ALREADY_EXISTS when `key` was added before. */
AXRT_API axrt_status_t axrt_axe_builder_add_metadata(axrt_axe_builder_t builder,
                                                     const char* key, const char* value);

/* ---------------------------------------------------------------------- */
/* Code objects                                                            */
/* ---------------------------------------------------------------------- */

/* The target of host code (host shared objects, kernel-library references)
 * for the machine this header is compiled on, spelled as the runtime spells
 * it: what such a code object must name to run on that machine's CPU
 * device. Not defined on architectures axrt does not know. */
#if defined(__x86_64__) || defined(_M_X64)
#define AXRT_HOST_CODE_TARGET "x86_64"
#elif defined(__aarch64__) || defined(_M_ARM64)
#define AXRT_HOST_CODE_TARGET "aarch64"
#elif defined(__riscv) && __riscv_xlen == 64
#define AXRT_HOST_CODE_TARGET "riscv64"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define AXRT_HOST_CODE_TARGET "ppc64le"
#elif defined(__s390x__)
#define AXRT_HOST_CODE_TARGET "s390x"
#elif defined(__loongarch64)
#define AXRT_HOST_CODE_TARGET "loongarch64"
#endif

typedef struct axrt_axe_code_object_desc_t {
  size_t struct_size;
  const void* next;
  axrt_axe_code_object_kind_t kind;
  /* "sm_90" (cubin), "compute_90" (PTX), "sm_80,sm_90" (fatbin), "x86_64"
   * (host code, kernel libraries). Non-empty. */
  const char* target;
  /* The code object's bytes, copied into its own segment. Required for
   * every kind but KERNEL_LIBRARY, which carries none. */
  const void* data;
  size_t size;
  /* KERNEL_LIBRARY only: the library's name and the lowest version that
   * serves; NULL otherwise. */
  const char* library_name;
  uint32_t library_min_version;
} axrt_axe_code_object_desc_t;

#define AXRT_AXE_CODE_OBJECT_DESC_INIT                                                \
  { sizeof(axrt_axe_code_object_desc_t), NULL, AXRT_AXE_CODE_OBJECT_KIND_INVALID, NULL, \
    NULL, 0, NULL, 0 }

/* Adds a code object and writes its index to `*out_index`. The bytes are
 * judged (ELF or fatbin magic, PTX text, target) when the file is written. */
AXRT_API axrt_status_t axrt_axe_builder_add_code_object(
    axrt_axe_builder_t builder, const axrt_axe_code_object_desc_t* desc, uint32_t* out_index);

/* ---------------------------------------------------------------------- */
/* Quantization layouts                                                    */
/* ---------------------------------------------------------------------- */

/* How sub-word elements sit in container words. All zero means unpacked. */
typedef struct axrt_axe_packing_t {
  uint32_t bits;           /* bits per element: 2, 4, 8 ... */
  uint32_t container_bits; /* 8, 16, 32 or 64 */
  int32_t axis;            /* the logical dimension packed into words */
  axrt_axe_element_order_t order;
  axrt_axe_sign_encoding_t sign;
  axrt_axe_padding_rule_t padding;
} axrt_axe_packing_t;

/* A reference to a scale tensor. {-1, INVALID, GRID} means none. */
typedef struct axrt_axe_scale_ref_t {
  int32_t constant; /* index of the scale constant, or -1 */
  axrt_axe_dtype_t dtype; /* must equal that constant's dtype */
  axrt_axe_scale_layout_t layout;
} axrt_axe_scale_ref_t;

/* Zero points (INTEGER) or mins (FLOAT). Kind NONE with every other field
 * at its default means none. */
typedef struct axrt_axe_zero_point_t {
  axrt_axe_zero_point_kind_t kind;
  /* Index of the grid-shaped constant, or -1. Packed zero points are stored
   * as container words: an integer constant of `packing.container_bits`
   * whose packed axis counts words. */
  int32_t constant;
  axrt_axe_dtype_t dtype; /* of one zero point (UINT4 for GPTQ) */
  axrt_axe_packing_t packing; /* when the zero points are packed (GPTQ) */
  int32_t stored_bias;        /* GPTQ v1 stores zp - 1: bias 1 */
} axrt_axe_zero_point_t;

/* The complete quantization vocabulary of docs/format.md. A part left at
 * the defaults of AXRT_AXE_QUANT_LAYOUT_INIT is absent from the file. */
typedef struct axrt_axe_quant_layout_t {
  size_t struct_size;
  const void* next;
  const char* layout_id; /* such as "awq.int4.g128"; copied, NULL reads as "" */
  axrt_axe_dtype_t element_type;     /* the stored values: INT4, FLOAT8_E4M3FN ... */
  axrt_axe_dtype_t dequantized_type; /* what they stand for: BFLOAT16 ... */
  /* Elements per block along each dimension of the constant (0: the whole
   * dimension, 1: every element); `rank` entries, the constant's rank. */
  size_t rank;
  const uint64_t* block_shape;
  axrt_axe_scale_ref_t scale;
  axrt_axe_zero_point_t zero_point;
  /* Optional second level scaling the first level's scales (NVFP4's
   * per-tensor fp32 scale, double quantization), with its block shape over
   * the first-level scale tensor. */
  axrt_axe_scale_ref_t second_level_scale;
  size_t second_level_rank;
  const uint64_t* second_level_block_shape;
  axrt_axe_packing_t packing;
} axrt_axe_quant_layout_t;

#define AXRT_AXE_QUANT_LAYOUT_INIT                                                    \
  { sizeof(axrt_axe_quant_layout_t), NULL, NULL, AXRT_AXE_DTYPE_INVALID,               \
    AXRT_AXE_DTYPE_INVALID, 0, NULL, {-1, AXRT_AXE_DTYPE_INVALID, AXRT_AXE_SCALE_LAYOUT_GRID}, \
    {AXRT_AXE_ZERO_POINT_KIND_NONE, -1, AXRT_AXE_DTYPE_INVALID, {0, 0, 0, 0, 0, 0}, 0},     \
    {-1, AXRT_AXE_DTYPE_INVALID, AXRT_AXE_SCALE_LAYOUT_GRID}, 0, NULL, {0, 0, 0, 0, 0, 0} }

/* ---------------------------------------------------------------------- */
/* Kernels                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct axrt_axe_kernel_param_t {
  size_t struct_size;
  const void* next;
  const char* name; /* copied; NULL reads as "" */
  axrt_axe_param_kind_t kind;
  /* SCALAR: the value's type. BUFFER, optional: the element type the kernel
   * reads or writes there (AXRT_AXE_DTYPE_INVALID: not declared), which
   * only debugging tools use (the dumps and checks of axrt_function_invoke). */
  axrt_axe_dtype_t scalar_type;
  axrt_axe_access_t access; /* BUFFER only */
  /* BUFFER only, optional: the layout the kernel expects; a constant bound
   * to this parameter must carry an identical one. Copied. */
  const axrt_axe_quant_layout_t* layout;
} axrt_axe_kernel_param_t;

#define AXRT_AXE_KERNEL_PARAM_INIT                                                      \
  { sizeof(axrt_axe_kernel_param_t), NULL, NULL, AXRT_AXE_PARAM_KIND_BUFFER,              \
    AXRT_AXE_DTYPE_INVALID, AXRT_AXE_ACCESS_READ, NULL }

typedef struct axrt_axe_kernel_desc_t {
  size_t struct_size;
  const void* next;
  const char* name;         /* non-empty, unique among kernels */
  uint32_t code_object;     /* index of an added code object */
  const char* entry_symbol; /* NULL or "" means `name` */
  const axrt_axe_kernel_param_t* params; /* `param_count` entries, in order */
  size_t param_count;
  uint32_t workgroup_size[3]; /* every component >= 1 */
  uint32_t dynamic_shared_memory;
  uint32_t cluster_dims[3]; /* all 0 (no clusters) or every component >= 1 */
} axrt_axe_kernel_desc_t;

#define AXRT_AXE_KERNEL_DESC_INIT                                                  \
  { sizeof(axrt_axe_kernel_desc_t), NULL, NULL, 0, NULL, NULL, 0, {1, 1, 1}, 0, {0, 0, 0} }

/* Adds a kernel export and writes its index to `*out_index`. NOT_FOUND when
 * `code_object` was not added; ALREADY_EXISTS when the name is taken. */
AXRT_API axrt_status_t axrt_axe_builder_add_kernel(axrt_axe_builder_t builder,
                                                   const axrt_axe_kernel_desc_t* desc,
                                                   uint32_t* out_index);

/* Another implementation of a kernel (format 1.1): the same kernel compiled
 * into another code object, for another device. It shares the kernel's
 * parameters, and so its argument block, and the workgroup counts of every
 * dispatch of the kernel; only the launch shape below is its own. */
typedef struct axrt_axe_kernel_variant_desc_t {
  size_t struct_size;
  const void* next;
  uint32_t code_object;     /* index of an added code object */
  const char* entry_symbol; /* NULL or "" means the kernel's entry symbol */
  uint32_t workgroup_size[3]; /* every component >= 1 */
  uint32_t dynamic_shared_memory;
  uint32_t cluster_dims[3]; /* all 0 (no clusters) or every component >= 1 */
} axrt_axe_kernel_variant_desc_t;

#define AXRT_AXE_KERNEL_VARIANT_DESC_INIT \
  { sizeof(axrt_axe_kernel_variant_desc_t), NULL, 0, NULL, {1, 1, 1}, 0, {0, 0, 0} }

/* Appends a variant to kernel `kernel`'s list of implementations. The
 * kernel's own code object and entry symbol are its first implementation,
 * and the variants follow in the order added, which is the order of
 * preference: a loader runs the first implementation whose code object it
 * can load on its device. Like every add, it copies what `desc` holds.
 * NOT_FOUND when `kernel` or `code_object` was not added;
 * ALREADY_EXISTS when `code_object` already implements the kernel (as its
 * primary or as a variant); INVALID_ARGUMENT for a zero workgroup size
 * component or cluster dims that mix 0 and non-zero. */
AXRT_API axrt_status_t axrt_axe_builder_add_kernel_variant(
    axrt_axe_builder_t builder, uint32_t kernel, const axrt_axe_kernel_variant_desc_t* desc);

/* ---------------------------------------------------------------------- */
/* Constants                                                               */
/* ---------------------------------------------------------------------- */

typedef struct axrt_axe_constant_desc_t {
  size_t struct_size;
  const void* next;
  const char* name; /* non-empty, unique among constants */
  axrt_axe_dtype_t dtype; /* of the bytes: INT4 for packed int4 */
  size_t rank;
  const uint64_t* shape;  /* `rank` entries (may be NULL when rank is 0) */
  const int64_t* strides; /* NULL: dense row-major; else `rank` entries, in elements */
  uint64_t alignment;     /* of the data's start: a power of two <= 4096; 0 means 64 */
  const void* data;       /* `size` bytes, copied; must match shape x dtype */
  size_t size;
  const axrt_axe_quant_layout_t* layout; /* optional, copied */
} axrt_axe_constant_desc_t;

#define AXRT_AXE_CONSTANT_DESC_INIT                                                      \
  { sizeof(axrt_axe_constant_desc_t), NULL, NULL, AXRT_AXE_DTYPE_INVALID, 0, NULL, NULL, 0, \
    NULL, 0, NULL }

/* Adds a constant (weights) and writes its index to `*out_index`. A layout's
 * scale, zero-point and second-level constants must be added before it
 * (NOT_FOUND otherwise), with the dtype the layout names. Dense whole-byte
 * constants are checked to hold shape x dtype bytes here; packed and strided
 * ones, and the layout's consistency (scale grid, packing), when the file is
 * written. ALREADY_EXISTS when the name is taken. */
AXRT_API axrt_status_t axrt_axe_builder_add_constant(axrt_axe_builder_t builder,
                                                     const axrt_axe_constant_desc_t* desc,
                                                     uint32_t* out_index);

/* Reads bytes [offset, offset + size) of a constant's data into `dst`
 * (the builder's memory, valid only during the call). Returns NULL, or a
 * status (the builder takes ownership) that fails the write and reaches its
 * caller with the constant's name in front. Called on the thread that
 * writes, never concurrently for one builder. */
typedef axrt_status_t (*axrt_axe_read_fn_t)(void* user_data, uint64_t offset, void* dst,
                                            uint64_t size);

/* Where a constant's data comes from when it is not copied in. */
typedef struct axrt_axe_data_source_t {
  size_t struct_size;
  const void* next;   /* no extensions are taken */
  uint64_t size;      /* bytes of the data; must match shape x dtype like desc->size */
  axrt_axe_read_fn_t read; /* required */
  /* Optional: called once with `user_data` when the builder no longer needs
   * the source (its last reference released); not called when adding the
   * constant fails, which leaves `user_data` with the caller. */
  void (*release)(void* user_data);
  void* user_data;
} axrt_axe_data_source_t;

#define AXRT_AXE_DATA_SOURCE_INIT { sizeof(axrt_axe_data_source_t), NULL, 0, NULL, NULL, NULL }

/* Adds a constant like axrt_axe_builder_add_constant(), whose data
 * (`source->size` bytes; `desc->data` must be NULL and `desc->size` 0) is
 * read through `source->read` each time the file is written, instead of
 * being copied now. `desc` and `source` are borrowed for the call (what
 * `desc` points to is copied, as by add_constant); the builder keeps
 * `source->read`, `source->release` and `source->user_data`, which must stay
 * usable until `release` is called, or without `release` until the
 * builder's last reference is released (`release` runs on the thread that
 * releases it). During a write the builder reads each such constant once,
 * in ascending order of offset, at most 4 MiB per call, into its own
 * buffer, and writes the bytes to the file before it reads more, so a write
 * holds a few megabytes of them at any time, whatever their total
 * (axrt_axe_builder_write_memory() still holds the whole file). Reads happen
 * on the thread that writes, after the metadata was verified; the bytes must
 * be the same every time they are read. A read that fails stops the write,
 * which then leaves no file behind. */
AXRT_API axrt_status_t axrt_axe_builder_add_constant_from_source(
    axrt_axe_builder_t builder, const axrt_axe_constant_desc_t* desc,
    const axrt_axe_data_source_t* source, uint32_t* out_index);

/* Adds a copy of constant `constant`'s weights pre-packed for `target` in
 * the layout `layout_id` (both copied, non-empty); `size` bytes of `data`
 * are copied (at least 1), aligned like the constant. NOT_FOUND when
 * `constant` was not added; ALREADY_EXISTS when it already has a copy for
 * (`target`, `layout_id`). */
AXRT_API axrt_status_t axrt_axe_builder_add_prepacked_copy(axrt_axe_builder_t builder,
                                                           uint32_t constant,
                                                           const char* target,
                                                           const char* layout_id,
                                                           const void* data, size_t size);

/* ---------------------------------------------------------------------- */
/* Functions and commands                                                  */
/* ---------------------------------------------------------------------- */

/* A symbolic dimension, known when the function is called. */
typedef struct axrt_axe_symbol_t {
  size_t struct_size;
  const void* next;
  const char* name;     /* non-empty, unique within the function */
  uint64_t upper_bound; /* >= 1 */
} axrt_axe_symbol_t;

#define AXRT_AXE_SYMBOL_INIT { sizeof(axrt_axe_symbol_t), NULL, NULL, 1 }

/* One dimension: a static extent `value` when `symbol` is -1, else the
 * function's symbol `symbol` (and `value` is 0). */
typedef struct axrt_axe_dim_t {
  uint64_t value;
  int32_t symbol;
} axrt_axe_dim_t;

/* Properties of a signature entry (axrt_axe_tensor_sig_t.flags). */
typedef uint32_t axrt_axe_tensor_sig_flags_t;
enum {
  /* Format 1.2, inputs only: the function's commands may write the input in
   * place (a KV cache, a step counter). A mutable input can be bound to
   * WRITE and READ_WRITE kernel parameters and be the destination of copies
   * and fills; the caller passes a writable tensor that the call updates,
   * with no copy. The file then requires the feature "mutable-inputs.v1",
   * added when it is written, so that readers before format 1.2 refuse it. */
  AXRT_AXE_TENSOR_SIG_FLAG_MUTABLE = 1u << 0,
};

typedef struct axrt_axe_tensor_sig_t {
  size_t struct_size;
  const void* next;
  const char* name; /* non-empty, unique among the function's inputs and outputs */
  axrt_axe_dtype_t dtype;
  size_t rank;
  const axrt_axe_dim_t* dims; /* `rank` entries */
  /* AXRT_AXE_TENSOR_SIG_FLAG_* bits; MUTABLE is refused on outputs. */
  axrt_axe_tensor_sig_flags_t flags;
} axrt_axe_tensor_sig_t;

#define AXRT_AXE_TENSOR_SIG_INIT \
  { sizeof(axrt_axe_tensor_sig_t), NULL, NULL, AXRT_AXE_DTYPE_INVALID, 0, NULL, 0 }

typedef struct axrt_axe_function_desc_t {
  size_t struct_size;
  const void* next;
  const char* name; /* non-empty, unique among functions */
  const axrt_axe_symbol_t* symbols;
  size_t symbol_count;
  const axrt_axe_tensor_sig_t* inputs;
  size_t input_count;
  const axrt_axe_tensor_sig_t* outputs;
  size_t output_count;
  uint64_t arena_size; /* transient bytes the commands may use */
  /* Format 1.4: the groups of devices its collective commands run over,
   * each bound when the function is invoked on a member
   * (axrt_invoke_options_t.channels). A file with channels requires the
   * feature "collectives.v1", added when it is written. */
  const struct axrt_axe_channel_t* channels;
  size_t channel_count;
} axrt_axe_function_desc_t;

#define AXRT_AXE_FUNCTION_DESC_INIT \
  { sizeof(axrt_axe_function_desc_t), NULL, NULL, NULL, 0, NULL, 0, NULL, 0, 0, NULL, 0 }

typedef struct axrt_axe_channel_t {
  size_t struct_size;
  const void* next;
  const char* name; /* non-empty, unique in the function ("tensor_parallel") */
  uint32_t size;    /* the members it needs; 0: any number */
} axrt_axe_channel_t;

#define AXRT_AXE_CHANNEL_INIT { sizeof(axrt_axe_channel_t), NULL, NULL, 0 }

/* Adds a function with no commands yet and writes its index to
 * `*out_index`. ALREADY_EXISTS when the name is taken; INVALID_ARGUMENT for
 * a mutable output or flag bits this library does not know. */
AXRT_API axrt_status_t axrt_axe_builder_add_function(axrt_axe_builder_t builder,
                                                     const axrt_axe_function_desc_t* desc,
                                                     uint32_t* out_index);

/* One step of an expression in reverse Polish notation. */
typedef struct axrt_axe_expr_op_t {
  axrt_axe_expr_opcode_t opcode;
  /* CONST: the literal, >= 0 except as below; SYMBOL: the symbol's index */
  int64_t operand;
} axrt_axe_expr_op_t;

/* An unsigned 64-bit value computed from literals and the function's
 * symbols. `op_count` 0 means absent (each use says what that means); a
 * present expression leaves exactly one value on its stack. One exception
 * to unsigned values: a dispatch's SCALAR binding for a parameter of a
 * signed type (INT8 to INT64, or floating point) may be a single negative
 * CONST: an integer parameter takes its value, a floating-point one the low
 * bytes of its two's complement as its bit pattern (a FLOAT64's sign bit
 * makes its bit pattern negative). The file then requires the feature
 * "signed-scalars.v1", added when it is written, so that readers before
 * format 1.3 refuse it. */
typedef struct axrt_axe_expr_t {
  const axrt_axe_expr_op_t* ops;
  size_t op_count;
} axrt_axe_expr_t;

/* What a dispatch parameter, or a copy or fill side, refers to. */
typedef struct axrt_axe_binding_t {
  size_t struct_size;
  const void* next;
  axrt_axe_binding_kind_t kind;
  uint32_t index;   /* INPUT, OUTPUT, CONSTANT */
  uint64_t offset;  /* ARENA */
  uint64_t size;    /* ARENA */
  axrt_axe_expr_t value; /* SCALAR only */
} axrt_axe_binding_t;

#define AXRT_AXE_BINDING_INIT \
  { sizeof(axrt_axe_binding_t), NULL, AXRT_AXE_BINDING_KIND_INVALID, 0, 0, 0, {NULL, 0} }

typedef struct axrt_axe_dispatch_desc_t {
  size_t struct_size;
  const void* next;
  uint32_t kernel; /* index of an added kernel */
  axrt_axe_expr_t workgroup_count_x; /* required */
  axrt_axe_expr_t workgroup_count_y; /* absent means 1 */
  axrt_axe_expr_t workgroup_count_z; /* absent means 1 */
  const axrt_axe_binding_t* bindings; /* one per kernel parameter, in order */
  size_t binding_count;
} axrt_axe_dispatch_desc_t;

#define AXRT_AXE_DISPATCH_DESC_INIT                                                  \
  { sizeof(axrt_axe_dispatch_desc_t), NULL, 0, {NULL, 0}, {NULL, 0}, {NULL, 0}, NULL, 0 }

typedef struct axrt_axe_copy_desc_t {
  size_t struct_size;
  const void* next;
  const axrt_axe_binding_t* src; /* not SCALAR */
  axrt_axe_expr_t src_offset;    /* absent means 0 */
  const axrt_axe_binding_t* dst; /* OUTPUT, ARENA or a mutable INPUT */
  axrt_axe_expr_t dst_offset;    /* absent means 0 */
  axrt_axe_expr_t length;        /* bytes; required */
} axrt_axe_copy_desc_t;

#define AXRT_AXE_COPY_DESC_INIT \
  { sizeof(axrt_axe_copy_desc_t), NULL, NULL, {NULL, 0}, NULL, {NULL, 0}, {NULL, 0} }

typedef struct axrt_axe_fill_desc_t {
  size_t struct_size;
  const void* next;
  const axrt_axe_binding_t* target; /* OUTPUT, ARENA or a mutable INPUT */
  axrt_axe_expr_t offset; /* absent means 0 */
  axrt_axe_expr_t length; /* bytes; required */
  uint64_t pattern;       /* fits in `pattern_size` bytes */
  uint32_t pattern_size;  /* 1, 2, 4 or 8 */
} axrt_axe_fill_desc_t;

#define AXRT_AXE_FILL_DESC_INIT \
  { sizeof(axrt_axe_fill_desc_t), NULL, NULL, {NULL, 0}, {NULL, 0}, 0, 1 }

/* Format 1.4: a collective over channel `channel` of the function, queued
 * on the calling member's stream in order with the commands around it
 * (docs/format.md, "CollectiveCommand"). `count`, `send` and `recv` mean
 * what they mean for axrt_group_enqueue_part() (axrt/group.h): elements of
 * each member's block; the send range is a block per member for a
 * reduce-scatter, the receive range for an all-gather. */
typedef struct axrt_axe_collective_desc_t {
  size_t struct_size;
  const void* next;
  axrt_axe_collective_kind_t kind;
  uint32_t channel;               /* index into the function's channels */
  axrt_axe_dtype_t dtype;         /* INT8 ... FLOAT64, as the group takes */
  axrt_axe_expr_t count;          /* required */
  axrt_axe_reduce_op_t op;        /* ALL_REDUCE and REDUCE_SCATTER */
  uint32_t root;                  /* BROADCAST */
  const axrt_axe_binding_t* send; /* not SCALAR */
  axrt_axe_expr_t send_offset;    /* bytes; absent means 0 */
  const axrt_axe_binding_t* recv; /* OUTPUT, ARENA or a mutable INPUT */
  axrt_axe_expr_t recv_offset;    /* bytes; absent means 0 */
} axrt_axe_collective_desc_t;

#define AXRT_AXE_COLLECTIVE_DESC_INIT                                                         \
  { sizeof(axrt_axe_collective_desc_t), NULL, AXRT_AXE_COLLECTIVE_INVALID, 0, 0, {NULL, 0},   \
    AXRT_AXE_REDUCE_SUM, 0, NULL, {NULL, 0}, NULL, {NULL, 0} }

/* Append a command to function `function`'s list; commands run in the order
 * added. Every index is checked against what was added before: NOT_FOUND
 * for a function, kernel or constant not added; OUT_OF_RANGE for an input,
 * output or symbol index, or an arena range, that the function does not
 * have; INVALID_ARGUMENT for a binding of the wrong kind (a dispatch takes
 * one binding per kernel parameter, SCALAR exactly for SCALAR parameters;
 * copies and fills write only OUTPUT, ARENA and mutable INPUT bindings),
 * fields a binding kind does not use, or a malformed expression (a negative
 * CONST anywhere but alone in the binding of a signed scalar parameter,
 * axrt_axe_expr_t). Whether a constant's layout matches the one a parameter
 * declares, and whether a WRITE or READ_WRITE parameter is bound to
 * writable memory, is checked when the file is written. */
AXRT_API axrt_status_t axrt_axe_builder_add_dispatch(axrt_axe_builder_t builder, uint32_t function,
                                                     const axrt_axe_dispatch_desc_t* desc);
AXRT_API axrt_status_t axrt_axe_builder_add_copy(axrt_axe_builder_t builder, uint32_t function,
                                                 const axrt_axe_copy_desc_t* desc);
AXRT_API axrt_status_t axrt_axe_builder_add_fill(axrt_axe_builder_t builder, uint32_t function,
                                                 const axrt_axe_fill_desc_t* desc);
AXRT_API axrt_status_t axrt_axe_builder_add_collective(axrt_axe_builder_t builder,
                                                       uint32_t function,
                                                       const axrt_axe_collective_desc_t* desc);

/* ---------------------------------------------------------------------- */
/* Output                                                                  */
/* ---------------------------------------------------------------------- */

/* Writes the file to `path`: first to a temporary file in the same
 * directory, then renamed over `path`, so a failed write never leaves a
 * partial file. The file is written piece by piece, never whole in memory:
 * the metadata and the copied payloads first, verified by the reader before
 * any source of axrt_axe_builder_add_constant_from_source() is read, then
 * those sources, then the file is read back (mapped) and verified in full,
 * checksums included, before the rename. The builder is unchanged and may
 * be extended and written again. */
AXRT_API axrt_status_t axrt_axe_builder_write_file(axrt_axe_builder_t builder, const char* path);

/* Writes the verified file to new memory: `*out_data` (free it with
 * axrt_axe_memory_free()) holding `*out_size` bytes, identical to what
 * axrt_axe_builder_write_file() writes. The builder is unchanged. */
AXRT_API axrt_status_t axrt_axe_builder_write_memory(axrt_axe_builder_t builder, void** out_data,
                                                     size_t* out_size);

/* Frees memory returned by axrt_axe_builder_write_memory(). NULL is a
 * no-op. */
AXRT_API void axrt_axe_memory_free(void* data);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_FORMAT_H_ */
