"""The model zoo: the networks `d5 models list` prints, built with their parameters."""
from __future__ import annotations

import builtins

from typing import Optional, Sequence

from . import _core


def create(name: str, batch: int = 1, classes: int = 0, input_shape: Optional[Sequence[int]] = None,
           with_loss: bool = False, training: bool = False, seed: int = 0x5EED,
           vocabulary: int = 0) -> "_core.Network":
    """A zoo network (`lenet5`, `resnet18`, ...) at `batch`, with seeded parameters.

    classes / input_shape / vocabulary 0 / None / 0: the model's defaults. with_loss adds softmax
    cross-entropy against a `labels` input (output `loss`); training keeps batch-norm statistics
    and dropout. vocabulary: the token ids a text model (`text-lstm`, `text-transformer`, the
    language model `text-lstm-lm`, whose logits score every position) reads, e.g. a text dataset's
    `vocabulary`; other models refuse one.
    """
    return _core._create_model(name, batch, classes, builtins.list(input_shape or []), with_loss, training, seed,
                               vocabulary)


def list() -> "builtins.list[dict]":  # noqa: A001  (the API's name)
    """{"name", "description", "default_input", "default_classes", "default_vocabulary",
    "per_position", "loss"} of every model (per_position: a language model, logits for every
    position; loss: the loss head with_loss appends, softmax-ce, sequence-ce or ctc)."""
    return _core._list_models()
