# Two commands do all the set-up: `make run` and `make test` (see README.md).
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
D5_WERROR ?= OFF
CMAKE_ARGS ?=
CCACHE := $(shell command -v ccache 2>/dev/null)
GENERATOR := $(if $(shell command -v ninja 2>/dev/null),-G Ninja,)
LAUNCHER := $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache,)

.PHONY: deps configure build test test-twins test-reduced test-asan test-tsan test-hardening check-libtorch-api run clean fuzz

deps:
	bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DD5_WERROR=$(D5_WERROR) $(LAUNCHER) $(CMAKE_ARGS)

configure: $(BUILD_DIR)/CMakeCache.txt

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: deps
	$(MAKE) build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# The quickstart recipe, then its HTML report (scripts/run-default-suite.sh, docs/run.md).
run: deps
	$(MAKE) build
	bash scripts/run-default-suite.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)

# The smallest build: the reference backend only, no LibTorch, oneDNN, MPI, ONNX or CUDA. Its
# tests show that nothing depends on an optional library by accident (docs/building.md).
REDUCED_BUILD_DIR ?= build-reduced
REDUCED_ARGS := -DD5_WITH_TORCH=OFF -DD5_WITH_ONEDNN=OFF -DD5_WITH_MPI=OFF -DD5_WITH_ONNX=OFF -DD5_WITH_CUDA=OFF

# Sanitizer builds (docs/sanitizers.md): ASan + UBSan, and TSan, each in a build directory of its
# own, without the backends whose libraries are not instrumented. The binaries run whole; the first
# report fails the target.
SANITIZE_ARGS := -DD5_WITH_TORCH=OFF -DD5_WITH_ONEDNN=OFF -DD5_WITH_CUDA=OFF -DD5_WITH_MPI=OFF -DD5_BUILD_BENCH=OFF
ASAN_TESTS ?= d5_test_core d5_test_metrics d5_test_results d5_test_compare d5_test_runner d5_test_lv2_data \
  test_lv2_images d5_test_lv2_sampling d5_test_onnx d5_test_recipes
# TSan adds MPI: the watchdog thread and the overlapped allreduce are threads of d5's that talk to
# MPI (Open MPI's own synchronization is suppressed in .ci/tsan.supp, each entry with its reason).
TSAN_TESTS ?= d5_test_lv2_sampling d5_test_lv2_data d5_test_runner d5_test_core test_lv2_images d5_test_trainer \
  d5_test_lv3_mpi

test-asan: deps
	$(MAKE) configure BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo CMAKE_ARGS="-DD5_SANITIZE=address $(SANITIZE_ARGS)"
	cmake --build build-asan -j $(JOBS) --target $(ASAN_TESTS)
	bash scripts/run-sanitized-tests.sh build-asan address $(ASAN_TESTS)

test-tsan: deps
	$(MAKE) configure BUILD_DIR=build-tsan BUILD_TYPE=RelWithDebInfo CMAKE_ARGS="-DD5_SANITIZE=thread $(SANITIZE_ARGS) -DD5_WITH_MPI=ON"
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	bash scripts/run-sanitized-tests.sh build-tsan thread $(TSAN_TESTS)

# The twin tests with their PyTorch side rerun (tests/integration/twin_mode.h): `make test` compares
# d5 with the twins' recorded figures; this renews them (about 15 minutes on 2 cores).
test-twins: build
	cd $(BUILD_DIR) && D5_TWINS=full ctest --output-on-failure -j $(JOBS) -L twin $(CTEST_ARGS)

# Every file that includes LibTorch compiled (-fsyntax-only) against Debian trixie's LibTorch 2.x
# headers, fetched from Debian's archive once (docs/building.md#newer-libtorch). Run by CI.
check-libtorch-api: configure
	python3 scripts/check-libtorch-api.py $(BUILD_DIR) --jobs $(JOBS)

