// The .npy reader and writer behind `axrt run`: every dtype round-trips,
// the writer matches np.save byte for byte, and each kind of file the
// reader refuses is refused with its reason.
#include "tools/axrt/npy.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "axrt/executable.h"

using axrt::tools::npy_descriptor;
using axrt::tools::npy_element_size;
using axrt::tools::npy_encode;
using axrt::tools::npy_parse;
using axrt::tools::npy_read_file;
using axrt::tools::npy_write_file;
using axrt::tools::NpyArray;

namespace {

std::vector<uint8_t> bytes_of(std::string_view text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

// A file with `header` (the dictionary text, padded here) and `data`.
std::vector<uint8_t> npy_file(std::string_view header, std::vector<uint8_t> data = {}, int major = 1,
                              int minor = 0) {
  std::string text(header);
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + text.size() + 1) % 64 != 0) text += ' ';
  text += '\n';
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major),
                                static_cast<uint8_t>(minor)};
  for (size_t i = 0; i < prefix - 8; ++i) bytes.push_back(static_cast<uint8_t>(text.size() >> (8 * i)));
  bytes.insert(bytes.end(), text.begin(), text.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

// What npy_parse says about `bytes`; "" if it accepts them.
std::string refusal(const std::vector<uint8_t>& bytes) {
  NpyArray array;
  std::string error;
  if (npy_parse(bytes, &array, &error)) return "";
  CHECK_FALSE(error.empty());
  return error;
}

std::string header(std::string_view descr, std::string_view shape, bool fortran = false) {
  return std::string("{'descr': '") + std::string(descr) + "', 'fortran_order': " +
         (fortran ? "True" : "False") + ", 'shape': " + std::string(shape) + ", }";
}

}  // namespace

TEST_CASE("npy: every dtype round-trips through encode and parse") {
  const axrt_dtype_t dtypes[] = {AXRT_DTYPE_FLOAT16, AXRT_DTYPE_FLOAT32, AXRT_DTYPE_FLOAT64,
                                 AXRT_DTYPE_INT8,    AXRT_DTYPE_UINT8,   AXRT_DTYPE_INT16,
                                 AXRT_DTYPE_UINT16,  AXRT_DTYPE_INT32,   AXRT_DTYPE_UINT32,
                                 AXRT_DTYPE_INT64,   AXRT_DTYPE_UINT64,  AXRT_DTYPE_BOOL};
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {7}, {2, 3}, {1, 2, 1, 3}};
  for (axrt_dtype_t dtype : dtypes) {
    const size_t size = npy_element_size(dtype);
    REQUIRE(size * 8 == axrt_dtype_bit_width(dtype));
    for (const std::vector<int64_t>& shape : shapes) {
      INFO(axrt_dtype_name(dtype) << " rank " << shape.size());
      size_t count = 1;
      for (int64_t extent : shape) count *= static_cast<size_t>(extent);
      std::vector<uint8_t> data(count * size);
      for (size_t i = 0; i < data.size(); ++i) {
        data[i] = dtype == AXRT_DTYPE_BOOL ? (i % 3 == 0) : static_cast<uint8_t>(i * 37 + 5);
      }
      std::vector<uint8_t> file;
      std::string error;
      REQUIRE(npy_encode(dtype, shape, data, &file, &error));
      CHECK(file.size() % 64 == data.size() % 64);  // the data starts 64-aligned
      NpyArray array;
      REQUIRE(npy_parse(file, &array, &error));
      CHECK(array.dtype == dtype);
      CHECK(array.shape == shape);
      CHECK(array.data == data);
    }
  }
}

TEST_CASE("npy: the writer matches np.save byte for byte") {
  // np.save(f, np.zeros(5000, np.float32)) with NumPy 2.x: the header is
  // padded with spaces to 118 bytes, so the data starts at 128.
  std::vector<uint8_t> file;
  std::string error;
  const int64_t shape[] = {5000};
  REQUIRE(npy_encode(AXRT_DTYPE_FLOAT32, shape, std::vector<uint8_t>(20000), &file, &error));
  const std::string expected_header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (5000,), }" + std::string(57, ' ') + "\n";
  REQUIRE(file.size() == 128 + 20000);
  CHECK(std::memcmp(file.data(), "\x93NUMPY\x01\x00\x76\x00", 10) == 0);
  CHECK(std::string(file.begin() + 10, file.begin() + 128) == expected_header);

  // Scalars and matrices, as NumPy writes them.
  REQUIRE(npy_encode(AXRT_DTYPE_FLOAT64, {}, std::vector<uint8_t>(8), &file, &error));
  CHECK(std::string(file.begin() + 10, file.begin() + 128) ==
        "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" + std::string(62, ' ') + "\n");
  const int64_t matrix[] = {2, 3};
  REQUIRE(npy_encode(AXRT_DTYPE_BOOL, matrix, std::vector<uint8_t>(6), &file, &error));
  CHECK(std::string(file.begin() + 10, file.begin() + 128) ==
        "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }" + std::string(58, ' ') +
            "\n");
}

