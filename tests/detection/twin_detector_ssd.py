#!/usr/bin/env python3
"""PyTorch twin of `d5 train --model detector-ssd` on mnist-scenes, written from the published
description of SSD and torchvision's conventions, without d5's code: the same network (five 3x3
convolutions 16-32-64-64-64 with batch norm and ReLU, strides 1, 2, 2, 1, 2, no bias; a 3x3
prediction convolution on the stride-4 and the stride-8 map; four anchors per position, heights
11/15 and 19/25 pixels, width/height 0.35 and 0.75), the same loss (IoU matching at 0.5 plus each
object's best anchor, box offsets coded with weights 10, 10, 5, 5, smooth-L1 on the positives,
cross-entropy on the positives and three hard negatives per positive, over the positives), the
same post-processing (softmax, decoding, per class the scores above 0.01, at most 400, NMS at 0.45
by torchvision.ops.nms, the 100 best of an image) and COCO's AP (greedy matching per image and
class, the precision envelope read at 101 recall points, thresholds 0.5:0.95), Adam, batch and
epochs, and d5's test pass (batch norm on the batch's statistics, in batches of the training batch,
the last one padded with its first scene). The data are `d5 data export`'s NPY files (inputs [N, 1, 64, 64], labels [N, M] with -100
padding, boxes [N, M, 4]). Prints one JSON line per epoch with map50 and map on the test files.

Usage: twin_detector_ssd.py TRAIN_DIR TEST_DIR [--epochs E] [--batch B] [--lr LR] [--seed S]
                           [--save-predictions FILE]
"""
import argparse
import json
import math
import time

import numpy as np
import torch
import torchvision
from torch import nn
from torch.nn import functional as F

WEIGHTS = (10.0, 10.0, 5.0, 5.0)
FINE = [(11, 0.35), (11, 0.75), (15, 0.35), (15, 0.75)]
COARSE = [(19, 0.35), (19, 0.75), (25, 0.35), (25, 0.75)]


def block(cin, cout, stride):
    return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


