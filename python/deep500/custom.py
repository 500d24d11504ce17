"""Operators written in Python: subclass CustomOperator, register it with register_op."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Tuple

from . import _core

Desc = Tuple[Tuple[int, ...], str]  # (shape, dtype name: "f32", "f64", "i64", ...)


class CustomOperator:
    """Base of an operator written in Python (NumPy or PyTorch on NumPy views).

    deep500 creates one instance per problem with the inputs' descriptors (None for an omitted
    optional input) and the node's attributes. Override:

    - ``output_descs()``: the outputs' (shape, dtype); default: one output like the first input;
    - ``forward(*inputs)``: the outputs (an array, or a tuple of arrays) for NumPy views of the
      inputs (valid during the call only: copy what you keep);
    - ``backward(grad_outputs, inputs, outputs)``: one gradient per input (None for inputs
      without one), optional: without it the operator has no gradient;
    - ``flops()``: operations of one forward call (a fused multiply-add counts 2).
    """

    def __init__(self, inputs: Sequence[Optional[Desc]], attrs: Mapping[str, Any]):
        self.inputs = list(inputs)
        self.attrs = dict(attrs)

    def output_descs(self) -> "list[Desc]":
        return [self.inputs[0]]

    def forward(self, *inputs):
        raise NotImplementedError(f"{type(self).__qualname__} defines no forward")

    def backward(self, grad_outputs, inputs, outputs):
        raise NotImplementedError(f"{type(self).__qualname__} defines no backward")

    def flops(self) -> float:
        return 0.0


def register_op(type_name: str, cls: type) -> None:
    """Makes `cls` (a CustomOperator subclass) the operator type `type_name` on every backend.

    Registering the same name again replaces the class for operators created afterwards.
    """
    if not (isinstance(cls, type) and issubclass(cls, CustomOperator)):
        raise _core.InvalidArgument(f"register_op('{type_name}', ...): {cls!r} is not a d5.CustomOperator subclass")
    has_backward = cls.backward is not CustomOperator.backward
    _core._register_op(type_name, cls, has_backward)
