# Two commands do all the set-up: `make run` and `make test` (see README.md).
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
D5_WERROR ?= OFF
CMAKE_ARGS ?=
CCACHE := $(shell command -v ccache 2>/dev/null)
GENERATOR := $(if $(shell command -v ninja 2>/dev/null),-G Ninja,)
LAUNCHER := $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache,)

.PHONY: deps configure build test run clean

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
