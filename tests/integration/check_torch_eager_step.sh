#!/usr/bin/env bash
# bench/torch_eager_step.py end to end on the CPU (LeNet-5, six short rounds): both sides run, the
# PyTorch model is d5's (its parameter count is checked), the result file holds each round's
# times and ratio; a d5 failure is reported, not averaged. Its figures are not judged here.
set -u
PY=$1 SRC=$2 D5=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
# The one prerequisite it may lack: a skip (ctest's SKIP_RETURN_CODE) that names it, in the form
# scripts/check-ci-coverage.py reads (ctest's log records such a skip as passed).
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "SKIPPED: $PY cannot import torch (Debian: python3-torch)"
  exit 77
fi

"$PY" "$SRC/bench/torch_eager_step.py" "$D5" --model lenet5 --batch 4 --device cpu --backend reference \
  --rounds 6 --steps 2 --threads 1 -o "$out/r.json" > "$out/log" 2>&1 || fail "the benchmark failed: $(cat "$out/log")"
"$PY" - "$out/r.json" <<'PYEOF' || fail "result file"
import json, math, sys
r = json.load(open(sys.argv[1]))
assert r["parameters"] == 61706 and r["d5_backend"] == "reference" and r["rounds"] == 6, r
assert len(r["d5_step_seconds"]) == len(r["eager_step_seconds"]) == len(r["ratio"]) == 6, r
for d, e, q in zip(r["d5_step_seconds"], r["eager_step_seconds"], r["ratio"]):
    assert d > 0 and e > 0 and math.isclose(q, e / d), (d, e, q)
q = sorted(r["ratio"])
assert math.isclose(r["ratio_median"], (q[2] + q[3]) / 2), r
# Six samples: the 95% CI of the median is the smallest and the largest (ranks 1 and 6).
ci = r["ratio_ci95"]
assert ci["available"] and ci["lower"] == q[0] and ci["upper"] == q[5], ci
PYEOF
grep -q "throughput / PyTorch eager's" "$out/log" || fail "no summary line: $(cat "$out/log")"

"$PY" "$SRC/bench/torch_eager_step.py" "$D5" --model lenet5 --batch 4 --device cpu --backend no-such-backend \
  --rounds 1 --steps 2 > "$out/bad" 2>&1 && fail "an unknown d5 backend passed"
grep -q "d5 failed" "$out/bad" || fail "the d5 failure was not named: $(cat "$out/bad")"

[ $status -eq 0 ] && echo "torch_eager_step runs both sides and records each round"
exit $status