class Ssd(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.per_anchor = 4 + classes + 1
        self.stem = nn.Sequential(*block(1, 16, 1), *block(16, 32, 2), *block(32, 64, 2), *block(64, 64, 1))
        self.down = nn.Sequential(*block(64, 64, 2))
        self.fine = nn.Conv2d(64, len(FINE) * self.per_anchor, 3, 1, 1)
        self.coarse = nn.Conv2d(64, len(COARSE) * self.per_anchor, 3, 1, 1)

    def head(self, conv, x, k):
        y = conv(x)
        n, _, h, w = y.shape
        return y.view(n, k, self.per_anchor, h, w).permute(0, 3, 4, 1, 2).reshape(n, h * w * k, self.per_anchor)

    def forward(self, x):
        a = self.stem(x)
        b = self.down(a)
        return torch.cat([self.head(self.fine, a, len(FINE)), self.head(self.coarse, b, len(COARSE))], 1)


def anchors(size):
    out = []
    for cells, shapes in ((size // 4, FINE), (size // 8, COARSE)):
        stride = size / cells
        for y in range(cells):
            for x in range(cells):
                cx, cy = (x + 0.5) * stride, (y + 0.5) * stride
                for h, aspect in shapes:
                    w = h * aspect
                    out.append([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])
    return torch.tensor(out, dtype=torch.float32)


def encode(boxes, priors):
    pw, ph = priors[:, 2] - priors[:, 0], priors[:, 3] - priors[:, 1]
    px, py = priors[:, 0] + pw / 2, priors[:, 1] + ph / 2
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    x, y = boxes[:, 0] + w / 2, boxes[:, 1] + h / 2
    return torch.stack([WEIGHTS[0] * (x - px) / pw, WEIGHTS[1] * (y - py) / ph,
                        WEIGHTS[2] * torch.log(w / pw), WEIGHTS[3] * torch.log(h / ph)], 1)


def decode(d, priors):
    pw, ph = priors[:, 2] - priors[:, 0], priors[:, 3] - priors[:, 1]
    px, py = priors[:, 0] + pw / 2, priors[:, 1] + ph / 2
    clip = math.log(1000.0 / 16)
    x, y = px + d[:, 0] / WEIGHTS[0] * pw, py + d[:, 1] / WEIGHTS[1] * ph
    w = pw * torch.exp(torch.clamp(d[:, 2] / WEIGHTS[2], max=clip))
    h = ph * torch.exp(torch.clamp(d[:, 3] / WEIGHTS[3], max=clip))
    return torch.stack([x - w / 2, y - h / 2, x + w / 2, y + h / 2], 1)


def ssd_loss(pred, boxes, labels, priors):
    box_sum, ce_sum, positives = 0.0, 0.0, 0
    for p, b, l in zip(pred, boxes, labels):
        keep = l != -100
        b, l = b[keep], l[keep]
        target = torch.zeros(len(priors), dtype=torch.long)
        ce_all = None
        if len(l):
            iou = torchvision.ops.box_iou(priors, b)  # [A, objects]
            best, which = iou.max(1)
            matched = torch.where(best >= 0.5, which, torch.full_like(which, -1))
            for j in range(len(l)):  # each object claims its best anchor, later objects winning
                a = int(iou[:, j].argmax())
                if iou[a, j] > 0:
                    matched[a] = j
            pos = matched >= 0
            target[pos] = l[matched[pos]] + 1
            box_sum = box_sum + F.smooth_l1_loss(p[pos, :4], encode(b[matched[pos]], priors[pos]), reduction="sum")
            positives += int(pos.sum())
        ce_all = F.cross_entropy(p[:, 4:], target, reduction="none")
        pos = target > 0
        n_neg = min(3 * int(pos.sum()), int((~pos).sum()))
        neg_loss = ce_all.detach().clone()
        neg_loss[pos] = -math.inf
        hard = torch.argsort(neg_loss, descending=True, stable=True)[:n_neg]
        ce_sum = ce_sum + ce_all[pos].sum() + ce_all[hard].sum()
    return (box_sum + ce_sum) / max(1, positives)


def detections(pred, priors):
    out = []
    for p in pred:
        scores = p[:, 4:].softmax(1)
        boxes = decode(p[:, :4], priors)
        found = []
        for c in range(1, scores.shape[1]):
            s = scores[:, c]
            idx = torch.nonzero(s > 0.01).flatten()
            idx = idx[torch.argsort(s[idx], descending=True, stable=True)][:400]
            kept = torchvision.ops.nms(boxes[idx], s[idx], 0.45)
            found += [(c - 1, float(s[idx[k]]), boxes[idx[k]].tolist()) for k in kept]
        found.sort(key=lambda d: -d[1])
        out.append(found[:100])
    return out


def iou(a, b):
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def average_precision(dets, truths, threshold):
    """dets: (image, score, box) of one class; truths: {image: [box]}. COCO's 101-point AP."""
    total = sum(len(v) for v in truths.values())
    hits = []
    taken = {k: [False] * len(v) for k, v in truths.items()}
    for image, score, box in sorted(dets, key=lambda d: -d[1]):
        best, match = min(threshold, 1 - 1e-10), -1
        for k, t in enumerate(truths.get(image, [])):
            if taken[image][k]:
                continue
            o = iou(box, t)
            if o >= best:
                best, match = o, k
        if match >= 0:
            taken[image][match] = True
        hits.append(match >= 0)
    tp = np.cumsum(hits)
    recall = tp / total
    precision = tp / np.arange(1, len(hits) + 1)
    for i in range(len(precision) - 1, 0, -1):
        precision[i - 1] = max(precision[i - 1], precision[i])
    points = np.linspace(0, 1, 101)
    at = np.searchsorted(recall, points, side="left")
    return sum(precision[i] for i in at if i < len(precision)) / 101


def coco_map(all_dets, labels, boxes):
    truths = {}
    for image, (l, b) in enumerate(zip(labels.tolist(), boxes.tolist())):
        for c, box in zip(l, b):
            if c != -100:
                truths.setdefault(c, {}).setdefault(image, []).append(box)
    thresholds = np.linspace(0.5, 0.95, 10)
    table = []
    for c, per_image in sorted(truths.items()):
        dets = [(image, s, box) for image, found in enumerate(all_dets) for (k, s, box) in found if k == c]
        table.append([average_precision(dets, per_image, t) for t in thresholds])
    table = np.array(table)
    return float(table[:, 0].mean()), float(table.mean())


def load(directory):
    return (torch.from_numpy(np.load(f"{directory}/inputs.npy")).float(),
            torch.from_numpy(np.load(f"{directory}/labels.npy")), torch.from_numpy(np.load(f"{directory}/boxes.npy")))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("train")
    p.add_argument("test")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--save-predictions", default="", help="an NPY file for the last test pass's raw predictions")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    x, y, b = load(a.train)
    tx, ty, tb = load(a.test)
    priors = anchors(x.shape[-1])
    model = Ssd(10)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    start = time.time()
    for epoch in range(1, a.epochs + 1):
        model.train()
        order = torch.randperm(len(y))
        losses = []
        for i in range(0, len(y) - a.batch + 1, a.batch):
            idx = order[i:i + a.batch]
            opt.zero_grad()
            loss = ssd_loss(model(x[idx]), b[idx], y[idx], priors)
            loss.backward()
            opt.step()
            losses.append(float(loss))
        found, raw = [], []
        with torch.no_grad():  # as d5's test pass: batch statistics, batches of the training batch
            for i in range(0, len(ty), a.batch):
                rows = list(range(i, min(i + a.batch, len(ty))))
                pred = model(tx[rows + [i] * (a.batch - len(rows))])[:len(rows)]
                found += detections(pred, priors)
                raw.append(pred)
        if a.save_predictions:
            np.save(a.save_predictions, torch.cat(raw).numpy())
        map50, mean = coco_map(found, ty, tb)
        print(json.dumps({"epoch": epoch, "map50": map50, "map": mean, "train_loss": float(np.mean(losses)),
                          "seconds": round(time.time() - start, 3)}),
              flush=True)


if __name__ == "__main__":
    main()
