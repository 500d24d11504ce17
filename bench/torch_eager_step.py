#!/usr/bin/env python3
"""d5's training step against PyTorch eager on the same network, batch and device, side by side in
one run (docs/benchmarks.md#d5-against-pytorch-eager).

Each round runs `d5 net MODEL --mode train-step --resident-io` (forward and backward from the
loss, no update; the batch placed on the device once, as PyTorch's is; its median step over
--steps runs) and the same step in PyTorch eager mode (the zoo's layers
written in torch.nn, cuDNN with benchmark mode on a GPU, no compilation; the median of --steps
synchronised steps), in alternating order. The round's ratio is PyTorch's median step over d5's:
d5's throughput as a fraction of PyTorch's. Reported: the ratios' median with its
distribution-free 95% CI (from `d5 stats`), both sides' medians, and the settings. Both sides use the same f32 math:
--math strict and fast turn TF32 off in PyTorch as in d5; --math tf32 allows it in both. PyTorch's
benchmark mode may pick any cuDNN algorithm, FFT, Winograd and non-deterministic ones included,
which is what d5's --math fast allows; under strict d5 keeps to direct sums, deterministic first
(--deterministic holds PyTorch to deterministic algorithms, the nearest it has).

Usage: bench/torch_eager_step.py D5_BINARY [--model resnet50] [--batch 64] [--device cuda]
           [--backend cuda] [--rounds 5] [--steps 20] [--math strict|tf32|fast] [--deterministic]
           [-o result.json]
Exit status 2 when the PyTorch model is not d5's (parameter counts differ) or d5's case is not
PASSED; 1 when d5 does not run.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn

# d5's zoo parameter counts at its default classes: the check that both sides run one network.
PARAMETERS = {"lenet5": 61_706, "resnet18": 11_689_512, "resnet50": 25_557_032}


def lenet5():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


class Block(nn.Module):
    """A residual block as d5's zoo (and torchvision) builds it: basic or bottleneck ("v1.5", the
    stride on the 3x3 convolution), a 1x1 projection where the shape changes."""

    def __init__(self, cin, planes, stride, bottleneck):
        super().__init__()
        out = planes * (4 if bottleneck else 1)

        def conv_bn(i, o, k, s):
            return [nn.Conv2d(i, o, k, s, k // 2, bias=False), nn.BatchNorm2d(o)]
        if bottleneck:
            layers = conv_bn(cin, planes, 1, 1) + [nn.ReLU()] + conv_bn(planes, planes, 3, stride) + [nn.ReLU()] + \
                conv_bn(planes, out, 1, 1)
        else:
            layers = conv_bn(cin, planes, 3, stride) + [nn.ReLU()] + conv_bn(planes, planes, 3, 1)
        self.body = nn.Sequential(*layers)
        self.shortcut = nn.Sequential(*conv_bn(cin, out, 1, stride)) if stride != 1 or cin != out else None

    def forward(self, x):
        return torch.relu(self.body(x) + (self.shortcut(x) if self.shortcut is not None else x))


def resnet(blocks, bottleneck, classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, count in enumerate(blocks):
        planes = 64 << stage
        for i in range(count):
            layers.append(Block(cin, planes, 2 if stage > 0 and i == 0 else 1, bottleneck))
            cin = planes * (4 if bottleneck else 1)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


MODELS = {"lenet5": (lenet5, (1, 28, 28)),
          "resnet18": (lambda: resnet([2, 2, 2, 2], False), (3, 224, 224)),
          "resnet50": (lambda: resnet([3, 4, 6, 3], True), (3, 224, 224))}


def ratio_summary(d5, ratios):
    """`d5 stats` of the rounds' ratios: the median and its distribution-free 95% CI, or why not."""
    run = subprocess.run([d5, "stats", "-", "--format", "json"], input="\n".join(map(repr, ratios)),
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"torch_eager_step: d5 stats failed ({run.returncode}): {run.stderr.strip()}")
    return json.loads(run.stdout)


def eager_step_seconds(model, shape, batch, device, steps):
    x = torch.randn(batch, *shape, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        for p in model.parameters():
            p.grad = None
        loss_fn(model(x), y).backward()

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def d5_step_seconds(d5, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [d5, "--math", args.math, "net", args.model, "--backend", args.backend, "--mode", "train-step",
               "--batch", str(args.batch), "--no-validate", "--resident-io", "--min-runs", str(args.steps),
               "--max-time", "30",
               "--format", "json", "-o", out.name]
        if args.threads:
            cmd[1:1] = ["--threads", str(args.threads)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"torch_eager_step: d5 failed ({run.returncode}): {run.stderr.strip()[-2000:]}")
        case = json.load(open(out.name))["cases"][0]
    if case["state"] != "PASSED":
        print(f"torch_eager_step: d5's case is {case['state']}: {case.get('detail', '')}", file=sys.stderr)
        sys.exit(2)
    latency = next(m for m in case["metrics"] if m["name"] == "latency")
    return latency["summary"]["median"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("d5")
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", default=None, help="d5's executor (default: cuda on a GPU, else onednn)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--math", default="strict", choices=["strict", "tf32", "fast"])
    ap.add_argument("--deterministic", action="store_true", help="PyTorch's cudnn.deterministic")
    ap.add_argument("--threads", type=int, default=0, help="host threads of both sides (0: their defaults)")
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    args.backend = args.backend or ("cuda" if args.device.startswith("cuda") else "onednn")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cudnn.allow_tf32 = args.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = args.math == "tf32"
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = args.deterministic
    build, shape = MODELS[args.model]
    torch.manual_seed(0)
    model = build().to(args.device).train()
    params = sum(p.numel() for p in model.parameters())
    if params != PARAMETERS[args.model]:
        print(f"torch_eager_step: the PyTorch {args.model} has {params} parameters, d5's {PARAMETERS[args.model]}",
              file=sys.stderr)
        sys.exit(2)
    d5_s, eager_s, ratios = [], [], []
    for r in range(args.rounds):
        if r % 2 == 0:  # neither side always inherits the other's clocks and caches
            a = d5_step_seconds(args.d5, args)
            b = eager_step_seconds(model, shape, args.batch, args.device, args.steps)
        else:
            b = eager_step_seconds(model, shape, args.batch, args.device, args.steps)
            a = d5_step_seconds(args.d5, args)
        d5_s.append(a)
        eager_s.append(b)
        ratios.append(b / a)
        print(f"round {r + 1}: d5 {a * 1e3:.3f} ms, PyTorch eager {b * 1e3:.3f} ms, ratio {b / a:.3f}", flush=True)
    summary = ratio_summary(args.d5, ratios)
    ci = summary["median_ci"]
    result = {"model": args.model, "batch": args.batch, "device": args.device, "d5_backend": args.backend,
              "math": args.math, "torch_deterministic": args.deterministic, "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version() if args.device.startswith("cuda") else None,
              "parameters": params, "rounds": args.rounds, "steps_per_side": args.steps,
              "d5_step_seconds": d5_s, "eager_step_seconds": eager_s, "ratio": ratios,
              "ratio_median": summary["median"], "ratio_ci95": ci}
    ci_text = f"[{ci['lower']:.3f}, {ci['upper']:.3f}]" if ci["available"] else f"(no CI: {ci['reason']})"
    print(f"{args.model} batch {args.batch} on {args.device}, {args.math} f32: d5 ({args.backend}) throughput / "
          f"PyTorch eager's = {summary['median']:.3f} {ci_text} over {args.rounds} rounds")
    if args.output:
        with open(args.output, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
