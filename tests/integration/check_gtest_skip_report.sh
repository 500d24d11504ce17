#!/usr/bin/env bash
# tests/report_gtest_skips.cmake, the companion of whole-binary tests, against a probe binary:
# it lists a skipped case with its reason (in the form ctest's skip expression and
# scripts/check-ci-coverage.py read), says so when nothing skipped, never reports a failed case
# as skipped, and fails when the binary ended before writing its results.
set -u
SRC=$1
PROBE=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
XML=$DIR/probe.results.xml
status=0
fail() { echo "FAIL: $*"; status=1; }
report() { cmake -DTEST=probe -DRESULTS="$XML" -P "$SRC/tests/report_gtest_skips.cmake"; }

"$PROBE" --gtest_brief=1 --gtest_output=xml:"$XML" >/dev/null 2>&1 || fail "the probe failed on its own"
out=$(report 2>&1) || fail "the report failed on complete results: $out"
for want in "skip_report_probe.cpp:" ": Skipped" 'probe reason; [rank 0] <x> & "q"' "[  SKIPPED ] Probe.SkipsWithAReason" \
            "1 of its 4 cases skipped"; do
  echo "$out" | grep -qF -- "$want" || fail "not in the report: $want; got: $out"
done
[ -e "$XML" ] && fail "the results file was left for a later run to misread"

"$PROBE" --gtest_brief=1 --gtest_filter=-Probe.SkipsWithAReason --gtest_output=xml:"$XML" >/dev/null 2>&1
out=$(report 2>&1) || fail "the report failed without skips: $out"
echo "$out" | grep -qF "[  SKIPPED ]" && fail "a skip reported where none happened: $out"
echo "$out" | grep -qF "none of its 3 cases was skipped" || fail "no 'none skipped' line: $out"

D5_PROBE_FAIL=1 "$PROBE" --gtest_brief=1 --gtest_output=xml:"$XML" >/dev/null 2>&1 && fail "the probe passed when asked to fail"
out=$(report 2>&1) || fail "the report failed where the binary wrote results: $out"
echo "$out" | grep -qF "Probe.FailsWhenAsked" && fail "a failed case reported as skipped: $out"
echo "$out" | grep -qF "[  SKIPPED ] Probe.SkipsWithAReason" || fail "the skip beside a failure was lost: $out"

(D5_PROBE_ABORT=1 exec "$PROBE" --gtest_brief=1 --gtest_output=xml:"$XML") >/dev/null 2>&1 && fail "the probe survived abort()"
out=$(report 2>&1) && fail "the report passed for a binary that wrote no results: $out"
echo "$out" | grep -qF "probe wrote no results" || fail "the missing results were not named: $out"

[ $status -eq 0 ] && echo "the skip report behaves on every probe run"
exit $status
