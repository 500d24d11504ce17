#!/usr/bin/env bash
# scripts/check-ci-coverage.py against fixtures: it passes a complete build whose only skips are
# allowed, and fails, naming each, a build that left a backend or an area out and a run with a
# skip inside a whole-binary test, a shell test's skip code or a pytest skip.
set -u
SRC=$1
CHECK="python3 $SRC/scripts/check-ci-coverage.py /nonexistent --allowed $SRC/.ci/allowed-skips"
F=$SRC/tests/integration/ci_coverage
status=0
fail() { echo "FAIL: $*"; status=1; }

out=$($CHECK --info $F/info_complete.json --log $F/allowed_skips.log --nvcc /nonexistent 2>&1) ||
  fail "a complete build with allowed skips was refused: $out"
echo "$out" | grep -q "2 skip(s), all allowed" || fail "the allowed skips (gtest, pytest) were not counted: $out"

out=$($CHECK --info $F/info_reduced.json --log $F/hidden_skip.log --nvcc /nonexistent 2>&1) &&
  fail "a reduced build with hidden skips passed: $out"
for want in "backend 'torch' was not built" "yaml-cpp" "skipped in CI: d5_test_lv2_optim: no MNIST at /shared/data/mnist" \
            "skipped in CI: cli_shell_case: (skipped without a gtest reason)" \
            "skipped in CI: bench_shell_named_skip: /usr/bin/python3 cannot import torch (Debian: python3-torch)" \
            "skipped in CI: python_package_gpu: could not import 'torch': No module named 'torch'" \
            "the Python package deep500 (Debian pybind11-dev, python3-dev, python3-pytest) was not tested"; do
  echo "$out" | grep -qF "$want" || fail "not reported: $want; got: $out"
done
echo "$out" | grep -q "backend 'cuda'" && fail "cuda reported without a CUDA toolkit: $out"

# A whole binary's skip is read from its companion test, once.
out=$($CHECK --info $F/info_complete.json --log $F/companion_skip.log --nvcc /nonexistent 2>&1) &&
  fail "a skip reported by a whole binary's companion passed: $out"
want="skipped in CI: d5_test_custom_ops_skips: no C compiler found at configure time"
echo "$out" | grep -qF "$want" || fail "not reported: $want; got: $out"
echo "$out" | grep -q "1 problem(s)" || fail "the companion's skip was not counted once: $out"

# With a toolkit on the machine, a CUDA backend left out is a problem too.
out=$($CHECK --info $F/info_reduced.json --log $F/allowed_skips.log --nvcc /bin/sh 2>&1)
echo "$out" | grep -qF "backend 'cuda' was not built" || fail "cuda not reported with a toolkit present: $out"

[ $status -eq 0 ] && echo "check-ci-coverage behaves on every fixture"
exit $status
