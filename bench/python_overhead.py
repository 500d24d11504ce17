#!/usr/bin/env python3
"""The Python package's overhead, measured side by side in one run (docs/python.md#overhead).

1. An operator call from Python against the same call from a C++ loop in the same process
   (deep500._core._time_forward_in_cpp), on a 16-element Relu, where the call costs are all there
   is: per round, the mean per call over N calls each way; the difference's median over rounds
   with its distribution-free 95% CI. Target: at most 2 us.
2. A training run driven from Python (d5.test_training) against the same run from the CLI
   (`d5 train`, same model, data, optimizer, steps, backend), alternating: the ratio of the
   medians of the runs' training time (steps, with their batch fetches), with the CI of each
   median. Target: at most 1.05.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py build/bin/d5 [rounds]
"""
import json
import subprocess
import sys
import tempfile
import time

import numpy as np

import deep500 as d5
from deep500 import _core

D5 = sys.argv[1] if len(sys.argv) > 1 else "build/bin/d5"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 15
CALLS = 20000
STEPS = 200
BACKEND = "onednn" if any(b["name"] == "onednn" and b["available"] for b in d5.info()["backends"]) else "reference"


def ci_text(samples, scale=1.0, unit=""):
    ci = d5.stats.median_ci(samples)
    med = float(np.median(samples))
    if not ci["available"]:
        return f"{med * scale:.3g}{unit} (no CI: {ci['reason']})"
    return f"{med * scale:.3g}{unit} [{ci['lower'] * scale:.3g}, {ci['upper'] * scale:.3g}]"


def op_call_overhead():
    x = np.ones(16, dtype=np.float32)
    op = d5.op("Relu", [x])
    py, cpp = [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            op.forward([x])
        py.append((time.perf_counter() - t0) / CALLS)
        cpp.append(_core._time_forward_in_cpp(op, [x], CALLS))
    diff = [a - b for a, b in zip(py, cpp)]
    print(f"op call, Relu f32[16] ({op.implementation}), {ROUNDS} rounds of {CALLS} calls:")
    print(f"  from Python {ci_text(py, 1e6, ' us')}, from C++ {ci_text(cpp, 1e6, ' us')}")
    print(f"  Python's extra per call {ci_text(diff, 1e6, ' us')}  (target <= 2 us)")
    return float(np.median(diff))


def training_from_python():
    train = d5.dataset("synthetic-learnable", samples=4096, seed=1)
    net = d5.models.create("lenet5", batch=32, with_loss=True)
    opt = d5.optimizer("sgd", d5.executor(net, BACKEND), lr=0.05)
    r = d5.test_training(opt, train, None, batch=32, max_steps=STEPS, epochs=0)
    return r["extra"]["training_time_s"]


def training_from_cli(out):
    subprocess.run([D5, "train", "--model", "lenet5", "--dataset", "synthetic-learnable", "--set", "samples=4096",
                    "--batch", "32", "--steps", str(STEPS), "--no-test", "--backend", BACKEND, "--lr", "0.05",
                    "--format", "json", "-o", out], check=True, capture_output=True)
    with open(out) as f:
        return json.load(f)["cases"][0]["extra"]["training_time_s"]


def training_overhead():
    py, cli = [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(max(6, ROUNDS // 2)):
            py.append(training_from_python())
            cli.append(training_from_cli(f"{d}/r.json"))
    ratio = float(np.median(py) / np.median(cli))
    print(f"training, lenet5 on {BACKEND}, {STEPS} steps of 32, {len(py)} runs each, alternating:")
    print(f"  from Python {ci_text(py, 1, ' s')}, from the CLI {ci_text(cli, 1, ' s')}")
    print(f"  ratio of medians {ratio:.3f}  (target <= 1.05)")
    return ratio


if __name__ == "__main__":
    extra = op_call_overhead()
    ratio = training_overhead()
    ok = extra <= 2e-6 and ratio <= 1.05
    print("targets met" if ok else "targets NOT met")
    sys.exit(0 if ok else 1)