TEST_CASE("npy: descriptors name the little-endian types and nothing else") {
  CHECK(npy_descriptor(AXRT_DTYPE_FLOAT16) == "<f2");
  CHECK(npy_descriptor(AXRT_DTYPE_INT8) == "|i1");
  CHECK(npy_descriptor(AXRT_DTYPE_BOOL) == "|b1");
  CHECK(npy_descriptor(AXRT_DTYPE_UINT64) == "<u8");
  CHECK(npy_descriptor(AXRT_DTYPE_BFLOAT16).empty());
  CHECK(npy_descriptor(AXRT_DTYPE_INT4).empty());
  CHECK(npy_descriptor(AXRT_DTYPE_FLOAT8_E4M3FN).empty());
  std::vector<uint8_t> file;
  std::string error;
  const int64_t shape[] = {2};
  CHECK_FALSE(npy_encode(AXRT_DTYPE_BFLOAT16, shape, std::vector<uint8_t>(4), &file, &error));
  CHECK(error == "a .npy file cannot hold bf16 elements");
  CHECK_FALSE(npy_encode(AXRT_DTYPE_FLOAT32, shape, std::vector<uint8_t>(7), &file, &error));
  CHECK(error == "shape [2] of '<f4' needs 2 elements but 7 bytes were given");
}

TEST_CASE("npy: versions 2.0 and 3.0 and other writers' headers are read") {
  const std::vector<uint8_t> four = {1, 2, 3, 4};
  NpyArray array;
  std::string error;
  REQUIRE(npy_parse(npy_file(header("<i2", "(2,)"), four, 2), &array, &error));
  CHECK(array.dtype == AXRT_DTYPE_INT16);
  CHECK(array.shape == std::vector<int64_t>{2});
  REQUIRE(npy_parse(npy_file(header("<u4", "(1,)"), four, 3), &array, &error));
  CHECK(array.dtype == AXRT_DTYPE_UINT32);
  // Keys in another order, double quotes, no trailing comma, Python 2 longs,
  // '<' on a single-byte type, '=' (native, little-endian here).
  REQUIRE(npy_parse(npy_file("{\"shape\": (2L, 2L), \"fortran_order\": False, \"descr\": \"<u1\"}", four),
                    &array, &error));
  CHECK(array.dtype == AXRT_DTYPE_UINT8);
  CHECK(array.shape == std::vector<int64_t>{2, 2});
  REQUIRE(npy_parse(npy_file(header("=i4", "(1,)"), four), &array, &error));
  CHECK(array.dtype == AXRT_DTYPE_INT32);
}

