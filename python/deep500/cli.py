"""The `d5` command of an environment the package is installed in: the package's own d5 binary."""
from __future__ import annotations

import os
import sys

from . import _core
from .recipes import d5_executable


def main() -> None:
    try:
        # Not d5 on PATH: that is this very script.
        exe = d5_executable(search_path=False)
    except _core.IoError as e:
        print(f"d5: error: {e}", file=sys.stderr)
        sys.exit(4)  # an I/O error, as d5 itself reports one (docs/cli.md)
    os.execv(exe, [exe] + sys.argv[1:])
