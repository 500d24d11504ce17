#!/usr/bin/env bash
# `pip install --no-build-isolation` of the package into a fresh virtual environment made with
# --system-site-packages (Debian's NumPy, PyTorch, setuptools and wheel), offline (--no-index), from
# this build; then the installed package, not the build tree, runs an operator, a network and a
# recipe, and the environment's `d5` command is the package's own d5 reading the package's data.
set -euo pipefail
PY=$1 SRC=$2 BUILD=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m venv --system-site-packages "$work/venv"
# A copy of the package sources: pip writes its build files beside setup.py.
cp -r "$SRC" "$work/src"
D5_SOURCE_DIR="$SRC/.." D5_BUILD_DIR="$BUILD" "$work/venv/bin/pip" install --no-build-isolation --no-index --no-deps -q "$work/src"
cd "$work"
env -u PYTHONPATH -u D5_BINARY "$work/venv/bin/python" - "$SRC/tests/data/tiny-recipe.yaml" <<'PY'
import pathlib, sys
import numpy as np
import deep500 as d5
where = pathlib.Path(d5.__file__).resolve()
assert where.is_relative_to(pathlib.Path(sys.prefix).resolve()), f"imported {where}, not the venv's copy"
tree = where.parent / "_d5"
assert (tree / "lib" / "libdeep500.so.0").is_file(), "the package lacks its libdeep500.so.0"
assert not any(p.is_symlink() for p in tree.rglob("*")), "a wheel keeps no links: the package has one"
assert pathlib.Path(d5.recipes.d5_executable()) == tree / "bin" / "d5", d5.recipes.d5_executable()
maps = pathlib.Path("/proc/self/maps").read_text().splitlines()
loaded = {line.split()[-1] for line in maps if "libdeep500" in line}
assert loaded == {str(tree / "lib" / "libdeep500.so.0")}, f"libdeep500 loaded from {loaded}"
x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
assert np.asarray(d5.op("Relu", [x]).forward([x])[0]).tolist() == [[0, 0, 0], [1, 2, 3]]
out = d5.executor(d5.models.create("lenet5")).inference({"input": np.zeros((1, 1, 28, 28), np.float32)})
assert np.asarray(out["logits"]).shape == (1, 10)
r = d5.run_recipe(sys.argv[1])
assert r["passed"] is True and len(r["cases"]) == 1, r
print(f"deep500 {d5.__version__} installed at {where.parent}")
PY
# The environment's d5 command runs the package's d5, which reads the package's recipes.
listing=$(env -u D5_BINARY -u D5_RECIPES_DIR "$work/venv/bin/d5" run --list)
site=$("$work/venv/bin/python" -c 'import deep500, os; print(os.path.dirname(os.path.realpath(deep500.__file__)))')
echo "$listing" | head -1 | grep -qx "recipes in $site/_d5/share/deep500/recipes" ||
  { echo "FAIL the environment's d5 does not read the package's recipes: $(echo "$listing" | head -1)"; exit 1; }
echo "$listing" | grep -q "quickstart" || { echo "FAIL the package's recipes lack quickstart"; exit 1; }
