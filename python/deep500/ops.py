"""The operator registry: which operator types each backend implements."""
from __future__ import annotations

import builtins

from typing import Optional

from . import _core


def list(backend: Optional[str] = None) -> "builtins.list[dict]":  # noqa: A001  (the API's name)
    """Every implementation: {"type", "backend", "implementation", "backward", "notes"}."""
    return _core._list_ops(backend)
