// The serving engine's stand-in model: `step` and `sample` with the
// serving contract's signatures (docs/serving.md) whose commands are fills,
// every logit 0 and every token kToken, so that the engine's
// lifecycle runs fast and under the sanitizers (serving_engine_test,
// fault_injection_test).
#ifndef AXRT_TESTS_UNIT_STAND_IN_MODEL_H_
#define AXRT_TESTS_UNIT_STAND_IN_MODEL_H_

#include <cstdint>
#include <vector>

#include "tests/support/axe_test_builder.h"

namespace axrt_test {

inline constexpr uint64_t kVocab = 16;
inline constexpr uint64_t kBlockSize = 4;
inline constexpr uint64_t kMaxBlocks = 4;  // the longest sequence: 16 tokens
inline constexpr int32_t kToken = 3;       // what the stand-in samples

// The stand-in `sample`: every token kToken.
inline void AddStandInSample(AxeBuilder& b) {
  const uint32_t sample = b.AddFunction(
      "sample", {{"S", 8}},
      {{"logits", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0), Fixed(kVocab)}},
       {"temperature", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}},
       {"top_k", AXRT_AXE_DTYPE_INT32, {Symbolic(0)}},
       {"top_p", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}},
       {"seeds", AXRT_AXE_DTYPE_UINT64, {Symbolic(0)}},
       {"positions", AXRT_AXE_DTYPE_INT32, {Symbolic(0)}}},
      {{"tokens", AXRT_AXE_DTYPE_INT32, {Symbolic(0)}}});
  b.Fill(sample, BindOutput(0), Lit(0), Sym(0) * Lit(4), kToken, 4);
}

// The stand-in `process_logits` (the serving contract's, docs/serving.md):
// the built-in axrt_logits_process_f32 over the engine's rows. The stand-in
// `sample` ignores the logits: what the tests see is that the engine calls
// it with lists the kernel takes.
inline void AddStandInProcess(AxeBuilder& b) {
  enum { S, E };
  auto row = [](const char* name) {
    return Sig{name, AXRT_AXE_DTYPE_FLOAT32, {Symbolic(S)}};
  };
  auto entries = [](const char* name, axrt_axe_dtype_t dtype) {
    return Sig{name, dtype, {Symbolic(S), Symbolic(E)}};
  };
  Sig logits{"logits", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(S), Fixed(kVocab)}};
  logits.is_mutable = true;
  const uint32_t process = b.AddFunction(
      "process_logits", {{"S", 8}, {"E", kVocab}},
      {logits, row("temperature"), row("repetition_penalty"), row("frequency_penalty"),
       row("presence_penalty"), row("min_p"), entries("entry_tokens", AXRT_AXE_DTYPE_INT32),
       entries("entry_counts", AXRT_AXE_DTYPE_INT32),
       entries("entry_in_prompt", AXRT_AXE_DTYPE_INT32),
       entries("entry_bias", AXRT_AXE_DTYPE_FLOAT32)},
      {});
  std::vector<Param> params = {BufferParam("logits", AXRT_AXE_ACCESS_READ_WRITE)};
  for (const char* name : {"temperature", "repetition_penalty", "frequency_penalty",
                           "presence_penalty", "min_p", "entry_tokens", "entry_counts",
                           "entry_in_prompt", "entry_bias"}) {
    params.push_back(BufferParam(name));
  }
  for (const char* name : {"B", "V", "E"}) {
    params.push_back(ScalarParam(name, AXRT_AXE_DTYPE_UINT64));
  }
  const uint32_t kernel =
      b.AddKernel("process", b.AddLibrary("axrt.cpu", 1), "axrt_logits_process_f32", params);
  std::vector<Binding> bindings;
  for (uint32_t i = 0; i < 10; ++i) bindings.push_back(BindInput(i));
  bindings.push_back(BindScalar(Sym(S)));
  bindings.push_back(BindScalar(Lit(kVocab)));
  bindings.push_back(BindScalar(Sym(E)));
  b.Dispatch(process, kernel, {Sym(S)}, bindings);
}