# The shipped recipes (label recipes) run in the full build; here most of them would skip for
# want of LibTorch and MPI, and the rest repeat the full build's runs. So would the PyTorch twins
# of d5 rl (label twin), which run the reference executor that every build has.
REDUCED_CTEST_ARGS ?= -LE 'recipes|twin'
test-reduced: deps
	$(MAKE) build BUILD_DIR=$(REDUCED_BUILD_DIR) CMAKE_ARGS="$(REDUCED_ARGS) $(CMAKE_ARGS)"
	cd $(REDUCED_BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(REDUCED_CTEST_ARGS) $(CTEST_ARGS)

# libFuzzer harnesses of every parser of outside input (docs/fuzzing.md): a clang build of its own
# (sanitizers instrument every library), then each harness for FUZZ_SECONDS from its seed corpus.
FUZZ_SECONDS ?= 60
# -O1 (ASan's advice for fuzzing: executions per second) with debug info, so reports keep
# file:line for every frame. clang 14 measured: -gline-tables-only compiles no faster than -g here.
FUZZ_OPT_FLAGS ?= -O1 -g -DNDEBUG
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_JOBS ?= $(JOBS)

# $(call configure_fuzz_build,DIR,OPT_FLAGS): clang with the harnesses, without the backends whose
# libraries are not instrumented.
define configure_fuzz_build
	CC=clang CXX=clang++ cmake -S . -B $(1) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DD5_FUZZ=ON \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(2)" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(2)" \
	  -DD5_BUILD_TESTS=ON -DD5_BUILD_BENCH=OFF -DD5_WITH_TORCH=OFF -DD5_WITH_ONEDNN=OFF -DD5_WITH_MPI=OFF \
	  -DD5_WITH_CUDA=OFF $(LAUNCHER)
endef

$(FUZZ_BUILD_DIR)/CMakeCache.txt:
	$(call configure_fuzz_build,$(FUZZ_BUILD_DIR),$(FUZZ_OPT_FLAGS))

fuzz: $(FUZZ_BUILD_DIR)/CMakeCache.txt
	cmake --build $(FUZZ_BUILD_DIR) -j $(FUZZ_JOBS) --target d5_fuzz
	bash scripts/run-fuzzers.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS)

# What CI runs of the sanitizers and fuzzers (docs/sanitizers.md#in-ci): one instrumented build
# serves both. A fuzz build of its own (clang, ASan + UBSan) compiles the harnesses and the
# ASAN_TESTS (core, metrics, every parser, Level 2 data), which run whole under the sanitizers; then
# every harness runs HARDENING_FUZZ_SECONDS from its seeds and the inputs of fixed findings. At -O0:
# the instrumented tree compiles in 60% of -O1's time (clang 14, the CLI's translation units), the
# sanitizers catch the same errors, and seconds of fuzzing need no speed. Its timeout is 5 s, not
# the 1 s of the long runs: CI's machine is shared, and a spurious timeout would fail the run.
HARDENING_FUZZ_SECONDS ?= 5
HARDENING_FUZZ_TIMEOUT ?= 5
HARDENING_OPT_FLAGS ?= -O0 -g -DNDEBUG
HARDENING_BUILD_DIR ?= build-hardening

$(HARDENING_BUILD_DIR)/CMakeCache.txt:
	$(call configure_fuzz_build,$(HARDENING_BUILD_DIR),$(HARDENING_OPT_FLAGS))

test-hardening: deps $(HARDENING_BUILD_DIR)/CMakeCache.txt
	cmake --build $(HARDENING_BUILD_DIR) -j $(FUZZ_JOBS) --target d5_fuzz $(ASAN_TESTS)
	bash scripts/run-sanitized-tests.sh $(HARDENING_BUILD_DIR) address $(ASAN_TESTS)
	FUZZ_TIMEOUT=$(HARDENING_FUZZ_TIMEOUT) bash scripts/run-fuzzers.sh $(HARDENING_BUILD_DIR) $(HARDENING_FUZZ_SECONDS)
