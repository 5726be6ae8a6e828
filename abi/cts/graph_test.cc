// Graphs (executable.h, axrt_function_capture): a call captured once and
// replayed, whether the driver makes it a graph of its own or resubmits it.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "abi/cts/cts_fixture.h"
#include "abi/cts/cts_kernel_library.h"
#include "tests/support/axe_test_builder.h"

namespace axrt_cts {
namespace {

using namespace axrt_test;

constexpr int64_t kN = 100;
constexpr uint32_t kFillWord = 0x01020304u;

class GraphTest : public DeviceTest {
 public:
  GraphTest() { REQUIRE_OK(axrt_instance_register_kernel_library(instance(), CtsKernelLibrary())); }

  // "chain" over x, y [n] (n symbolic, at most 1000): t = 2x + y in the
  // arena, out = 2t + y = 4x + 3y, head = the first four of t (a copy out
  // of the arena), mark = kFillWord eight times (a fill).
  Executable ChainExecutable() {
    AxeBuilder b("axrt conformance suite", "1");
    const uint32_t lib = b.AddLibrary("cts.kernels", 1);
    const uint32_t k = b.AddKernel(
        "axpy", lib, "cts_axpy",
        {BufferParam("x"), BufferParam("y"), BufferParam("out", AXRT_AXE_ACCESS_WRITE),
         ScalarParam("n", AXRT_AXE_DTYPE_UINT64), ScalarParam("alpha", AXRT_AXE_DTYPE_FLOAT32)});
    const uint32_t f = b.AddFunction("chain", {{"n", 1000}},
                                     {{"x", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}},
                                      {"y", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}}},
                                     {{"out", AXRT_AXE_DTYPE_FLOAT32, {Symbolic(0)}},
                                      {"head", AXRT_AXE_DTYPE_FLOAT32, {Fixed(4)}},
                                      {"mark", AXRT_AXE_DTYPE_UINT32, {Fixed(8)}}},
                                     4000);
    const Expr groups = CeilDiv(Sym(0), kCtsElementsPerWorkgroup);
    b.Dispatch(f, k, {groups},
               {BindInput(0), BindInput(1), BindArena(0, 4000), BindScalar(Sym(0)),
                BindScalar(F32(2.0f))});
    b.Dispatch(f, k, {groups},
               {BindArena(0, 4000), BindInput(1), BindOutput(0), BindScalar(Sym(0)),
                BindScalar(F32(2.0f))});
    b.Copy(f, BindArena(0, 4000), Lit(0), BindOutput(1), Lit(0), Lit(16));
    b.Fill(f, BindOutput(2), Lit(0), Lit(32), kFillWord, 4);
    Executable exe;
    REQUIRE_OK(LoadBytes(device(), b.Bytes(), 0, Out(exe)));
    return exe;
  }

  Function Find(axrt_executable_t exe) {
    Function function;
    REQUIRE_OK(axrt_executable_find_function(exe, "chain", Out(function)));
    return function;
  }
};

std::vector<float> Values(int64_t n, float scale, float offset) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(i) + offset;
  return v;
}

