"""Level 2 from Python: datasets, samplers, optimizers, update rules written in Python, training."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from . import _core


def dataset(name: str, data_dir: str = "", split: str = "train", seed: int = 0, **options: Any) -> "_core.Dataset":
    """A dataset of d5's formats ("mnist", "cifar10", "npy", "synthetic", "synthetic-learnable", ...).

    Keyword options are the format's (as `d5 train --set KEY=VALUE`): shape="1x28x28",
    classes=10, samples=1000, range="0:512", ...
    """
    return _core._dataset(name, str(data_dir), split, seed, {k: str(v) for k, v in options.items()})


def sampler(name: str, dataset: "_core.Dataset", batch: int, seed: int = 0, drop_last: bool = True) -> "_core.Sampler":
    """A sampler ("shuffle", "ordered", "bucket", "choice", "balanced") over `dataset`."""
    return _core._sampler(name, dataset, batch, seed, drop_last)


def data_loader(dataset: "_core.Dataset", sampler: Optional["_core.Sampler"] = None, batch: Optional[int] = None,
                seed: int = 0, prefetch: int = 2, workers: int = 1) -> "_core.DataLoader":
    """d5's data loader over `dataset`: `workers` C++ threads fetch and assemble up to `prefetch`
    batches ahead of the consumer, without the GIL (prefetch 0: each batch is made in next()).
    The batches and their order are the sampler's (the loader draws from one of its own made like
    it, from the first epoch; default a shuffling sampler of `batch` with `seed`), whatever
    prefetch and workers are.
    `for batch in loader` runs over one epoch, as dicts of d5.Tensors; the next loop, the next epoch."""
    if sampler is None:
        if batch is None:
            raise _core.InvalidArgument("data_loader: give a sampler, or the batch size of a shuffling one")
        sampler = globals()["sampler"]("shuffle", dataset, batch, seed)
    return _core._data_loader(dataset, sampler, prefetch, workers)


class UpdateRule:
    """An update rule written in Python, driven by d5's trainer (the original work's UpdateRule).

    Override ``update(param, grad, state)``: `param` and `grad` are NumPy views of the network's
    own buffers (update `param` in place, e.g. ``param -= lr * grad``; nothing is copied), `state`
    a dict kept per parameter across steps. ``self.lr`` is the learning rate of the current step.
    """

    def __init__(self, lr: float = 0.01):
        self.lr = lr
        self.base_lr = lr
        self.states: Dict[str, dict] = {}

    def update(self, param, grad, state: dict) -> None:
        raise NotImplementedError(f"{type(self).__qualname__} defines no update")

    def _apply(self, name: str, param, grad, lr: float) -> None:
        self.lr = lr
        self.update(param, grad, self.states.setdefault(name, {}))


def optimizer(name_or_rule: Any, executor: "_core.Executor", **hyper: float) -> "_core.Optimizer":
    """An optimizer for `executor`: a built-in one by name ("sgd", "momentum", "adam", "adamw",
    "adagrad", "rmsprop", "accelegrad", "torch-adam", ...; keyword hyper-parameters as in
    torch.optim: lr=, momentum=, ...) or an UpdateRule instance.
    """
    if isinstance(name_or_rule, UpdateRule):
        if hyper:
            raise _core.InvalidArgument(
                f"hyper-parameters {sorted(hyper)} for a Python UpdateRule: give them to its constructor")
        return _core._python_rule_optimizer(name_or_rule, executor, float(name_or_rule.base_lr))
    return _core._optimizer(str(name_or_rule), executor, {k: float(v) for k, v in hyper.items()})


def optimizers() -> "list[tuple[str, str]]":
    """(name, description) of every built-in optimizer."""
    return _core._optimizer_names()


class Trainer:
    """Trains the optimizer's executor on `dataset`, as `d5 train` does (d5's Trainer).

    Batches come from `sampler` (default a shuffling one of `batch` with `seed`), fetched in each
    step, or from `loader` (d5.data_loader: produced ahead by its workers, as `d5 train
    --prefetch` does; its dataset is the training set, `dataset` may then be left out).
    train() returns the result case `d5 train` writes (metrics step_time, throughput, loss,
    training_accuracy, test_<measure>, time_to_target; curves in "extra"), as a dict.
    """

    def __init__(self, optimizer: "_core.Optimizer", dataset: Optional["_core.Dataset"] = None,
                 test_set: Optional["_core.Dataset"] = None, sampler: Optional["_core.Sampler"] = None,
                 batch: Optional[int] = None, seed: int = 0, loader: Optional["_core.DataLoader"] = None):
        if loader is not None:
            if sampler is not None or batch is not None:
                raise _core.InvalidArgument("Trainer: a loader brings its own sampler; give the loader, or a sampler")
            batches = loader
        elif sampler is not None:
            batches = sampler
        elif dataset is None:
            raise _core.InvalidArgument("Trainer: give a dataset (with a sampler or a batch size), or a data loader")
        elif batch is None:
            raise _core.InvalidArgument("Trainer: give a sampler, or the batch size of a shuffling one")
        else:
            batches = globals()["sampler"]("shuffle", dataset, batch, seed)
        self.optimizer, self.dataset, self.test_set, self.batches = optimizer, dataset, test_set, batches
        self._trained = False
        self._events: list = []

    def on(self, event: str, fn) -> "Trainer":
        """Calls fn(progress) on a training event: before_training, after_training, before_epoch,
        after_epoch, before_test; fn(progress, batch) on before_batch, fn(progress, outputs) on
        after_batch, fn(progress, value) on after_test. `progress` holds epoch, step, samples,
        training_time_s, wall_time_s, last_loss, last_test_quality. Returning False stops the run
        (StopReason "event"). Returns the trainer, for chaining."""
        self._events.append((event, fn))
        return self

    def train(self, epochs: int = 1, max_steps: int = 0, target: Optional[str] = None,
              quality: Sequence[str] = ("accuracy",), time_limit: float = 0.0) -> dict:
        """Until `epochs`, `max_steps`, `time_limit` (s) or the quality `target` ("accuracy>=0.9")."""
        if self._trained:
            raise _core.InvalidArgument("Trainer.train() runs once; make another Trainer to train again")
        self._trained = True
        return _core._train(self.optimizer, self.dataset, self.test_set, self.batches, epochs, max_steps, target,
                            list(quality), time_limit, self._events)


def test_optimizer(optimizer: Any, twin: str, model: str = "lenet5", batch: int = 16, steps: int = 1,
                   backend: str = "reference", seed: int = 0, **hyper: float) -> dict:
    """Trains two copies of a zoo model from the same parameters on the same batch for `steps`
    steps, one with `optimizer` (a name or an UpdateRule), one with `twin` (a name: "sgd",
    "torch-adam", ...), and compares every parameter: max_i |a_i - b_i| / max_i |b_i|.

    Keyword hyper-parameters go to both (to an UpdateRule as attributes of its copy; lr as its
    rate). {"optimizer", "twin", "backend", "steps", "relative_difference" (per parameter),
    "max_relative_difference", "worst_parameter"}.
    """
    import numpy as np

    def dims(desc: str) -> "list[int]":  # "f32[16, 1, 28, 28]" -> [16, 1, 28, 28]
        inside = desc[desc.index("[") + 1:desc.index("]")]
        return [int(x) for x in inside.split(",") if x.strip()]

    net = _core._create_model(model, batch, 0, [], True, False, seed)
    classes = dims(net.outputs["logits"])[-1]
    rng = np.random.default_rng(seed)
    feeds = {name: (rng.integers(0, classes, size=dims(desc), dtype=np.int64) if desc.startswith("i64")
                    else rng.standard_normal(dims(desc)).astype(np.float32))
             for name, desc in net.inputs.items()}
    if isinstance(optimizer, UpdateRule) or isinstance(optimizer, str):
        return _core._test_optimizer(optimizer, twin, model, batch, feeds, {k: float(v) for k, v in hyper.items()},
                                     steps, backend, seed)
    raise _core.InvalidArgument(f"test_optimizer: {optimizer!r} is neither an optimizer's name nor a d5.UpdateRule")


def test_training(optimizer: "_core.Optimizer", dataset: Optional["_core.Dataset"] = None,
                  test_set: Optional["_core.Dataset"] = None, batch: Optional[int] = None,
                  sampler: Optional["_core.Sampler"] = None, seed: int = 0,
                  loader: Optional["_core.DataLoader"] = None, **train_options: Any) -> dict:
    """The original work's entry point: one Trainer, trained once; the result case as a dict."""
    return Trainer(optimizer, dataset, test_set, sampler, batch, seed, loader).train(**train_options)
