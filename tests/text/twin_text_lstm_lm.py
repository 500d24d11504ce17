#!/usr/bin/env python3
"""PyTorch twin of `d5 train --model text-lstm-lm --loss sequence-ce` on wordnet-glosses with
task=next-piece: the same architecture (a 64-wide embedding, one 128-unit LSTM layer over every
position, a linear layer scoring the vocabulary at each position), loss (softmax cross-entropy
over the labelled positions, -100 ignored, mean over them), optimizer (Adam), batch, epochs and
data, written in PyTorch alone. The data are `d5 data export`'s NPY files, so both read the same
ids. Prints one JSON line per epoch: the test perplexity per piece after it (exp of the mean
negative log-likelihood over every labelled test position, as d5's `perplexity`).

Usage: twin_text_lstm_lm.py TRAIN_DIR TEST_DIR --vocabulary V [--epochs E] [--batch B] [--lr LR]
       [--seed S]
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import twin_classifier  # noqa: E402

IGNORED = -100


class TextLstmLm(nn.Module):
    def __init__(self, vocabulary):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, 64)
        self.lstm = nn.LSTM(64, 128, batch_first=True)
        self.fc = nn.Linear(128, vocabulary)

    def forward(self, ids):
        return self.fc(self.lstm(self.embedding(ids))[0])  # [N, L, V]


def sequence_loss(scores, labels):
    return nn.functional.cross_entropy(scores.transpose(1, 2), labels, ignore_index=IGNORED)


def perplexity(model, tx, ty):
    nll = 0.0
    positions = 0
    with torch.no_grad():
        for i in range(0, len(ty), 256):
            labels = ty[i:i + 256]
            nll += float(nn.functional.cross_entropy(model(tx[i:i + 256]).transpose(1, 2), labels,
                                                     ignore_index=IGNORED, reduction="sum"))
            positions += int((labels != IGNORED).sum())
    return math.exp(nll / positions)


def main():
    a = twin_classifier.arguments(__doc__, 0.003, [("--vocabulary", int, None)])
    torch.manual_seed(a.seed)
    twin_classifier.train(TextLstmLm(a.vocabulary), a, loss=sequence_loss, measure=("perplexity", perplexity))


if __name__ == "__main__":
    main()