TEST_CASE_METHOD(GraphTest,
                 "graph: replays give the call's results, with the inputs "
                 "written between them in stream order",
                 "[cts][graph]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  Executable exe = ChainExecutable();
  Function fn = Find(exe.get());
  Stream stream = NewStream();
  Buffer xb = NewBuffer(kN * 4), yb = NewBuffer(kN * 4), ob = NewBuffer(kN * 4), hb = NewBuffer(16),
         mb = NewBuffer(32);
  Tensor x = TensorOver(xb.get(), AXRT_DTYPE_FLOAT32, {kN}),
         y = TensorOver(yb.get(), AXRT_DTYPE_FLOAT32, {kN});
  Tensor out = TensorOver(ob.get(), AXRT_DTYPE_FLOAT32, {kN}),
         head = TensorOver(hb.get(), AXRT_DTYPE_FLOAT32, {4});
  Tensor mark = TensorOver(mb.get(), AXRT_DTYPE_UINT32, {8});
  axrt_tensor_t inputs[] = {x.get(), y.get()};
  axrt_tensor_t outputs[] = {out.get(), head.get(), mark.get()};
  Graph graph;
  REQUIRE_OK(
      axrt_function_capture(fn.get(), stream.get(), inputs, 2, outputs, 3, nullptr, Out(graph)));
  axrt_graph_info_t info = AXRT_GRAPH_INFO_INIT;
  REQUIRE_OK(axrt_graph_query_info(graph.get(), &info));
  CHECK(info.command_count == 4);
  CHECK(info.arena_bytes == 4000);
  CHECK(std::string(info.label) == "function 'chain' of executable '<memory>' (graph)");
  CHECK((info.native == 0 || info.native == 1));

  // Capturing queues nothing: the outputs keep what they held.
  const std::vector<float> sentinel(kN, -7.0f);
  REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), sentinel.data(), ob.get(), 0, kN * 4));
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(ReadAs<float>(*this, out.get()) == sentinel);

  // Rounds queued back to back: new inputs, a replay, the results copied
  // out; nothing waits in between.
  constexpr int kRounds = 6;
  std::vector<std::vector<float>> xs, ys, outs(kRounds, std::vector<float>(kN)),
      heads(kRounds, std::vector<float>(4));
  std::vector<std::vector<uint32_t>> marks(kRounds, std::vector<uint32_t>(8));
  for (int r = 0; r < kRounds; ++r) {
    xs.push_back(Values(kN, 0.5f * static_cast<float>(r + 1), static_cast<float>(r)));
    ys.push_back(Values(kN, -1.0f, 3.0f * static_cast<float>(r)));
  }
  for (int r = 0; r < kRounds; ++r) {
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), xs[r].data(), xb.get(), 0, kN * 4));
    REQUIRE_OK(axrt_stream_copy_from_host(stream.get(), ys[r].data(), yb.get(), 0, kN * 4));
    const uint32_t zero = 0;
    if (r == 2) REQUIRE_OK(axrt_stream_fill_buffer(stream.get(), mb.get(), 0, 32, &zero, 4));
    REQUIRE_OK(axrt_graph_replay(graph.get()));
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), ob.get(), 0, outs[r].data(), kN * 4));
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), hb.get(), 0, heads[r].data(), 16));
    REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), mb.get(), 0, marks[r].data(), 32));
  }
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  for (int r = 0; r < kRounds; ++r) {
    INFO("round " << r);
    for (size_t i = 0; i < static_cast<size_t>(kN); ++i) {
      const float t = 2.0f * xs[r][i] + ys[r][i];
      CHECK(outs[r][i] == 2.0f * t + ys[r][i]);
      if (i < 4) CHECK(heads[r][i] == t);
    }
    CHECK(marks[r] == std::vector<uint32_t>(8, kFillWord));
  }

  // A call of the function gives the same bits as the last replay.
  axrt_tensor_t called[] = {nullptr, nullptr, nullptr};
  REQUIRE_OK(axrt_function_invoke(fn.get(), stream.get(), inputs, 2, called, 3, nullptr));
  Tensor c0(called[0]), c1(called[1]), c2(called[2]);
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  CHECK(ReadAs<float>(*this, c0.get()) == outs[kRounds - 1]);
  CHECK(ReadAs<float>(*this, c1.get()) == heads[kRounds - 1]);
}

TEST_CASE_METHOD(GraphTest,
                 "graph: replays queued before the graph and its tensors are "
                 "released still run",
                 "[cts][graph]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  Executable exe = ChainExecutable();
  Function fn = Find(exe.get());
  Stream stream = NewStream();
  const std::vector<float> xv = Values(37, 1.0f, 0.0f), yv = Values(37, 0.0f, 1.0f);
  Tensor x = NewTensor(*this, AXRT_DTYPE_FLOAT32, {37}, xv.data());
  Tensor y = NewTensor(*this, AXRT_DTYPE_FLOAT32, {37}, yv.data());
  Buffer ob = NewBuffer(37 * 4);
  Tensor out = TensorOver(ob.get(), AXRT_DTYPE_FLOAT32, {37});
  Tensor head = NewTensor(*this, AXRT_DTYPE_FLOAT32, {4});
  Tensor mark = NewTensor(*this, AXRT_DTYPE_UINT32, {8});
  axrt_tensor_t inputs[] = {x.get(), y.get()};
  axrt_tensor_t outputs[] = {out.get(), head.get(), mark.get()};
  Graph graph;
  REQUIRE_OK(
      axrt_function_capture(fn.get(), stream.get(), inputs, 2, outputs, 3, nullptr, Out(graph)));
  for (int r = 0; r < 3; ++r) REQUIRE_OK(axrt_graph_replay(graph.get()));
  std::vector<float> got(37);
  REQUIRE_OK(axrt_stream_copy_to_host(stream.get(), ob.get(), 0, got.data(), 37 * 4));
  const axrt_graph_t released = graph.get();
  graph.reset();
  x.reset();
  y.reset();
  out.reset();
  head.reset();
  mark.reset();
  fn.reset();
  exe.reset();
  REQUIRE_OK(axrt_stream_synchronize(stream.get()));
  for (size_t i = 0; i < 37; ++i) CHECK(got[i] == 4.0f * xv[i] + 3.0f * yv[i]);
  CHECK_STATUS(axrt_graph_replay(released), AXRT_STATUS_CODE_FAILED_PRECONDITION,
               "released handle");
}

