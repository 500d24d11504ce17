"""deep500 from Python: the C++ core's tensors, operators, validation and statistics.

See docs/python.md. Errors raised by the core arrive as deep500.Error subclasses carrying the
core's message (InvalidArgument is also a ValueError, IoError an OSError, Unimplemented a
NotImplementedError).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from . import _core
from ._core import (  # noqa: F401  (re-exported)
    Error,
    FormatError,
    InternalError,
    InvalidArgument,
    IoError,
    NotBuilt,
    Operator,
    Tensor,
    Unimplemented,
    __version__,
)
from . import ops, stats  # noqa: F401

__all__ = [
    "Error", "FormatError", "InternalError", "InvalidArgument", "IoError", "NotBuilt", "Operator",
    "Tensor", "Unimplemented", "__version__", "info", "tensor", "op", "ops", "stats", "test_forward",
    "test_gradient", "load_results",
]


def info() -> dict:
    """The manifest every d5 result carries (machine, build, backends, libraries), as a dict."""
    return _core._manifest()


def tensor(array: Any) -> Tensor:
    """A d5.Tensor sharing the memory of `array` (no copy).

    `array` is a C-contiguous NumPy array (or anything with the buffer protocol), a d5.Tensor
    (returned as is) or a CPU torch tensor (shared through its NumPy view). numpy.asarray(t) of
    the result shares the same memory again. A non-contiguous array is refused: pass
    numpy.ascontiguousarray(a), which copies.
    """
    if _is_torch_tensor(array):
        if array.device.type != "cpu":
            raise InvalidArgument(
                f"d5.tensor(): the torch tensor lives on {array.device}; this d5.Tensor shares host memory only "
                "(call .cpu() first, which copies)")
        array = array.detach().numpy()
    return _core._tensor(array)


def op(type: str, inputs: Sequence[Any], attrs: Optional[Mapping[str, Any]] = None,
       backend: Optional[str] = None) -> Operator:
    """An operator of ONNX type `type` created for these inputs (arrays; None for an omitted
    optional input) and attributes, on `backend` (default "reference").

    The operator is made for this problem, as in C++: forward(inputs) and backward(...) take
    arrays of the same shapes and types. d5.Unimplemented (with every implementation's refusal)
    when the backend cannot run it; d5.NotBuilt when this build left the backend out.
    """
    return _core._op(type, list(inputs), dict(attrs or {}), backend)


def test_forward(op: Operator, inputs: Sequence[Any], reference: str = "reference",
                 rtol: Optional[float] = None, atol: Optional[float] = None, reruns: int = 3) -> dict:
    """Checks op's forward on `inputs` against the same problem on the `reference` backend.

    Returns {"state": "PASSED" | "FAILED" | "MISTRUSTED", "detail", "outputs": [{"index", "l1",
    "l2", "linf", "rel_l2", "max_abs_error", "max_rel_error", "mismatches", "rtol", "atol",
    "nondeterministic"}], "extra"}; tolerances default by dtype and op type (docs/validation.md).
    """
    return _core._test_forward(op, list(inputs), reference, rtol, atol, reruns)


def test_gradient(op: Operator, inputs: Sequence[Any], eps: float = 0.0, rtol: float = 0.0, atol: float = 0.0,
                  seed: int = 0x5EED) -> dict:
    """Checks op's backward against central finite differences on `inputs` (0: by dtype).

    Returns {"state", "detail", "max_abs_error", "max_rel_error", "checked", "non_smooth"}.
    """
    return _core._test_gradient(op, list(inputs), eps, rtol, atol, seed)


def load_results(path: str) -> dict:
    """A d5 result file as a dict, read and checked as d5 reads it (FormatError otherwise)."""
    return _core._load_results(str(path))


def _is_torch_tensor(x: Any) -> bool:
    t = type(x)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter")
