# The two commands of the quick start: `make demo` and `make test`.
# Both install what is missing (tools/bootstrap.sh), configure into build/,
# build and run: `make demo` with only what building needs, `make test` with
# the test tools and the tests' own Python environment ($(VENV)).

BUILD_DIR   ?= build/release
ASAN_DIR    ?= build/asan
TSAN_DIR    ?= build/tsan
BENCH_DIR   ?= build/bench
FUZZ_DIR    ?= build/fuzz
# The Python environment every Python test, tool and benchmark runs in
# (docs/testing.md); tools/bootstrap.sh makes and refreshes it.
VENV        ?= build/venv
# How long `make fuzz` runs the fuzzer, and the short run `make test` does.
FUZZ_SECONDS       ?= 600
FUZZ_SMOKE_SECONDS ?= 15
CMAKE       ?= cmake
JOBS        ?= $(shell nproc)
CMAKE_FLAGS ?=

# The interpreter the environment is made from (any Python 3.9 or later).
BASE_PYTHON ?= python3

export AXRT_VENV := $(abspath $(VENV))
VENV_PYTHON := $(AXRT_VENV)/bin/python
BOOTSTRAP = PYTHON=$(BASE_PYTHON) ./tools/bootstrap.sh
# The module builds for the environment's interpreter, with its pybind11,
# and the tests run in it: never with whichever python3 the PATH holds.
TEST_PYTHON_FLAGS = -DAXRT_TEST_PYTHON=$(VENV_PYTHON)
PYTHON_FLAGS = -DPython_EXECUTABLE=$(VENV_PYTHON) $(TEST_PYTHON_FLAGS)
# The sanitizer trees are built with clang, whose sanitizers are the
# reference ones and which builds them in about two thirds of GCC's time;
# they keep line tables only (enough for every report's stack, for a sixth
# less compile time than full debug information), precompile the headers
# the library's files share (cmake/axrt_precompile_headers.cmake) and leave
# out the AVX-512 builds of the CPU matmul bodies (the release tree runs
# them where the CPU has AVX-512). The
# release tree builds with the default compiler, as installs do.
SANITIZER_TREE = -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	-DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DAXRT_PRECOMPILE_HEADERS=ON \
	-DAXRT_CPU_AVX512_BODIES=OFF

.PHONY: all deps deps-build deps-test deps-bench venv venv-build build demo test test-release test-asan \
	test-tsan test-summary fuzz fuzz-smoke fuzz-build bench soak soak-build install clean \
	abi-baseline gpu-bundle gpu-check

all: build

# What building needs (Debian packages only).
deps-build:
	@$(BOOTSTRAP) build

# What testing needs: the Debian packages (deps-test) and $(VENV) (venv),
# whose first step (venv-build: what building the module needs) takes
# seconds and the rest, minutes.
deps: deps-test venv
deps-test:
	@$(BOOTSTRAP) test --packages
venv-build: deps-test
	@$(BOOTSTRAP) test --venv-build
venv: venv-build
	@$(BOOTSTRAP) test --venv

# What the benchmarks need on top: Google Benchmark, OpenBLAS and the anchors.
deps-bench:
	@$(BOOTSTRAP) bench

# The whole tree: library, tool, examples, tests and the Python module.
build: venv-build
	$(CMAKE) -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DAXRT_BUILD_TESTS=ON -DAXRT_BUILD_PYTHON=ON $(PYTHON_FLAGS) $(CMAKE_FLAGS)
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

# The one GPU command (docs/gpu-validation.md): `make gpu-bundle` on a build
# machine (after `make test`) makes build/gpu-bundle (bundle.tar.xz): a
# Release build with relative run paths, the CUDA kernels and the test
# models, packed; carried with the
# tree to a GPU machine, `make gpu-check` runs every GPU check from it and
# writes the results under $(GPU_CHECK_OUT). GPU_CHECK_FLAGS=--mock rehearses
# it on the mock Driver API.
GPU_CHECK_OUT   ?= build/gpu-check
GPU_CHECK_FLAGS ?=
gpu-bundle:
	@tools/gpu_bundle.sh
gpu-check:
	@tools/gpu_check.sh --out $(if $(OUT),$(OUT),$(GPU_CHECK_OUT)) $(GPU_CHECK_FLAGS)

