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
    Executor,
    InvalidArgument,
    IoError,
    Network,
    NotBuilt,
    Operator,
    Tensor,
    Unimplemented,
    __version__,
)
from . import models, ops, stats  # noqa: F401
from .custom import CustomOperator, register_op  # noqa: F401
from .recipes import run_recipe  # noqa: F401
from .training import (  # noqa: F401
    Trainer,
    UpdateRule,
    data_loader,
    dataset,
    optimizer,
    optimizers,
    sampler,
    test_optimizer,
    test_training,
)

__all__ = [
    "Error", "FormatError", "InternalError", "InvalidArgument", "IoError", "NotBuilt", "Operator",
    "Tensor", "Unimplemented", "__version__", "info", "tensor", "op", "ops", "stats", "test_forward",
    "test_gradient", "load_results", "CustomOperator", "register_op", "Network", "Executor", "models",
    "load_onnx", "save_onnx", "from_torch", "executor", "test_executor", "measure", "from_dlpack",
    "run_recipe", "Trainer", "UpdateRule", "data_loader", "dataset", "optimizer", "optimizers", "sampler", "test_optimizer", "test_training",
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


def from_dlpack(x: Any) -> Tensor:
    """A d5.Tensor sharing the memory of anything exporting DLPack (a torch tensor on the host or
    a GPU, a NumPy array, a capsule), which stays alive as long as the d5 tensor.

    The other way, torch.from_dlpack(t) shares a d5.Tensor's memory. Non-contiguous tensors are
    refused (call .contiguous(), which copies).
    """
    return _core._from_dlpack(x)


def op(type: str, inputs: Sequence[Any], attrs: Optional[Mapping[str, Any]] = None,
       backend: Optional[str] = None) -> Operator:
    """An operator of ONNX type `type` created for these inputs (arrays; None for an omitted
    optional input) and attributes, on `backend` (default "reference").

    The operator is made for this problem, as in C++: forward(inputs) and backward(...) take
    arrays of the same shapes and types. d5.Unimplemented (with every implementation's refusal)
    when the backend cannot run it; d5.NotBuilt when this build left the backend out.
    """
    return _core._op(type, list(inputs), dict(attrs or {}), backend)


def test_forward(op: Operator, inputs: Sequence[Any], reference: Any = "reference",
                 rtol: Optional[float] = None, atol: Optional[float] = None, reruns: int = 3) -> dict:
    """Checks op's forward on `inputs` against the same problem on the `reference` backend, or
    against `reference` itself when it is a list of expected outputs (arrays).

    Returns {"state": "PASSED" | "FAILED" | "MISTRUSTED", "detail", "outputs": [{"index", "l1",
    "l2", "linf", "rel_l2", "max_abs_error", "max_rel_error", "mismatches", "rtol", "atol",
    "nondeterministic"}], "extra"}; tolerances default by dtype and op type (docs/validation.md).
    """
    if not isinstance(reference, str):
        reference = [None if r is None else (tensor(r) if _is_torch_tensor(r) else r) for r in reference]
    return _core._test_forward(op, list(inputs), reference, rtol, atol, reruns)


def test_gradient(op: Operator, inputs: Sequence[Any], eps: float = 0.0, rtol: float = 0.0, atol: float = 0.0,
                  seed: int = 0x5EED) -> dict:
    """Checks op's backward against central finite differences on `inputs` (0: by dtype).

    Returns {"state", "detail", "max_abs_error", "max_rel_error", "checked", "non_smooth"}.
    """
    return _core._test_gradient(op, list(inputs), eps, rtol, atol, seed)


def measure(fn, min_runs: int = 10, max_runs: int = 1000, max_time: float = 10.0, warmup: int = 2,
            target_ci: float = 0.02) -> dict:
    """Times fn() with d5's adaptive runner: `warmup` untimed calls, then calls until the 95% CI
    of the median is within `target_ci` of it (VALID) or a limit is reached (INVALID, saying which).

    {"validity": "VALID" | "INVALID", "reason", "runs", "warmup_runs", "seconds", "ci_ratio",
    "wall_time": {"samples" (raw seconds, in order), "summary" (median, CI, percentiles), ...}}.
    """
    return _core._measure(fn, min_runs, max_runs, max_time, warmup, target_ci)


def load_results(path: str) -> dict:
    """A d5 result file as a dict, read and checked as d5 reads it (FormatError otherwise)."""
    return _core._load_results(str(path))


def load_onnx(path: str) -> Network:
    """A network from an ONNX file (checked with ONNX's schemas; FormatError for a bad file)."""
    return _core._load_onnx(str(path))


def save_onnx(network: Network, path: str) -> None:
    """Writes the network, with its parameters, as an ONNX model."""
    _core._save_onnx(network, str(path))


def from_torch(module: Any, example_inputs: Sequence[Any], input_names: Optional[Sequence[str]] = None,
               output_names: Optional[Sequence[str]] = None, opset: int = 13) -> Network:
    """A torch.nn.Module as a d5 Network, through PyTorch's ONNX exporter in this process.

    The module is traced in eval mode on `example_inputs` (their shapes become the network's);
    inputs are named input_0, input_1, ... and outputs output_0, ... unless names are given.
    """
    import tempfile

    import torch

    inputs = tuple(example_inputs)
    names_in = list(input_names) if input_names else [f"input_{i}" for i in range(len(inputs))]
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            outputs = module(*inputs)
        n_out = len(outputs) if isinstance(outputs, (tuple, list)) else 1
        names_out = list(output_names) if output_names else [f"output_{i}" for i in range(n_out)]
        with tempfile.TemporaryDirectory(prefix="d5-from-torch-") as d:
            path = f"{d}/{type(module).__name__}.onnx"
            torch.onnx.export(module, inputs, path, opset_version=opset, input_names=names_in,
                              output_names=names_out)
            return load_onnx(path)
    finally:
        module.train(was_training)


def executor(network: Network, backend: str = "reference", deterministic: bool = False) -> Executor:
    """An executor of `network` on `backend` ("reference", "onednn", "torch", "cuda", ...).

    inference(feeds) and inference_and_backprop(feeds, loss) take {input name: array}; the
    executor keeps the network alive. d5.Unimplemented when the backend has no executor.
    """
    return _core._executor(network, backend, deterministic)


def test_executor(executor: Executor, feeds: Mapping[str, Any], reference: str = "reference",
                  loss: Optional[str] = None, rtol: Optional[float] = None, atol: Optional[float] = None) -> dict:
    """Compares the executor's outputs (and, with `loss`, a training step's loss and every
    parameter gradient) with the `reference` backend's on a copy of the network.

    The same dict as test_forward; tolerances default by the ops the tensors went through.
    """
    return _core._test_executor(executor, dict(feeds), reference, loss, rtol, atol)


def _is_torch_tensor(x: Any) -> bool:
    t = type(x)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter")
