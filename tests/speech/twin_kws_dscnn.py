#!/usr/bin/env python3
"""PyTorch twin of `d5 train --model kws-dscnn` on spoken-words: the same architecture (MLPerf
Tiny's DS-CNN: a 10x4 stride-2 convolution to 64 channels, four depthwise-separable blocks, batch
norm, dropout 0.2 and 0.4, global average pooling, a linear classifier), optimizer (Adam), batch,
epochs and data, written in PyTorch alone. The data are `d5 data export`'s NPY files of the MFCCs,
so both read the same features. Prints one JSON line per epoch: the test accuracy after it.

Usage: twin_kws_dscnn.py TRAIN_DIR TEST_DIR [--classes C] [--epochs E] [--batch B] [--lr LR]
       [--seed S]
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import twin_classifier  # noqa: E402


def bn_relu(channels):
    return [nn.BatchNorm2d(channels), nn.ReLU()]


class KwsDsCnn(nn.Module):
    def __init__(self, classes, filters=64, blocks=4):
        super().__init__()
        layers = [nn.Conv2d(1, filters, (10, 4), stride=2, padding=(5, 1)), *bn_relu(filters), nn.Dropout(0.2)]
        for _ in range(blocks):
            layers += [nn.Conv2d(filters, filters, 3, padding=1, groups=filters), *bn_relu(filters),
                       nn.Conv2d(filters, filters, 1), *bn_relu(filters)]
        layers += [nn.Dropout(0.4), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(filters, classes)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def main():
    a = twin_classifier.arguments(__doc__, 0.003, [("--classes", int, 12)])
    torch.manual_seed(a.seed)
    model = KwsDsCnn(a.classes)
    assert sum(t.numel() for t in model.parameters()) == 23756 - 12 * 65 + 65 * a.classes
    twin_classifier.train(model, a)


if __name__ == "__main__":
    main()