# The MLP that axrt_mlp_compiler wrote during the build (int8 and AWQ int4
# weights, CPU kernels plus CUDA variants when nvcc was found), run and
# checked on the default device (AXRT_DEVICE, else cpu:0).
# A tree that `make test` has not configured yet gets neither the tests nor
# the Python module; only the demo's targets are built either way.
demo: deps-build
	@if [ ! -f $(BUILD_DIR)/CMakeCache.txt ]; then \
	  echo $(CMAKE) -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DAXRT_BUILD_TESTS=OFF -DAXRT_BUILD_PYTHON=OFF $(CMAKE_FLAGS); \
	  $(CMAKE) -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DAXRT_BUILD_TESTS=OFF -DAXRT_BUILD_PYTHON=OFF $(CMAKE_FLAGS) || exit 1; \
	fi
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS) --target axrt_mlp axrt_mlp_model
	$(BUILD_DIR)/examples/c/axrt_mlp $(BUILD_DIR)/examples/mlp.axe $(BUILD_DIR)/examples/mlp.ref

# Each stage leaves its results in <tree>/test-results.xml (JUnit, with
# every test's output); the summary at the end counts them and lists every
# skip with its reason (tools/test_summary.py).
CTEST = ctest --output-on-failure -j $(JOBS) --output-junit test-results.xml \
	--test-output-size-passed 1048576
# The environment is made (downloads, mostly) while the release tree builds.
# Each stage's wall time goes to $(STAGE_TIMES), for the summary.
STAGE_TIMES = $(BUILD_DIR)/stage-times
timed = start=$$(date +%s); $(MAKE) --no-print-directory $(2); rc=$$?; \
	echo "$(1) $$(($$(date +%s) - start))" >>$(STAGE_TIMES); exit $$rc
test:
	@mkdir -p $(BUILD_DIR) && rm -f $(STAGE_TIMES)
	@$(call timed,environment and release build,-j2 build venv)
	@$(call timed,release tests,test-release)
	@$(call timed,ASan + UBSan build and tests,test-asan)
	@$(call timed,TSan build and tests,test-tsan)
	@$(call timed,fuzzer build and smoke,fuzz-smoke)
	@$(MAKE) --no-print-directory test-summary

test-summary: venv
	@$(VENV_PYTHON) tools/test_summary.py --stages $(STAGE_TIMES) $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR)

test-release: build venv
	rm -rf $(BUILD_DIR)/test-results
	$(CTEST) --test-dir $(BUILD_DIR)

# Rewrites abi/baseline/libaxrt.abi from the built library: after a
# compatible change of the C ABI, in the same commit (the abi.gate test
# fails until then; abi/check_abi.sh).
abi-baseline: build
	$(CMAKE) --build $(BUILD_DIR) --target axrt_abi_baseline

# The unit tests and the conformance suite again under ASan + UBSan, in a
# tree with the fault-injection sites compiled in (fault_injection_test).
# The sanitizer tree, configured (shared by test-asan and the soak).
ASAN_CONFIGURE = $(CMAKE) -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug $(SANITIZER_TREE) \
	  -DAXRT_SANITIZE=address,undefined -DAXRT_FAULT_INJECTION=ON -DAXRT_BUILD_EXAMPLES=ON \
	  -DAXRT_BUILD_CUDA_KERNELS=OFF $(TEST_PYTHON_FLAGS) $(CMAKE_FLAGS)

soak-build: deps-test
	$(ASAN_CONFIGURE)
	$(CMAKE) --build $(ASAN_DIR) -j $(JOBS) --target axrt_soak

test-asan: deps-test
	$(ASAN_CONFIGURE)
	$(CMAKE) --build $(ASAN_DIR) -j $(JOBS) --target axrt_sanitized_tests
	$(CTEST) --test-dir $(ASAN_DIR) -L sanitized

# The multi-threaded tests (label `threaded`) again under ThreadSanitizer:
# streams, events, pools and drivers are concurrent code, and a race must
# fail the run. The matmul kernels' numbers are left to the ASan run: their
# workgroups across the pool's threads are the tuning and the other
# kernels' parts here.
test-tsan: deps-test
	$(CMAKE) -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug $(SANITIZER_TREE) \
	  -DAXRT_SANITIZE=thread -DAXRT_FAULT_INJECTION=ON -DAXRT_BUILD_EXAMPLES=ON \
	  -DAXRT_BUILD_CUDA_KERNELS=OFF $(TEST_PYTHON_FLAGS) $(CMAKE_FLAGS)
	$(CMAKE) --build $(TSAN_DIR) -j $(JOBS) --target axrt_threaded_tests
	TSAN_OPTIONS=halt_on_error=1 $(CTEST) --test-dir $(TSAN_DIR) -L threaded \
	  -E '^unit\.cpu_kernels_test\.matmul-'

