// Writes the archives examples/compiler/refusals.cmake feeds
// axrt_mlp_compiler, into the directory given as the only argument: one
// valid archive (good.npz) and one per way an archive can be wrong, each
// named after the fault. Small weights: in 16, hidden 128, out 8.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <string>

#include <fmt/format.h>

#include "npz.h"

namespace mlpc {
namespace {

constexpr uint64_t kIn = 16, kHidden = 128, kOut = 8;

Array array(std::vector<uint64_t> shape) {
  Array a;
  uint64_t count = 1;
  for (uint64_t extent : shape) count *= extent;
  a.shape = std::move(shape);
  a.data.resize(count);
  for (uint64_t i = 0; i < count; ++i) a.data[i] = static_cast<float>(std::sin(0.37 * i + count)) * 0.1f;
  return a;
}

std::map<std::string, Array> good_arrays() {
  return {{"fc1.weight", array({kHidden, kIn})},
          {"fc1.bias", array({kHidden})},
          {"fc2.weight", array({kOut, kHidden})},
          {"fc2.bias", array({kOut})}};
}

std::vector<ZipEntry> entries(const std::map<std::string, Array>& arrays) {
  std::vector<ZipEntry> out;
  for (const auto& [name, a] : arrays) out.push_back({name + ".npy", npy_float32(a), 0});
  return out;
}

// The entries of the good archive with `edit` applied to the one named
// `name` ("fc1.weight.npy").
Bytes with_entry(const std::string& name, const std::function<void(ZipEntry&)>& edit) {
  std::vector<ZipEntry> list = entries(good_arrays());
  for (ZipEntry& entry : list) {
    if (entry.name == name) edit(entry);
  }
  return zip_bytes(list);
}

Bytes raw_f32(const Array& a) {
  Bytes bytes(a.data.size() * 4);
  std::memcpy(bytes.data(), a.data.data(), bytes.size());
  return bytes;
}

void run(const std::string& dir) {
  const auto write = [&](const char* name, const Bytes& bytes) { write_file(dir + "/" + name, bytes); };
  write("good.npz", npz_bytes(good_arrays()));

  // What np.savez_compressed writes: deflate entries.
  write("compressed.npz", with_entry("fc1.weight.npy", [](ZipEntry& e) { e.method = 8; }));
  // float64 and big-endian float32 arrays.
  write("float64.npz", with_entry("fc2.bias.npy", [](ZipEntry& e) {
          e.data = npy_bytes("<f8", false, {kOut}, Bytes(kOut * 8, 0));
        }));
  write("big_endian.npz", with_entry("fc1.bias.npy", [](ZipEntry& e) {
          e.data = npy_bytes(">f4", false, {kHidden}, Bytes(kHidden * 4, 0));
        }));
  write("fortran_order.npz", with_entry("fc2.weight.npy", [](ZipEntry& e) {
          const Array a = array({kOut, kHidden});
          e.data = npy_bytes("<f4", true, a.shape, raw_f32(a));
        }));
  // A .npy 3.0 header (utf-8), which this reader does not take.
  write("npy_version_3.npz", with_entry("fc1.bias.npy", [](ZipEntry& e) { e.data[6] = 3; }));
  // A payload shorter than the shape needs.
  write("short_payload.npz", with_entry("fc1.weight.npy", [](ZipEntry& e) { e.data.resize(e.data.size() - 4); }));
  // An array missing, and one of the wrong shape.
  {
    std::map<std::string, Array> arrays = good_arrays();
    arrays.erase("fc2.bias");
    write("missing_array.npz", npz_bytes(arrays));
    arrays = good_arrays();
    arrays["fc1.bias"] = array({kHidden + 1});
    write("wrong_shape.npz", npz_bytes(arrays));
    arrays = good_arrays();
    arrays["fc2.weight"].data[5] = NAN;
    write("nan.npz", npz_bytes(arrays));
    // hidden 100: not a whole number of AWQ groups of 128.
    arrays = {{"fc1.weight", array({100, kIn})}, {"fc1.bias", array({100})},
              {"fc2.weight", array({kOut, 100})}, {"fc2.bias", array({kOut})}};
    write("hidden_100.npz", npz_bytes(arrays));
  }
  // Damage: a flipped byte inside an entry's data (the CRC catches it), a
  // file cut short, and something that is no zip at all.
  Bytes good = npz_bytes(good_arrays());
  Bytes flipped = good;
  flipped[200] ^= 0x40;  // inside the first entry's .npy payload
  write("flipped_byte.npz", flipped);
  write("truncated.npz", Bytes(good.begin(), good.begin() + good.size() / 2));
  const std::string text = "these are not the weights you are looking for\n";
  write("not_a_zip.npz", Bytes(text.begin(), text.end()));
}

}  // namespace
}  // namespace mlpc

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: axrt_mlp_make_test_npz DIRECTORY\n");
    return 2;
  }
  try {
    mlpc::run(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "axrt_mlp_make_test_npz: %s\n", e.what());
    return 1;
  }
  return 0;
}