// With `process`, the file has `process_logits` too (else it is one
// converted before the function existed).
inline std::vector<uint8_t> StandInModel(bool process = false) {
  AxeBuilder b;
  enum { T, S, NB };
  const std::vector<SymbolDecl> symbols = {{"T", 64}, {"S", 8}, {"NB", 1 << 20}};
  const uint32_t step = b.AddFunction(
      "step", symbols,
      {{"tokens", AXRT_AXE_DTYPE_INT32, {Symbolic(T)}},
       {"positions", AXRT_AXE_DTYPE_INT32, {Symbolic(T)}},
       {"block_tables", AXRT_AXE_DTYPE_INT32, {Symbolic(T), Fixed(kMaxBlocks)}},
       {"logit_rows", AXRT_AXE_DTYPE_INT32, {Symbolic(S)}},
       {"kv_cache",
        AXRT_AXE_DTYPE_FLOAT32,
        {Fixed(2), Fixed(2), Symbolic(NB), Fixed(1), Fixed(kBlockSize), Fixed(8)}}},
      {{"logits", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(S), Fixed(kVocab)}}});
  b.Fill(step, BindOutput(0), Lit(0), Sym(S) * Lit(kVocab * 4), 0, 4);
  AddStandInSample(b);
  if (process) AddStandInProcess(b);
  return b.Bytes();
}

// Rank `rank`'s shard of a stand-in tensor-parallel set of `members`: its
// `step` fills its part of the logits' rows with rank + 1 and all-reduces
// them over the channel "tensor_parallel", so that rank 0's logits are
// 1 + 2 + ... + members everywhere; rank 0 returns them and holds `sample`.
inline std::vector<uint8_t> StandInShard(uint32_t rank, uint32_t members) {
  AxeBuilder b;
  enum { T, S, NB };
  const std::vector<SymbolDecl> symbols = {{"T", 64}, {"S", 8}, {"NB", 1 << 20}};
  const uint64_t rows_bytes = 8 * kVocab * 4;
  std::vector<Sig> outputs;
  if (rank == 0) outputs.push_back({"logits", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(S), Fixed(kVocab)}});
  const uint32_t step = b.AddFunction(
      "step", symbols,
      {{"tokens", AXRT_AXE_DTYPE_INT32, {Symbolic(T)}},
       {"positions", AXRT_AXE_DTYPE_INT32, {Symbolic(T)}},
       {"block_tables", AXRT_AXE_DTYPE_INT32, {Symbolic(T), Fixed(kMaxBlocks)}},
       {"logit_rows", AXRT_AXE_DTYPE_INT32, {Symbolic(S)}},
       {"kv_cache",
        AXRT_AXE_DTYPE_FLOAT32,
        {Fixed(2), Fixed(2), Symbolic(NB), Fixed(1), Fixed(kBlockSize), Fixed(8)}}},
      outputs, rows_bytes, {{"tensor_parallel", members}});
  const float value = static_cast<float>(rank + 1);
  uint32_t bits = 0;
  static_assert(sizeof bits == sizeof value);
  __builtin_memcpy(&bits, &value, sizeof bits);
  b.Fill(step, BindArena(0, rows_bytes), Lit(0), Sym(S) * Lit(kVocab * 4), bits, 4);
  b.Collective(step, AXRT_AXE_COLLECTIVE_ALL_REDUCE, 0, AXRT_AXE_DTYPE_FLOAT32,
               Sym(S) * Lit(kVocab), BindArena(0, rows_bytes), BindArena(0, rows_bytes));
  if (rank == 0) {
    b.Copy(step, BindArena(0, rows_bytes), Lit(0), BindOutput(0), Lit(0),
           Sym(S) * Lit(kVocab * 4));
    AddStandInSample(b);
  }
  return b.Bytes();
}

}  // namespace axrt_test

#endif  // AXRT_TESTS_UNIT_STAND_IN_MODEL_H_