# The .axe reader under libFuzzer (clang, ASan + UBSan) in a tree of its own;
# fuzz/run.sh seeds the corpus, runs, and on a finding names the reproducer.
fuzz-build: deps-test
	$(CMAKE) -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DAXRT_BUILD_FUZZERS=ON -DAXRT_PRECOMPILE_HEADERS=ON \
	  -DAXRT_BUILD_TESTS=OFF -DAXRT_BUILD_EXAMPLES=OFF -DAXRT_DRIVER_CUDA=OFF \
	  -DAXRT_BUILD_CUDA_KERNELS=OFF $(CMAKE_FLAGS)
	$(CMAKE) --build $(FUZZ_DIR) -j $(JOBS) --target axe_reader_fuzzer

# The seed files come from the ordinary build's axrt_make_test_files.
FUZZ_SEEDS_TOOL = $(BUILD_DIR)/tests/cli/axrt_make_test_files

fuzz: fuzz-build build
	SEEDS_TOOL=$(FUZZ_SEEDS_TOOL) ./fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

fuzz-smoke: fuzz-build build
	SEEDS_TOOL=$(FUZZ_SEEDS_TOOL) ./fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SMOKE_SECONDS) -fork=$(JOBS)

.PHONY: bench-build bench-check bench-baseline

