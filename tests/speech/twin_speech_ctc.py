#!/usr/bin/env python3
"""PyTorch twin of `d5 train --model speech-ctc --loss ctc` on spoken-digits: the same
architecture (two convolutions with batch norm, the second halving only the frequency axis, a
bidirectional 128-unit LSTM over the time steps, a per-step linear layer), loss (log-softmax and
CTC, blank 0, mean over the batch of each sequence's loss divided by its length, as
torch.nn.CTCLoss's default), optimizer (Adam), batch, epochs and data, written in PyTorch alone.
The data are `d5 data export`'s NPY files (log-mel spectrograms; labels padded with -100). Prints
one JSON line per epoch: the character error rate of greedy decoding on the test split after it
(edits summed over reference lengths summed).

Usage: twin_speech_ctc.py TRAIN_DIR TEST_DIR [--epochs E] [--batch B] [--lr LR] [--seed S]
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import twin_classifier  # noqa: E402


class SpeechCtc(nn.Module):
    def __init__(self, bins, classes, bidirectional=True):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 32, 5, stride=2, padding=2), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.Conv2d(32, 32, 3, stride=(1, 2), padding=1), nn.BatchNorm2d(32), nn.ReLU())
        width = 32 * (((bins + 1) // 2 + 1) // 2)
        self.lstm = nn.LSTM(width, 128, batch_first=True, bidirectional=bidirectional)
        self.fc = nn.Linear(256 if bidirectional else 128, classes)

    def forward(self, x):
        y = self.conv(x)  # [N, 32, T', F']
        y = y.permute(0, 2, 1, 3).flatten(2)  # [N, T', 32 F']
        return self.fc(self.lstm(y)[0])  # [N, T', classes]


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def error_rate(model, tx, ty):
    edits = total = 0
    with torch.no_grad():
        for i in range(0, len(ty), 256):
            best = model(tx[i:i + 256]).argmax(-1)
            for row, labels in zip(best.tolist(), ty[i:i + 256].tolist()):
                decoded = [c for k, c in enumerate(row) if c != 0 and (k == 0 or c != row[k - 1])]
                reference = [c for c in labels if c != -100]
                edits += edit_distance(decoded, reference)
                total += len(reference)
    return edits / total


def ctc_loss(scores, labels):
    """Log-softmax and CTC (blank 0), each sequence's loss over its length, mean over the batch
    (nn.CTCLoss's default reduction), zero_infinity as d5's ctc head."""
    log_probs = scores.log_softmax(-1).transpose(0, 1)  # [T, N, C]
    steps = torch.full((labels.shape[0],), log_probs.shape[0], dtype=torch.long)
    return nn.functional.ctc_loss(log_probs, labels.clamp(min=0), steps, (labels != -100).sum(1), blank=0,
                                  zero_infinity=True)


def main():
    a = twin_classifier.arguments(__doc__, 0.003, [("--unidirectional", int, 0)])
    torch.manual_seed(a.seed)
    bins = twin_classifier.load(a.test)[0].shape[-1]
    model = SpeechCtc(bins, 11, bidirectional=not a.unidirectional)
    twin_classifier.train(model, a, loss=ctc_loss, measure=("cer", error_rate))


if __name__ == "__main__":
    main()
