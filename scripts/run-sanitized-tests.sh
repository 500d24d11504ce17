#!/usr/bin/env bash
# Runs test binaries of a sanitizer build (make test-asan, make test-tsan; docs/sanitizers.md) and
# fails on the first report. Each binary runs whole, so one process covers its cases (an MPI
# binary, *_mpi, one process per rank on two ranks); a report makes it exit non-zero, which is the
# failure.
# Usage: run-sanitized-tests.sh BUILD_DIR address|thread TEST_BINARY...
set -u
BUILD=$(cd "$1" && pwd)
MODE=$2
shift 2
HERE=$(cd "$(dirname "$0")/.." && pwd)
case $MODE in
  address)
    # halt_on_error: the first error is the one to fix; leaks are errors too.
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    export LSAN_OPTIONS="suppressions=$HERE/.ci/lsan.supp:print_suppressions=0"
    ;;
  thread)
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$HERE/.ci/tsan.supp"
    # libgomp is not built for ThreadSanitizer: its barriers look like races. Operators run on one
    # thread; the threads under test are deep500's own (loaders, pools, watchdog, overlap).
    export OMP_NUM_THREADS=1
    ;;
  *) echo "usage: $0 BUILD_DIR address|thread TEST..." >&2; exit 2 ;;
esac
failed=()
start=$SECONDS
for t in "$@"; do
  bin=$BUILD/bin/$t
  if [ ! -x "$bin" ]; then
    echo "run-sanitized-tests: $bin was not built" >&2
    failed+=("$t (not built)")
    continue
  fi
  echo "== $t ($MODE)"
  launch=()
  # MPI test binaries (d5_test_lv3_mpi) run on two ranks; Open MPI is told to accept root
  # (containers) and more ranks than cores, as ctest's MPI tests are.
  if [[ $t == *_mpi ]]; then
    launch=(mpiexec -n 2)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
      OMPI_MCA_mpi_yield_when_idle=1
  fi
  if ! (cd "$BUILD" && "${launch[@]}" "$bin" --gtest_brief=1); then
    failed+=("$t")
  fi
done
echo "run-sanitized-tests: $# binaries under $MODE in $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run-sanitized-tests: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "run-sanitized-tests: clean"
