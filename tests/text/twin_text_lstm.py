#!/usr/bin/env python3
"""PyTorch twin of `d5 train --model text-lstm`: the same architecture (a 64-wide embedding, one
128-unit LSTM layer, a linear classifier on the last step), optimizer (Adam), batch, epochs and
data, written in PyTorch alone. The data are `d5 data export`'s NPY files of wordnet-glosses, so
both read the same ids. Prints one JSON line per epoch: the test accuracy after it.

Usage: twin_text_lstm.py TRAIN_DIR TEST_DIR --vocabulary V --classes C [--epochs E] [--batch B]
       [--lr LR] [--seed S]
"""
import argparse
import json
import time

import numpy as np
import torch
from torch import nn


class TextLstm(nn.Module):
    def __init__(self, vocabulary, classes):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, 64)
        self.lstm = nn.LSTM(64, 128, batch_first=True)
        self.fc = nn.Linear(128, classes)

    def forward(self, ids):
        _, (h, _) = self.lstm(self.embedding(ids))
        return self.fc(h[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("train")
    p.add_argument("test")
    p.add_argument("--vocabulary", type=int, required=True)
    p.add_argument("--classes", type=int, required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    x = torch.from_numpy(np.load(f"{a.train}/inputs.npy"))
    y = torch.from_numpy(np.load(f"{a.train}/labels.npy"))
    tx = torch.from_numpy(np.load(f"{a.test}/inputs.npy"))
    ty = torch.from_numpy(np.load(f"{a.test}/labels.npy"))
    model = TextLstm(a.vocabulary, a.classes)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    rng = np.random.default_rng(a.seed)
    start = time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        model.train()
        order = torch.from_numpy(rng.permutation(len(y)))
        for b in range(0, len(y) - a.batch + 1, a.batch):  # whole batches, as d5's shuffle sampler
            idx = order[b:b + a.batch]
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(tx[i:i + 512]).argmax(1) == ty[i:i + 512]).sum()) for i in range(0, len(ty), 512))
        print(json.dumps({"epoch": epoch, "test_accuracy": correct / len(ty),
                          "seconds": round(time.perf_counter() - start, 3)}), flush=True)


if __name__ == "__main__":
    main()