TEST_CASE("npy: each kind of bad file is refused with its reason") {
  const std::vector<uint8_t> eight(8, 0);
  CHECK(refusal(bytes_of("a,b\n1,2\n")) == "not a .npy file (it does not start with \"\\x93NUMPY\")");
  CHECK(refusal({}) == "not a .npy file (it does not start with \"\\x93NUMPY\")");
  CHECK(refusal(bytes_of("\x93NUMPY\x01")) == "truncated: 7 bytes end inside the header");
  CHECK(refusal(npy_file(header("<f4", "(2,)"), eight, 4)) ==
        "unsupported .npy format version 4.0 (known: 1.0, 2.0, 3.0)");
  CHECK(refusal(npy_file(header("<f4", "(2,)"), eight, 1, 1)) ==
        "unsupported .npy format version 1.1 (known: 1.0, 2.0, 3.0)");
  {
    std::vector<uint8_t> cut = npy_file(header("<f4", "(2,)"));
    cut.resize(40);
    CHECK(refusal(cut) == "truncated: the header declares 118 bytes but only 30 follow");
  }

  // The things the brief of `axrt run` names: Fortran order, big-endian,
  // object and unknown dtypes, truncated data.
  CHECK(refusal(npy_file(header("<f4", "(2,)", true), eight)) ==
        "Fortran-order (column-major) data is not supported: save a C-order array "
        "(np.ascontiguousarray)");
  CHECK(refusal(npy_file(header(">f4", "(2,)"), eight)) ==
        "big-endian data ('>f4') is not supported: save it little-endian (arr.astype('<f4'))");
  CHECK(refusal(npy_file(header(">i8", "(1,)"), eight)).starts_with("big-endian data ('>i8')"));
  CHECK(refusal(npy_file(header("|O", "(1,)"), eight)) == "object arrays ('|O') are not supported");
  CHECK(refusal(npy_file(header("<c8", "(1,)"), eight)) ==
        "unsupported dtype '<c8' (supported: <f2, <f4, <f8, |i1, |u1, <i2, <u2, <i4, <u4, <i8, "
        "<u8, |b1)");
  CHECK(refusal(npy_file(header("<U5", "(1,)"), eight)).starts_with("unsupported dtype '<U5'"));
  CHECK(refusal(npy_file(header("|V2", "(4,)"), eight)).starts_with("unsupported dtype '|V2'"));
  CHECK(refusal(npy_file(header("<f3", "(1,)"), eight)).starts_with("unsupported dtype '<f3'"));
  CHECK(refusal(npy_file(header("|f4", "(2,)"), eight)) == "dtype '|f4' has no byte order: expected '<f4'");
  CHECK(refusal(npy_file("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                         eight)) ==
        "structured arrays (a list of fields as 'descr') are not supported");
  CHECK(refusal(npy_file(header("<f4", "(3,)"), eight)) ==
        "truncated data: shape [3] of '<f4' needs 12 bytes, the file holds 8");
  CHECK(refusal(npy_file(header("<f4", "(1,)"), eight)) ==
        "4 bytes follow the data (shape [1] of '<f4' needs 4)");

  // Headers that are not the dictionary np.save writes.
  CHECK(refusal(npy_file("[1, 2]", eight)) == "header: not a dictionary");
  CHECK(refusal(npy_file("{'descr': '<f4', 'shape': (2,)}", eight)) ==
        "header: key 'fortran_order' is missing");
  CHECK(refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", eight)) ==
        "header: unexpected key 'x' (expected 'descr', 'fortran_order', 'shape')");
  CHECK(refusal(npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
                         eight)) == "header: key 'descr' appears twice");
  CHECK(refusal(npy_file(header("<f4", "[2]"), eight)) == "header: 'shape' is not a tuple");
  CHECK(refusal(npy_file(header("<f4", "(-2,)"), eight)) == "header: 'shape' has a negative extent -2");
  CHECK(refusal(npy_file(header("<f4", "(2.5,)"), eight)).starts_with("header: "));
  CHECK(refusal(npy_file(header("<f4", "('2',)"), eight)) ==
        "header: 'shape' holds something other than integers");
  CHECK(refusal(npy_file("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", eight)) ==
        "header: 'fortran_order' is not True or False");
  CHECK(refusal(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", eight))
            .starts_with("header: expected ',' or '}'"));
  CHECK(refusal(npy_file("{'descr: '<f4'}", eight)).starts_with("header: "));
  CHECK(refusal(npy_file(header("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)"), eight)) ==
        "rank 17 is above axrt's largest, 16");
  CHECK(refusal(npy_file(header("<f4", "(4294967296, 4294967296)"), eight)) ==
        "shape [4294967296, 4294967296] is too large");
  CHECK(refusal(npy_file(header("<f4", "(99999999999999999999,)"), eight)) ==
        "header: 'shape' has an extent above 2^63 - 1");
  CHECK(refusal(npy_file(std::string(40, '(') + std::string(40, ')'), eight)) ==
        "header: nesting too deep at offset 17 ('(')");
}

TEST_CASE("npy: files are read and written with the path in errors") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("axrt_npy_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "x.npy").string();
  const int64_t shape[] = {3};
  const std::vector<uint8_t> data = {1, 0, 1};
  std::string error;
  REQUIRE(npy_write_file(path, AXRT_DTYPE_BOOL, shape, data, &error));
  NpyArray array;
  REQUIRE(npy_read_file(path, &array, &error));
  CHECK(array.dtype == AXRT_DTYPE_BOOL);
  CHECK(array.data == data);

  CHECK_FALSE(npy_read_file((dir / "missing.npy").string(), &array, &error));
  CHECK(error == (dir / "missing.npy").string() + ": cannot open: No such file or directory");
  CHECK_FALSE(npy_read_file(dir.string(), &array, &error));
  CHECK(error.starts_with(dir.string() + ": cannot read: "));
  CHECK_FALSE(npy_write_file((dir / "no" / "x.npy").string(), AXRT_DTYPE_BOOL, shape, data, &error));
  CHECK(error == (dir / "no" / "x.npy").string() + ": cannot create: No such file or directory");
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    REQUIRE(file);
    std::fwrite("\x93NUMPY\x01\x00\x76", 1, 9, file);
    std::fclose(file);
  }
  CHECK_FALSE(npy_read_file(path, &array, &error));
  CHECK(error == path + ": truncated: 9 bytes end inside the header");
  std::filesystem::remove_all(dir);
}