TEST_CASE_METHOD(GraphTest, "graph: a kernel that fails in a replay fails the stream",
                 "[cts][graph]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  AxeBuilder b;
  const uint32_t lib = b.AddLibrary("cts.kernels");
  const uint32_t k = b.AddKernel("failing", lib, "cts_fail",
                                 {BufferParam("out", AXRT_AXE_ACCESS_WRITE),
                                  ScalarParam("failing_workgroup", AXRT_AXE_DTYPE_UINT32)});
  const uint32_t f = b.AddFunction("main", {}, {}, {{"out", AXRT_AXE_DTYPE_UINT32, {Fixed(8)}}});
  b.Fill(f, BindOutput(0), Lit(0), Lit(32), 0, 4);
  b.Dispatch(f, k, {Lit(8)}, {BindOutput(0), BindScalar(Lit(5))});
  Executable exe;
  REQUIRE_OK(LoadBytes(device(), b.Bytes(), 0, Out(exe)));
  Function fn;
  REQUIRE_OK(axrt_executable_find_function(exe.get(), "main", Out(fn)));
  Stream stream = NewStream();
  Tensor out = NewTensor(*this, AXRT_DTYPE_UINT32, {8});
  axrt_tensor_t outputs[] = {out.get()};
  Graph graph;
  REQUIRE_OK(
      axrt_function_capture(fn.get(), stream.get(), nullptr, 0, outputs, 1, nullptr, Out(graph)));
  REQUIRE_OK(axrt_graph_replay(graph.get()));
  CHECK_STATUS(axrt_stream_synchronize(stream.get()), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "workgroup 5 was told to fail");
  // Sticky, as for calls.
  REQUIRE_OK(axrt_graph_replay(graph.get()));
  CHECK_STATUS(axrt_stream_synchronize(stream.get()), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "workgroup 5 was told to fail");
}

TEST_CASE_METHOD(GraphTest, "graph: bad captures are refused, naming what is wrong",
                 "[cts][graph]") {
  CTS_REQUIRE_FEATURE(Feature::kHostKernels);
  Executable exe = ChainExecutable();
  Function fn = Find(exe.get());
  Stream stream = NewStream();
  Tensor x = NewTensor(*this, AXRT_DTYPE_FLOAT32, {kN}),
         y = NewTensor(*this, AXRT_DTYPE_FLOAT32, {kN});
  Tensor shorter = NewTensor(*this, AXRT_DTYPE_FLOAT32, {kN - 1});
  Tensor out = NewTensor(*this, AXRT_DTYPE_FLOAT32, {kN});
  Tensor head = NewTensor(*this, AXRT_DTYPE_FLOAT32, {4});
  Tensor mark = NewTensor(*this, AXRT_DTYPE_UINT32, {8});
  axrt_tensor_t inputs[] = {x.get(), y.get()};
  axrt_tensor_t outputs[] = {out.get(), head.get(), mark.get()};
  axrt_graph_t graph = reinterpret_cast<axrt_graph_t>(uintptr_t{1});
  axrt_tensor_t missing[] = {out.get(), nullptr, mark.get()};
  CHECK_STATUS(
      axrt_function_capture(fn.get(), stream.get(), inputs, 2, missing, 3, nullptr, &graph),
      AXRT_STATUS_CODE_INVALID_ARGUMENT, "`outputs[1]` ('head' of function 'chain'");
  CHECK(graph == nullptr);
  axrt_tensor_t mismatched[] = {x.get(), shorter.get()};
  CHECK_STATUS(
      axrt_function_capture(fn.get(), stream.get(), mismatched, 2, outputs, 3, nullptr, &graph),
      AXRT_STATUS_CODE_INVALID_ARGUMENT, "");
  CHECK_STATUS(
      axrt_function_capture(fn.get(), stream.get(), inputs, 1, outputs, 3, nullptr, &graph),
      AXRT_STATUS_CODE_INVALID_ARGUMENT, "takes 2 inputs and 3 outputs");
  int reserved = 0;
  CHECK_STATUS(
      axrt_function_capture(fn.get(), stream.get(), inputs, 2, outputs, 3, &reserved, &graph),
      AXRT_STATUS_CODE_INVALID_ARGUMENT, "`options` is reserved");
  CHECK_STATUS(
      axrt_function_capture(fn.get(), stream.get(), inputs, 2, outputs, 3, nullptr, nullptr),
      AXRT_STATUS_CODE_INVALID_ARGUMENT, "`out_graph` is NULL");
  CHECK_STATUS(axrt_graph_replay(nullptr), AXRT_STATUS_CODE_INVALID_ARGUMENT, "`graph` is NULL");
  axrt_graph_info_t info = AXRT_GRAPH_INFO_INIT;
  CHECK_STATUS(axrt_graph_query_info(nullptr, &info), AXRT_STATUS_CODE_INVALID_ARGUMENT,
               "`graph` is NULL");
  axrt_graph_retain(nullptr);  // ignored, as for every handle
  axrt_graph_release(nullptr);
}

}  // namespace
}  // namespace axrt_cts
