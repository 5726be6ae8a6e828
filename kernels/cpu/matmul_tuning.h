// The matmul autotuner (docs/kernels.md, "Tuning"): on first use per
// instruction-set build it times a few blockings of the small-row and the
// many-row paths on a small f32 problem, keeps the fastest, and caches the
// choice on disk per CPU model and build, so later processes read it back.
//
// Environment (read when a build is first tuned):
//   AXRT_TUNING=off         use the defaults; no timing, no file access
//   AXRT_TUNING_CACHE=PATH  the cache file (default:
//                           $XDG_CACHE_HOME/axrt/matmul_tuning.txt, else
//                           $HOME/.cache/axrt/matmul_tuning.txt)
// A cache that cannot be read or written is skipped, and a malformed one is
// ignored (the build is timed again and the file rewritten): tuning never
// fails a kernel. Every candidate computes the same sums in f32 in another
// order, so the choice stays within the accuracy bound of docs/kernels.md.
#ifndef AXRT_KERNELS_CPU_MATMUL_TUNING_H_
#define AXRT_KERNELS_CPU_MATMUL_TUNING_H_

#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/skinny_matmul.h"

namespace axrt::kernels::cpu {

struct MatmulTuning {
  SkinnyBlocking skinny;
  GemmBlocking gemm;
};

// The blocking used without tuning.
MatmulTuning default_matmul_tuning(MatmulIsa isa) noexcept;

// The blocking of build `isa`. The first call per build tunes it or reads
// the cache; concurrent first calls wait for that one. Thread-safe; the
// reference stays valid for the life of the process.
const MatmulTuning& matmul_tuning(MatmulIsa isa) noexcept;

// Where the blocking of a build came from.
enum class MatmulTuningSource { kNotYet, kDefaults, kCache, kMeasured };
MatmulTuningSource matmul_tuning_source(MatmulIsa isa) noexcept;

// The cache file the environment names now ("" when there is none), and the
// key of a build's entry in it: the CPU model, the build and the format.
std::string matmul_tuning_cache_path();
std::string matmul_tuning_key(MatmulIsa isa);

// Serialises a blocking as a cache entry's value, and parses one back
// (false, leaving `tuning` alone, on anything malformed or out of range).
std::string format_matmul_tuning(const MatmulTuning& tuning);
bool parse_matmul_tuning(const std::string& text, MatmulTuning* tuning);

// Forgets every build's blocking, so that the next use tunes again, and
// sets one build's blocking outright. Tests only, with no kernel running.
void reset_matmul_tuning_for_testing() noexcept;
void set_matmul_tuning_for_testing(MatmulIsa isa, const MatmulTuning& tuning) noexcept;
// The timed rounds of every candidate when tuning (default 5; 0 restores it);
// returns the previous count. Tests of the cache, which need a measurement but
// not a good one, take one round.
int set_matmul_tuning_rounds_for_testing(int rounds) noexcept;

// The candidates the tuner times for a build, for each path: every blocking
// it may choose.
std::vector<SkinnyBlocking> skinny_blocking_candidates(MatmulIsa isa);
std::vector<GemmBlocking> gemm_blocking_candidates(MatmulIsa isa);

// One tile of axrt_matmul_f32 with the given blocking (matmul.cc): what the
// tuner times.
void matmul_f32_tile(MatmulIsa isa, const MatmulF32Args& args, const Tile& tile,
                     TileScratch& scratch, const MatmulTuning& tuning) noexcept;

}  // namespace axrt::kernels::cpu

#endif  // AXRT_KERNELS_CPU_MATMUL_TUNING_H_
