// NumPy's .npy files, as `axrt run` reads its inputs and writes its outputs:
// format versions 1.0, 2.0 and 3.0, one array of little-endian elements in
// row-major ("C") order. The element types are those both NumPy and axrt
// have: <f2 <f4 <f8 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 |b1. Everything else
// (Fortran order, big-endian data, object, structured and other dtypes,
// short or overlong data) is refused with the reason.
#ifndef AXRT_TOOLS_AXRT_NPY_H_
#define AXRT_TOOLS_AXRT_NPY_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "axrt/base.h"

namespace axrt::tools {

struct NpyArray {
  axrt_dtype_t dtype = AXRT_DTYPE_INVALID;
  std::vector<int64_t> shape;  // empty for a 0-d array (one element)
  std::vector<uint8_t> data;   // the elements: product(shape) x element size bytes
};

// The .npy descriptor of `dtype` ("<f4", "|b1"), or "" when .npy has no
// standard type for it (bf16, int4, fp8 ...).
std::string_view npy_descriptor(axrt_dtype_t dtype);

// Bytes per element of a dtype that has a descriptor; 0 otherwise.
size_t npy_element_size(axrt_dtype_t dtype);

// Parses a whole .npy file held in `bytes`. On failure returns false and
// sets `*error` to the reason ("big-endian data ('>f4') is not supported"),
// without a file name.
bool npy_parse(std::span<const uint8_t> bytes, NpyArray* out, std::string* error);

// Reads and parses the file at `path`; `*error` starts with the path.
bool npy_read_file(const std::string& path, NpyArray* out, std::string* error);

// Encodes a version 1.0 file, byte for byte as NumPy's np.save writes it
// (header padded with spaces to a multiple of 64 bytes). Fails for a dtype
// without a descriptor or `data` of the wrong size.
bool npy_encode(axrt_dtype_t dtype, std::span<const int64_t> shape,
                std::span<const uint8_t> data, std::vector<uint8_t>* out, std::string* error);

// npy_encode() into the file at `path` (replaced); `*error` starts with the
// path.
bool npy_write_file(const std::string& path, axrt_dtype_t dtype, std::span<const int64_t> shape,
                    std::span<const uint8_t> data, std::string* error);

}  // namespace axrt::tools

#endif  // AXRT_TOOLS_AXRT_NPY_H_