# The benchmarks' Release tree, built and not run.
bench-build: deps-bench
	$(CMAKE) -S . -B $(BENCH_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DAXRT_BUILD_BENCHMARKS=ON -DAXRT_BUILD_TESTS=OFF -DAXRT_BUILD_EXAMPLES=OFF \
	  $(PYTHON_FLAGS) $(CMAKE_FLAGS)
	$(CMAKE) --build $(BENCH_DIR) -j $(JOBS)

# Every Python benchmark runs in $(VENV), with the anchors that
# `tools/bootstrap.sh bench` adds to it; LLAMA_CPP_SOURCE, a llama.cpp
# source tree (the one in llama-cpp-python's sdist), adds llama.cpp's rows,
# built at the CPU's best and at AVX2, to the language-model benchmark
# (docs/performance.md, "Like for like"). Every figure also becomes a
# record, against its anchor from the same run, in $(BENCH_DIR)/results.json
# (tests/bench/bench_results.py; the raw files are kept in $(BENCH_RAW)).
BENCH_RAW = $(BENCH_DIR)/raw
BENCH_OUT = --benchmark_out_format=json --benchmark_out=$(BENCH_RAW)
bench: bench-build
	rm -rf $(BENCH_RAW) && mkdir -p $(BENCH_RAW)
	$(BENCH_DIR)/tests/bench/axrt_bench --benchmark_counters_tabular=true $(BENCH_OUT)/axrt_bench.json
	$(BENCH_DIR)/tests/bench/axrt_kernel_bench --benchmark_counters_tabular=true \
	  $(BENCH_OUT)/axrt_kernel_bench.json
	$(BENCH_DIR)/tests/bench/axrt_cuda_bench --benchmark_counters_tabular=true \
	  $(BENCH_OUT)/axrt_cuda_bench.json
	PYTHONPATH=$(BENCH_DIR)/python $(VENV_PYTHON) tests/bench/python_bench.py \
	  --json $(BENCH_RAW)/python_bench.json
	PYTHONPATH=$(BENCH_DIR)/python $(VENV_PYTHON) tests/bench/collective_bench.py \
	  --json $(BENCH_RAW)/collective_bench.json
	PYTHONPATH=$(BENCH_DIR)/python $(VENV_PYTHON) tests/bench/matmul_vs_onnxruntime.py \
	  --kernel-bench $(BENCH_DIR)/tests/bench/axrt_matmul_kernel_bench \
	  --json $(BENCH_RAW)/matmul_vs_onnxruntime.json
	PYTHONPATH=$(BENCH_DIR)/python $(VENV_PYTHON) tests/bench/serving_bench.py \
	  --json $(BENCH_RAW)/serving_bench.json
	PYTHONPATH=$(BENCH_DIR)/python $(VENV_PYTHON) tests/bench/llm_bench.py \
	  $(if $(LLAMA_CPP_SOURCE),--llama-cpp-source $(LLAMA_CPP_SOURCE)) \
	  --json $(BENCH_RAW)/llm_bench.json
	$(VENV_PYTHON) tests/bench/bench_results.py collect --out $(BENCH_DIR)/results.json $(BENCH_RAW)/*.json

# The performance regression gate (docs/performance.md, "Regression gate"):
# the quick suite (the C++ benchmarks that have an anchor, short and
# repeated; the Python layer; the matmul kernels against ONNX Runtime on one
# thread; no torch), its ratios against $(BENCH_BASELINE). A regression must
# show again in a second run of the suite to fail. About a minute here, two
# when it reruns, after the build.
BENCH_BASELINE ?= tests/bench/baseline.json
bench-check: bench-build
	$(VENV_PYTHON) tests/bench/bench_results.py quick $(BENCH_DIR) $(BENCH_DIR)/quick
	@$(VENV_PYTHON) tests/bench/bench_check.py --baseline $(BENCH_BASELINE) $(BENCH_DIR)/quick/results.json || { \
	  echo "bench-check: running the quick suite again: a regression must show in both runs"; \
	  $(VENV_PYTHON) tests/bench/bench_results.py quick $(BENCH_DIR) $(BENCH_DIR)/quick-again && \
	  $(VENV_PYTHON) tests/bench/bench_check.py --baseline $(BENCH_BASELINE) \
	    $(BENCH_DIR)/quick/results.json $(BENCH_DIR)/quick-again/results.json; }

# Rewrites $(BENCH_BASELINE) from fresh runs of the quick suite (the median
# ratio of $(BENCH_BASELINE_RUNS) runs, about a minute each): in the commit of
# the change that moved the ratios, saying why in its message.
BENCH_BASELINE_RUNS ?= 3
bench-baseline: bench-build
	rm -rf $(BENCH_DIR)/baseline-runs
	for run in $$(seq $(BENCH_BASELINE_RUNS)); do \
	  $(VENV_PYTHON) tests/bench/bench_results.py quick $(BENCH_DIR) $(BENCH_DIR)/baseline-runs/$$run || exit 1; \
	done
	$(VENV_PYTHON) tests/bench/bench_check.py --write-baseline --baseline $(BENCH_BASELINE) \
	  $(BENCH_DIR)/baseline-runs/*/results.json

# The soak, SOAK_SECONDS long (default 300) on SOAK_THREADS threads (4):
# random loads, calls, copies and releases on cpu:0 and null:0 while host
# and device allocations fail at random, in the sanitizer tree (its leak
# checker runs at exit); every result checked, device memory back to its
# starting level, a watchdog for deadlocks (tests/soak/soak.cc). Then the
# exit stress tests of the Python package (tests/python/test_exit.py) at
# length and under load: programs that exit with work in flight, 200 runs
# per case, 3 at a time, beside 2 busy processes. One failure is a crash a
# user's program can hit at exit. AXRT_EXIT_RUNS, AXRT_EXIT_PARALLEL and
# AXRT_EXIT_HOGS from the environment override the defaults.
SOAK_SECONDS ?= 300
SOAK_THREADS ?= 4
soak: build venv soak-build
	$(ASAN_DIR)/tests/soak/axrt_soak $(SOAK_SECONDS) $(SOAK_THREADS)
	AXRT_EXIT_RUNS=$${AXRT_EXIT_RUNS:-200} AXRT_EXIT_PARALLEL=$${AXRT_EXIT_PARALLEL:-3} \
	  AXRT_EXIT_HOGS=$${AXRT_EXIT_HOGS:-2} PYTHONPATH=$(abspath $(BUILD_DIR))/python \
	  AXRT_MOCK_CUDA_LIBRARY=$(abspath $(BUILD_DIR))/tests/mock_cuda/libaxrt_mock_cuda.so \
	  $(VENV_PYTHON) -m pytest -q -p no:cacheprovider tests/python/test_exit.py

install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf build
