#include "kernels/cpu/matmul_tuning.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace axrt::kernels::cpu {
namespace {

constexpr char kCacheHeader[] = "# axrt matmul tuning cache, format 1";
constexpr char kKeyVersion[] = "v1";
// A cache file larger than this is not a cache this code wrote.
constexpr std::streamsize kMaxCacheBytes = 1 << 16;

struct Slot {
  std::atomic<bool> ready{false};
  std::atomic<int> source{static_cast<int>(MatmulTuningSource::kNotYet)};
  MatmulTuning tuning;
};

Slot g_slots[kMatmulIsaCount];

std::mutex& tuning_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The CPU's brand string, or "unknown": what tells one device model from
// another.
std::string cpu_model() {
  std::string model;
#if defined(__x86_64__) || defined(__i386__)
  if (static_cast<unsigned int>(__get_cpuid_max(0x80000000u, nullptr)) >= 0x80000004u) {
    unsigned int regs[12] = {};
    for (unsigned int i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                  &regs[4 * i + 3]);
    }
    char brand[sizeof regs + 1] = {};
    std::memcpy(brand, regs, sizeof regs);
    model = brand;
  }
#endif
  // One line, single spaces, no tab (the cache's separator).
  std::string clean;
  for (char c : model) {
    const bool blank = std::isspace(static_cast<unsigned char>(c)) != 0 ||
                       std::isprint(static_cast<unsigned char>(c)) == 0;
    if (blank) {
      if (!clean.empty() && clean.back() != ' ') clean.push_back(' ');
    } else {
      clean.push_back(c);
    }
  }
  while (!clean.empty() && clean.back() == ' ') clean.pop_back();
  return clean.empty() ? "unknown" : clean;
}

bool tuning_disabled() {
  const char* value = std::getenv("AXRT_TUNING");
  if (value == nullptr) return false;
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "off" || v == "0" || v == "false" || v == "no";
}

// --- Timing ------------------------------------------------------------------

// Deterministic values in [-0.5, 0.5).
void fill(std::vector<float>& v, uint32_t seed) {
  uint32_t state = seed;
  for (float& f : v) {
    state = state * 1664525u + 1013904223u;
    f = static_cast<float>(state >> 8) * 0x1p-24f - 0.5f;
  }
}

// The f32 problem every candidate is timed on: a layer with 1024 columns
// (rows 4 KiB apart, as in real weights) and K = 512.
struct TuningProblem {
  static constexpr uint64_t kK = 512;
  static constexpr uint64_t kN = 1024;
  std::vector<float> x, w, bias, y;
  TuningProblem() : x(kTile * kK), w(kK * kN), bias(kN), y(kTile * kN) {
    fill(x, 1);
    fill(w, 2);
    fill(bias, 3);
  }
  MatmulF32Args args(uint64_t rows) {
    return MatmulF32Args{x.data(), w.data(), bias.data(), y.data(), rows, kN, kK};
  }
};

// Timed rounds of every candidate (set_matmul_tuning_rounds_for_testing).
constexpr int kRounds = 5;
std::atomic<int> g_rounds{kRounds};

// The best time of each candidate over interleaved rounds (so that a
// frequency change or a neighbour's burst hits them all alike).
template <class Candidate, class Run>
size_t fastest(const std::vector<Candidate>& candidates, Run&& run) {
  const int rounds = std::max(1, g_rounds.load(std::memory_order_relaxed));
  std::vector<double> best(candidates.size(), 1e30);
  for (size_t i = 0; i < candidates.size(); ++i) run(candidates[i]);  // warm up
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      run(candidates[i]);
      run(candidates[i]);
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best[i] = std::min(best[i], elapsed.count());
    }
  }
  return static_cast<size_t>(std::min_element(best.begin(), best.end()) - best.begin());
}

MatmulTuning measure(MatmulIsa isa) {
  MatmulTuning tuning = default_matmul_tuning(isa);
  TuningProblem problem;
  TileScratch& scratch = tile_scratch();
  const Tile first_tile_of_16{0, 0, 16, kTile, kTile / kNr};

  // The small-row path at 16 rows: register passes of 6 or 12 rows over
  // blocks of kb weight rows.
  {
    const MatmulF32Args args = problem.args(16);
    std::vector<SkinnyBlocking> candidates = skinny_blocking_candidates(isa);
    MatmulTuning trial = tuning;
    const size_t best = fastest(candidates, [&](const SkinnyBlocking& c) {
      trial.skinny = c;
      matmul_f32_tile(isa, args, first_tile_of_16, scratch, trial);
    });
    tuning.skinny.kb = candidates[best].kb;
    tuning.skinny.wide = candidates[best].wide;
  }
  // The prefetch distance keeps its default: what it changes is reading
  // weights from memory, which a problem small enough to time here does not
  // do.
  // The many-row path on a full 64 x 64 tile.
  {
    const MatmulF32Args args = problem.args(kTile);
    const Tile tile{0, 0, kTile, kTile, kTile / kNr};
    const std::vector<GemmBlocking> candidates = gemm_blocking_candidates(isa);
    MatmulTuning trial = tuning;
    const size_t best = fastest(candidates, [&](const GemmBlocking& c) {
      trial.gemm = c;
      matmul_f32_tile(isa, args, tile, scratch, trial);
    });
    tuning.gemm = candidates[best];
  }
  return tuning;
}

