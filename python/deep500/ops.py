"""The operator registry: which operator types each backend implements."""
from __future__ import annotations

from typing import Optional

from . import _core


def list(backend: Optional[str] = None) -> "list[dict]":  # noqa: A001  (the API's name)
    """Every implementation: {"type", "backend", "implementation", "backward", "notes"}."""
    return _core._list_ops(backend)
