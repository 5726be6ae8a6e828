// The .npz archives of np.savez, as far as the MLP compiler needs them: zip
// files whose entries are stored (not compressed) .npy files of float32
// arrays, little-endian, C order. Anything else is refused with a message
// naming the archive, the entry and the reason.
#ifndef AXRT_EXAMPLES_COMPILER_NPZ_H_
#define AXRT_EXAMPLES_COMPILER_NPZ_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlpc {

using Bytes = std::vector<uint8_t>;

// A float32 array in C order.
struct Array {
  std::vector<uint64_t> shape;
  std::vector<float> data;
};

// What read_npz() and the file helpers throw; the message is complete.
class NpzError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads every array of the archive at `path`, keyed by name ("fc1.weight"
// for the entry "fc1.weight.npy").
std::map<std::string, Array> read_npz(const std::string& path);

// The pieces of an archive, public so that tests can build broken ones.

// A .npy file (version 1.0) with a header of the given fields and `data` as
// its payload, unchecked.
Bytes npy_bytes(const std::string& descr, bool fortran_order, const std::vector<uint64_t>& shape,
                const Bytes& data);

// A float32 .npy file of `array`.
Bytes npy_float32(const Array& array);

struct ZipEntry {
  std::string name;
  Bytes data;
  // 0: stored. 8: deflate, written as stored deflate blocks (valid deflate
  // that any unzip reads, with no compressor needed).
  uint16_t method = 0;
};

// A zip archive of `entries`, in order, as np.savez lays them out.
Bytes zip_bytes(const std::vector<ZipEntry>& entries);

// The archive np.savez would write for `arrays` (entry names get ".npy").
Bytes npz_bytes(const std::map<std::string, Array>& arrays);

// CRC-32 (the zip and zlib polynomial).
uint32_t crc32(const uint8_t* data, size_t size);

Bytes read_file(const std::string& path);
void write_file(const std::string& path, const Bytes& bytes);

}  // namespace mlpc

#endif  // AXRT_EXAMPLES_COMPILER_NPZ_H_
