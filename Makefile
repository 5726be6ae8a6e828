# The two commands of the quick start: `make demo` and `make test`.
# Both install what is missing, configure into build/, build and run.

BUILD_DIR   ?= build/release
ASAN_DIR    ?= build/asan
TSAN_DIR    ?= build/tsan
BENCH_DIR   ?= build/bench
FUZZ_DIR    ?= build/fuzz
# How long `make fuzz` runs the fuzzer, and the short run `make test` does.
FUZZ_SECONDS       ?= 600
FUZZ_SMOKE_SECONDS ?= 30
CMAKE       ?= cmake
JOBS        ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-release test-asan test-tsan fuzz fuzz-smoke fuzz-build bench soak install clean abi-baseline

all: build

deps:
	@./tools/bootstrap.sh

build: deps
	$(CMAKE) -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

# The MLP that axrt_mlp_compiler wrote during the build (int8 and AWQ int4
# weights, CPU kernels plus CUDA variants when nvcc was found), run and
# checked on the default device (AXRT_DEVICE, else cpu:0).
demo: build
	$(BUILD_DIR)/examples/c/axrt_mlp $(BUILD_DIR)/examples/mlp.axe $(BUILD_DIR)/examples/mlp.ref

test: test-release test-asan test-tsan fuzz-smoke

test-release: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# Rewrites abi/baseline/libaxrt.abi from the built library: after a
# compatible change of the C ABI, in the same commit (the abi.gate test
# fails until then; abi/check_abi.sh).
abi-baseline: build
	$(CMAKE) --build $(BUILD_DIR) --target axrt_abi_baseline

# The unit tests and the conformance suite again under ASan + UBSan.
test-asan: deps
	$(CMAKE) -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DAXRT_SANITIZE=address,undefined -DAXRT_BUILD_EXAMPLES=OFF -DAXRT_BUILD_CUDA_KERNELS=OFF $(CMAKE_FLAGS)
	$(CMAKE) --build $(ASAN_DIR) -j $(JOBS) --target axrt_sanitized_tests
	ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS) -L sanitized

# The multi-threaded tests (label `threaded`) again under ThreadSanitizer:
# streams, events, pools and drivers are concurrent code, and a race must
# fail the run.
test-tsan: deps
	$(CMAKE) -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DAXRT_SANITIZE=thread -DAXRT_BUILD_EXAMPLES=OFF -DAXRT_BUILD_CUDA_KERNELS=OFF $(CMAKE_FLAGS)
	$(CMAKE) --build $(TSAN_DIR) -j $(JOBS) --target axrt_threaded_tests
	TSAN_OPTIONS=halt_on_error=1 ctest --test-dir $(TSAN_DIR) --output-on-failure -j $(JOBS) -L threaded

# The .axe reader under libFuzzer (clang, ASan + UBSan) in a tree of its own;
# fuzz/run.sh seeds the corpus, runs, and on a finding names the reproducer.
fuzz-build: deps
	$(CMAKE) -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DAXRT_BUILD_FUZZERS=ON \
	  -DAXRT_BUILD_TESTS=OFF -DAXRT_BUILD_EXAMPLES=OFF -DAXRT_DRIVER_CUDA=OFF \
	  -DAXRT_BUILD_CUDA_KERNELS=OFF $(CMAKE_FLAGS)
	$(CMAKE) --build $(FUZZ_DIR) -j $(JOBS) --target axe_reader_fuzzer

# The seed files come from the ordinary build's axrt_make_test_files.
FUZZ_SEEDS_TOOL = $(BUILD_DIR)/tests/cli/axrt_make_test_files

fuzz: fuzz-build build
	SEEDS_TOOL=$(FUZZ_SEEDS_TOOL) ./fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

fuzz-smoke: fuzz-build build
	SEEDS_TOOL=$(FUZZ_SEEDS_TOOL) ./fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SMOKE_SECONDS)

# The language-model benchmark needs torch and transformers; LLAMA_CPP_SOURCE,
# a llama.cpp source tree, adds llama.cpp's rows (docs/performance.md).
bench: deps
	$(CMAKE) -S . -B $(BENCH_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DAXRT_BUILD_BENCHMARKS=ON -DAXRT_BUILD_TESTS=OFF -DAXRT_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS)
	$(CMAKE) --build $(BENCH_DIR) -j $(JOBS)
	$(BENCH_DIR)/tests/bench/axrt_bench --benchmark_counters_tabular=true
	$(BENCH_DIR)/tests/bench/axrt_kernel_bench --benchmark_counters_tabular=true
	$(BENCH_DIR)/tests/bench/axrt_cuda_bench --benchmark_counters_tabular=true
	PYTHONPATH=$(BENCH_DIR)/python python3 tests/bench/python_bench.py
	PYTHONPATH=$(BENCH_DIR)/python python3 tests/bench/matmul_vs_onnxruntime.py \
	  --kernel-bench $(BENCH_DIR)/tests/bench/axrt_matmul_kernel_bench
	@if python3 -c "import torch, transformers" 2>/dev/null; then \
	  PYTHONPATH=$(BENCH_DIR)/python python3 tests/bench/serving_bench.py || exit 1; \
	  echo PYTHONPATH=$(BENCH_DIR)/python python3 tests/bench/llm_bench.py; \
	  PYTHONPATH=$(BENCH_DIR)/python python3 tests/bench/llm_bench.py \
	    $(if $(LLAMA_CPP_SOURCE),--llama-cpp-source $(LLAMA_CPP_SOURCE)); \
	else echo "llm_bench: skipped (torch and transformers are not importable)"; fi

# The exit stress tests of the Python package (tests/python/test_exit.py) at
# length and under load: programs that exit with work in flight, 200 runs
# per case, 3 at a time, beside 2 busy processes. One failure is a crash a
# user's program can hit at exit. AXRT_EXIT_RUNS, AXRT_EXIT_PARALLEL and
# AXRT_EXIT_HOGS from the environment override the defaults.
soak: build
	AXRT_EXIT_RUNS=$${AXRT_EXIT_RUNS:-200} AXRT_EXIT_PARALLEL=$${AXRT_EXIT_PARALLEL:-3} \
	  AXRT_EXIT_HOGS=$${AXRT_EXIT_HOGS:-2} PYTHONPATH=$(abspath $(BUILD_DIR))/python \
	  AXRT_MOCK_CUDA_LIBRARY=$(abspath $(BUILD_DIR))/tests/mock_cuda/libaxrt_mock_cuda.so \
	  python3 -m pytest -q -p no:cacheprovider tests/python/test_exit.py

install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf build
