"""Recipes (docs/recipes.md) from Python: `d5 run` of the package's own d5, or of the build it came from."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from typing import Any, Optional

from . import _core


def d5_executable(search_path: bool = True) -> str:
    """The d5 command line: $D5_BINARY, else the one an installed package carries (_d5/bin/d5),
    else the build's (recorded at build time), else (with search_path) d5 on PATH."""
    candidates = [os.environ.get("D5_BINARY", ""), os.path.join(os.path.dirname(os.path.abspath(__file__)), "_d5", "bin", "d5")]
    try:
        from ._paths import D5_EXECUTABLE
        candidates.append(D5_EXECUTABLE)
    except ImportError:
        pass
    if search_path:
        candidates.append(shutil.which("d5") or "")
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise _core.IoError("no d5 executable: set D5_BINARY to the build's bin/d5 (tried "
                        + ", ".join(repr(c) for c in candidates if c) + ")")


def run_recipe(path: str, results_dir: Optional[str] = None, require_valid: bool = False, **set: Any) -> dict:
    """Runs a recipe (a file, or a shipped recipe's name) like `d5 run`, keyword arguments as
    `--set KEY=VALUE` (ENTRY.KEY as ENTRY__KEY, dashes as underscores: min_time=0.1).

    Returns the recipe run's result file as a dict (every run with its verdict and criteria, and
    "passed"); the runs' own result files are in results_dir (default: a temporary directory
    removed afterwards, whose path the dict then no longer names). A FAILed recipe is a result,
    not an exception; a recipe that cannot run raises the error d5 reported.
    """
    overrides = []
    for key, value in set.items():
        key = key.replace("__", ".").replace("_", "-")
        overrides += ["--set", f"{key}={value}"]
    keep = results_dir is not None
    results_dir = results_dir or tempfile.mkdtemp(prefix="d5-recipe-")
    try:
        out = os.path.join(results_dir, "recipe-run.json")
        cmd = [d5_executable(), "run", str(path), "--results-dir", str(results_dir), "--format", "json", "-o", out]
        if require_valid:
            cmd.append("--require-valid")
        p = subprocess.run(cmd + overrides, capture_output=True, text=True)
        if p.returncode not in (0, 1) or not os.path.exists(out):
            raise _core.Error(f"d5 run {path} failed (exit {p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
        with open(out) as f:
            result = json.load(f)
        result["passed"] = p.returncode == 0
        return result
    finally:
        if not keep:
            shutil.rmtree(results_dir, ignore_errors=True)
