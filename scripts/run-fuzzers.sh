#!/usr/bin/env bash
# Runs every libFuzzer harness of a D5_FUZZ build (docs/fuzzing.md) for SECONDS each, starting from
# its seed corpus (fuzz/corpus/<target>), and prints per target: executions, exec/s, and findings
# (crashes, which include UB and uncaught exceptions; leaks; timeouts: an input slower than
# FUZZ_TIMEOUT s; out-of-memory: over FUZZ_RSS_MB). Exit status 1 when any target found anything.
#
#   scripts/run-fuzzers.sh [BUILD_DIR=build-fuzz] [SECONDS=60] [TARGET...]
#
# FUZZ_RUNS=N stops a target after N executions if that comes before SECONDS (for a count target
# such as 10^6 executions: FUZZ_RUNS=1000000 with SECONDS as the upper bound).
#
# Each target's work directory is BUILD_DIR/fuzz-work/<target>: corpus/ (what the fuzzer added),
# findings/ (the inputs that crashed, leaked or timed out, for reproducing: run the harness binary
# with the file as its argument), log.
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-fuzz}"
seconds="${2:-60}"
shift $(( $# > 2 ? 2 : $# ))
rss_mb="${FUZZ_RSS_MB:-2048}"
timeout_s="${FUZZ_TIMEOUT:-1}"
runs=()
[ -n "${FUZZ_RUNS:-}" ] && runs=(-runs="$FUZZ_RUNS")

bin_dir="$build/fuzz"
if [ ! -d "$bin_dir" ]; then
  echo "run-fuzzers: no harnesses in $bin_dir; build them first (make fuzz)" >&2
  exit 2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for b in "$bin_dir"/fuzz_*; do [ -x "$b" ] && targets+=("$(basename "$b" | sed 's/^fuzz_//')"); done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "run-fuzzers: no fuzz_* binaries in $bin_dir" >&2
  exit 2
fi

# Harnesses of parsers that take a path write every input to a file: in memory when possible
# (on a disk-backed /tmp that costs most of the time of an execution).
if [ -z "${FUZZ_TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then FUZZ_TMPDIR=/dev/shm; fi
[ -n "${FUZZ_TMPDIR:-}" ] && export TMPDIR="$FUZZ_TMPDIR"

# UBSan aborts already (-fno-sanitize-recover); the stack trace says where.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

# The last value of a libFuzzer final-stats line ("stat::number_of_executed_units: 12345").
stat() { grep -a "^stat::$1:" "$2" | tail -1 | awk '{print $2}'; }

status=0
rows=()
for t in "${targets[@]}"; do
  bin="$bin_dir/fuzz_$t"
  work="$build/fuzz-work/$t"
  # findings/ holds this run's findings only; the corpus carries over from run to run.
  rm -rf "$work/findings"
  mkdir -p "$work/corpus" "$work/findings"
  seeds=()
  [ -d "$root/fuzz/corpus/$t" ] && seeds+=("$root/fuzz/corpus/$t")
  # Inputs of fixed findings are replayed first thing, with the seeds.
  [ -d "$root/fuzz/regressions/$t" ] && seeds+=("$root/fuzz/regressions/$t")
  # Text formats have a dictionary of their syntax and keys, which mutations splice in.
  dict=()
  [ -f "$root/fuzz/dict/$t.dict" ] && dict=(-dict="$root/fuzz/dict/$t.dict")
  echo "run-fuzzers: $t for ${seconds}s${FUZZ_RUNS:+ or $FUZZ_RUNS executions} ($work/log)"
  start=$(date +%s)
  "$bin" -max_total_time="$seconds" -rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" -timeout="$timeout_s" \
    -detect_leaks=1 -print_final_stats=1 "${runs[@]}" -artifact_prefix="$work/findings/" "${dict[@]}" "$work/corpus" "${seeds[@]}" \
    >"$work/log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(stat number_of_executed_units "$work/log")
  rate=$(stat average_exec_per_sec "$work/log")
  # Without final stats (killed), the last progress line "#N ... exec/s: R" is the best count.
  if [ -z "$execs" ]; then
    execs=$(grep -aoE '^#[0-9]+' "$work/log" | tail -1 | tr -d '#')
    rate=$(grep -aoE 'exec/s: [0-9]+' "$work/log" | tail -1 | awk '{print $2}')
  fi
  count() { find "$work/findings" -maxdepth 1 -name "$1-*" | wc -l; }
  crashes=$(count crash) leaks=$(count leak) timeouts=$(count timeout) ooms=$(count oom)
  result=ok
  if [ "$rc" -ne 0 ] || [ $((crashes + leaks + timeouts + ooms)) -gt 0 ]; then
    result="FINDING (exit $rc; see $work/log)"
    status=1
  fi
  rows+=("$(printf '%-12s %12s %9s %7s %5s %8s %4s %6s  %s' "$t" "${execs:-?}" "${rate:-?}" "$crashes" "$leaks" \
    "$timeouts" "$ooms" "${elapsed}s" "$result")")
done

echo
printf '%-12s %12s %9s %7s %5s %8s %4s %6s  %s\n' target executions exec/s crashes leaks timeouts oom time result
for r in "${rows[@]}"; do echo "$r"; done
exit $status
