#!/usr/bin/env python3
"""PyTorch twin of `d5 train --model text-lstm`: the same architecture (a 64-wide embedding, one
128-unit LSTM layer, a linear classifier on the last step), optimizer (Adam), batch, epochs and
data, written in PyTorch alone. The data are `d5 data export`'s NPY files of wordnet-glosses, so
both read the same ids. Prints one JSON line per epoch: the test accuracy after it.

Usage: twin_text_lstm.py TRAIN_DIR TEST_DIR --vocabulary V --classes C [--epochs E] [--batch B]
       [--lr LR] [--seed S]
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import twin_classifier  # noqa: E402


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
    a = twin_classifier.arguments(__doc__, 0.002, [("--vocabulary", int, None), ("--classes", int, None)])
    torch.manual_seed(a.seed)
    twin_classifier.train(TextLstm(a.vocabulary, a.classes), a)


if __name__ == "__main__":
    main()
