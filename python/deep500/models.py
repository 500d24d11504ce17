"""The model zoo: the networks `d5 models list` prints, built with their parameters."""
from __future__ import annotations

import builtins

from typing import Optional, Sequence

from . import _core


def create(name: str, batch: int = 1, classes: int = 0, input_shape: Optional[Sequence[int]] = None,
           with_loss: bool = False, training: bool = False, seed: int = 0x5EED) -> "_core.Network":
    """A zoo network (`lenet5`, `resnet18`, ...) at `batch`, with seeded parameters.

    classes / input_shape 0 / None: the model's defaults. with_loss adds softmax cross-entropy
    against a `labels` input (output `loss`); training keeps batch-norm statistics and dropout.
    """
    return _core._create_model(name, batch, classes, builtins.list(input_shape or []), with_loss, training, seed)


def list() -> "builtins.list[dict]":  # noqa: A001  (the API's name)
    """{"name", "description", "default_input", "default_classes"} of every model."""
    return _core._list_models()