// --- The cache file ------------------------------------------------------------

struct CacheFile {
  bool well_formed = false;  // false also when absent or unreadable
  std::map<std::string, std::string> entries;
};

CacheFile read_cache(const std::string& path) {
  CacheFile file;
  std::ifstream in(path, std::ios::binary);
  if (!in) return file;
  std::string text(static_cast<size_t>(kMaxCacheBytes) + 1, '\0');
  in.read(text.data(), kMaxCacheBytes + 1);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxCacheBytes)) return file;
  std::istringstream lines(text);
  std::string line;
  if (!std::getline(lines, line) || line != kCacheHeader) return file;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0 || line.find('\t', tab + 1) != std::string::npos) {
      return file;
    }
    file.entries[line.substr(0, tab)] = line.substr(tab + 1);
  }
  file.well_formed = true;
  return file;
}

// Replaces the file at once (a temporary file renamed over it), so that a
// reader in another process sees the old file or the new one.
void write_cache(const std::string& path, const std::map<std::string, std::string>& entries) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), error);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out << kCacheHeader << '\n';
    for (const auto& [key, value] : entries) out << key << '\t' << value << '\n';
    out.flush();
    if (!out) {
      out.close();
      fs::remove(temporary, error);
      return;
    }
  }
  fs::rename(temporary, target, error);
  if (error) fs::remove(temporary, error);
}

// Tunes build `isa` or reads its blocking back; never throws.
MatmulTuning establish(MatmulIsa isa, MatmulTuningSource* source) noexcept {
  *source = MatmulTuningSource::kDefaults;
  try {
    if (tuning_disabled()) return default_matmul_tuning(isa);
    const std::string path = matmul_tuning_cache_path();
    const std::string key = matmul_tuning_key(isa);
    CacheFile file;
    if (!path.empty()) {
      file = read_cache(path);
      if (file.well_formed) {
        const auto it = file.entries.find(key);
        MatmulTuning cached = default_matmul_tuning(isa);
        if (it != file.entries.end() && parse_matmul_tuning(it->second, &cached)) {
          *source = MatmulTuningSource::kCache;
          return cached;
        }
      } else {
        file.entries.clear();  // ignore a malformed file; it is rewritten below
      }
    }
    const MatmulTuning measured = measure(isa);
    *source = MatmulTuningSource::kMeasured;
    if (!path.empty()) {
      file.entries[key] = format_matmul_tuning(measured);
      write_cache(path, file.entries);
    }
    return measured;
  } catch (...) {
    *source = MatmulTuningSource::kDefaults;
    return default_matmul_tuning(isa);
  }
}

bool parse_int(const std::string& text, int* value) {
  if (text.empty() || text.size() > 6) return false;
  int v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *value = v;
  return true;
}

bool valid_depth(int depth) { return depth >= 8 && depth <= kKc && depth % 8 == 0; }

}  // namespace

MatmulTuning default_matmul_tuning(MatmulIsa isa) noexcept {
  MatmulTuning tuning;
  tuning.skinny.kb = 64;
  tuning.skinny.wide = 0;
  tuning.skinny.prefetch = 32;
  tuning.gemm.kc = isa == MatmulIsa::kAvx512 ? 128 : kKc;
  tuning.gemm.shape = 0;
  tuning.gemm.pack_x = 0;
  return tuning;
}

std::vector<SkinnyBlocking> skinny_blocking_candidates(MatmulIsa isa) {
  std::vector<SkinnyBlocking> candidates;
  for (int wide : {0, 1}) {
    if (wide == 1 && isa != MatmulIsa::kAvx512) continue;
    for (int kb : {64, 128, 256}) candidates.push_back(SkinnyBlocking{kb, wide});
  }
  return candidates;
}

std::vector<GemmBlocking> gemm_blocking_candidates(MatmulIsa isa) {
  std::vector<GemmBlocking> candidates;
  for (int shape : {0, 1}) {
    if (shape == 1 && isa != MatmulIsa::kAvx512) continue;
    for (int kc : {128, 256}) {
      for (int pack_x : {1, 0}) candidates.push_back(GemmBlocking{kc, shape, pack_x});
    }
  }
  return candidates;
}

