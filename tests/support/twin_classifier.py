"""What the PyTorch twins of `d5 train` classifiers share: the NPY files of `d5 data export`, and
the training loop d5's trainer runs (Adam, whole shuffled batches, a test pass after each epoch)
written in PyTorch alone. Prints one JSON line per epoch: the test measure after it (accuracy
unless the twin names another)."""
import argparse
import json
import time

import numpy as np
import torch
from torch import nn


def arguments(description, lr, extra=()):
    """TRAIN_DIR TEST_DIR [--epochs E] [--batch B] [--lr LR] [--seed S], plus `extra`
    (name, type, default) options."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("train")
    p.add_argument("test")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--seed", type=int, default=1)
    for name, kind, default in extra:
        p.add_argument(name, type=kind, default=default, required=default is None)
    return p.parse_args()


def load(directory):
    return (torch.from_numpy(np.load(f"{directory}/inputs.npy")), torch.from_numpy(np.load(f"{directory}/labels.npy")))


def load_with_decoder_input(directory):
    """A translation set's export: the source ids and the decoder's ids side by side in one
    [N, S + T] tensor (the model splits them), and the labels."""
    x, y = load(directory)
    return torch.cat([x, torch.from_numpy(np.load(f"{directory}/decoder_input.npy"))], dim=1), y


def accuracy(model, tx, ty):
    with torch.no_grad():
        correct = sum(int((model(tx[i:i + 512]).argmax(1) == ty[i:i + 512]).sum()) for i in range(0, len(ty), 512))
    return correct / len(ty)


def train(model, a, loss=nn.functional.cross_entropy, measure=("accuracy", accuracy), loader=load):
    """Adam on loss(model(x), y) (softmax cross-entropy by default) over a.epochs epochs of whole
    shuffled batches; after each, measure[1](model, test inputs, test labels) as measure[0]."""
    torch.set_num_threads(1)
    x, y = loader(a.train)
    tx, ty = loader(a.test)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    rng = np.random.default_rng(a.seed)
    start = time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        model.train()
        order = torch.from_numpy(rng.permutation(len(y)))
        for b in range(0, len(y) - a.batch + 1, a.batch):  # whole batches, as d5's shuffle sampler
            idx = order[b:b + a.batch]
            opt.zero_grad()
            loss(model(x[idx]), y[idx]).backward()
            opt.step()
        model.eval()
        print(json.dumps({"epoch": epoch, measure[0]: measure[1](model, tx, ty),
                          "seconds": round(time.perf_counter() - start, 3)}), flush=True)
