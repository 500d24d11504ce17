#!/usr/bin/env bash
# `pip install --no-build-isolation` of the package into a fresh virtual environment made with
# --system-site-packages (Debian's NumPy, PyTorch, setuptools and wheel), offline (--no-index), from
# this build; then the installed package, not the build tree, runs an operator and a network.
set -euo pipefail
PY=$1 SRC=$2 BUILD=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m venv --system-site-packages "$work/venv"
# A copy of the package sources: pip writes its build files beside setup.py.
cp -r "$SRC" "$work/src"
D5_SOURCE_DIR="$SRC/.." D5_BUILD_DIR="$BUILD" "$work/venv/bin/pip" install --no-build-isolation --no-index --no-deps -q "$work/src"
cd "$work"
env -u PYTHONPATH "$work/venv/bin/python" - <<'PY'
import pathlib, sys
import numpy as np
import deep500 as d5
where = pathlib.Path(d5.__file__).resolve()
assert where.is_relative_to(pathlib.Path(sys.prefix).resolve()), f"imported {where}, not the venv's copy"
assert (where.parent / "libdeep500.so.0").exists()
x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
assert np.asarray(d5.op("Relu", [x]).forward([x])[0]).tolist() == [[0, 0, 0], [1, 2, 3]]
out = d5.executor(d5.models.create("lenet5")).inference({"input": np.zeros((1, 1, 28, 28), np.float32)})
assert np.asarray(out["logits"]).shape == (1, 10)
print(f"deep500 {d5.__version__} installed at {where.parent}")
PY