const MatmulTuning& matmul_tuning(MatmulIsa isa) noexcept {
  Slot& slot = g_slots[static_cast<int>(isa)];
  if (slot.ready.load(std::memory_order_acquire)) return slot.tuning;
  std::lock_guard<std::mutex> lock(tuning_mutex());
  if (!slot.ready.load(std::memory_order_relaxed)) {
    MatmulTuningSource source;
    slot.tuning = establish(isa, &source);
    slot.source.store(static_cast<int>(source), std::memory_order_relaxed);
    slot.ready.store(true, std::memory_order_release);
  }
  return slot.tuning;
}

MatmulTuningSource matmul_tuning_source(MatmulIsa isa) noexcept {
  return static_cast<MatmulTuningSource>(
      g_slots[static_cast<int>(isa)].source.load(std::memory_order_relaxed));
}

std::string matmul_tuning_cache_path() {
  const char* explicit_path = std::getenv("AXRT_TUNING_CACHE");
  if (explicit_path != nullptr && explicit_path[0] != '\0') return explicit_path;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/axrt/matmul_tuning.txt";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') {
    return std::string(home) + "/.cache/axrt/matmul_tuning.txt";
  }
  return "";
}

std::string matmul_tuning_key(MatmulIsa isa) {
  return cpu_model() + "|" + matmul_isa_name(isa) + "|" + kKeyVersion;
}

std::string format_matmul_tuning(const MatmulTuning& tuning) {
  return "skinny_kb=" + std::to_string(tuning.skinny.kb) +
         " skinny_wide=" + std::to_string(tuning.skinny.wide) +
         " skinny_prefetch=" + std::to_string(tuning.skinny.prefetch) +
         " gemm_kc=" + std::to_string(tuning.gemm.kc) +
         " gemm_shape=" + std::to_string(tuning.gemm.shape) +
         " gemm_pack_x=" + std::to_string(tuning.gemm.pack_x);
}

bool parse_matmul_tuning(const std::string& text, MatmulTuning* tuning) {
  std::map<std::string, int> fields;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    const size_t equals = word.find('=');
    int value = 0;
    if (equals == std::string::npos || !parse_int(word.substr(equals + 1), &value)) return false;
    if (!fields.emplace(word.substr(0, equals), value).second) return false;
  }
  for (const char* name :
       {"skinny_kb", "skinny_wide", "skinny_prefetch", "gemm_kc", "gemm_shape", "gemm_pack_x"}) {
    if (fields.count(name) == 0) return false;
  }
  if (fields.size() != 6) return false;
  MatmulTuning parsed;
  parsed.skinny.kb = fields["skinny_kb"];
  parsed.skinny.wide = fields["skinny_wide"];
  parsed.skinny.prefetch = fields["skinny_prefetch"];
  parsed.gemm.kc = fields["gemm_kc"];
  parsed.gemm.shape = fields["gemm_shape"];
  parsed.gemm.pack_x = fields["gemm_pack_x"];
  if (!valid_depth(parsed.skinny.kb) || !valid_depth(parsed.gemm.kc) ||
      parsed.skinny.prefetch < 1 || parsed.skinny.prefetch > 128 ||
      (parsed.skinny.wide != 0 && parsed.skinny.wide != 1) ||
      (parsed.gemm.shape != 0 && parsed.gemm.shape != 1) ||
      (parsed.gemm.pack_x != 0 && parsed.gemm.pack_x != 1)) {
    return false;
  }
  *tuning = parsed;
  return true;
}

void reset_matmul_tuning_for_testing() noexcept {
  std::lock_guard<std::mutex> lock(tuning_mutex());
  for (Slot& slot : g_slots) {
    slot.ready.store(false, std::memory_order_relaxed);
    slot.source.store(static_cast<int>(MatmulTuningSource::kNotYet), std::memory_order_relaxed);
  }
}

int set_matmul_tuning_rounds_for_testing(int rounds) noexcept {
  return g_rounds.exchange(rounds <= 0 ? kRounds : rounds, std::memory_order_relaxed);
}

void set_matmul_tuning_for_testing(MatmulIsa isa, const MatmulTuning& tuning) noexcept {
  std::lock_guard<std::mutex> lock(tuning_mutex());
  Slot& slot = g_slots[static_cast<int>(isa)];
  slot.tuning = tuning;
  slot.source.store(static_cast<int>(MatmulTuningSource::kDefaults), std::memory_order_relaxed);
  slot.ready.store(true, std::memory_order_release);
}

}  // namespace axrt::kernels::cpu
