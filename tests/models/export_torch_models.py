#!/usr/bin/python3
"""Exports networks with PyTorch's own ONNX exporter into ONNX test cases: OUT/NAME/model.onnx and
OUT/NAME/test_data_set_0/{input_0,output_0}.pb, the output being PyTorch's for a fixed input.
CTest runs it before the model tests (fixture torch_models); `d5 onnx-test OUT` then runs them.

Nothing is downloaded: torchvision architectures are built with weights=None and random weights
from a fixed seed, in eval mode. A case is rebuilt only when this script, torch or torchvision
changed (a stamp file per case), so repeated test runs reuse the cases.

Usage: export_torch_models.py OUT [NAME...]
"""
import hashlib
import os
import sys
import time
import warnings


def models(torch, torchvision):
    """name -> (opset, build(), input shape, dynamic batch). Opsets vary on purpose: the cases then
    cover the importer's per-opset forms (Clip's bounds as attributes before 11, Squeeze/Unsqueeze
    axes as attributes before 13, LayerNormalization as one node from 17)."""
    tv = torchvision.models
    nn = torch.nn

    def narrow_classifier(m, linear_layers, in_features):
        # The 4096-wide classifiers hold most of the weights (120 M of VGG-11's 133 M: 0.5 GB of
        # ONNX). Narrower Linear layers keep the exported graph the same in op types and
        # attributes.
        widths = [in_features, 64, 64, 10]
        for k, index in enumerate(linear_layers):
            m.classifier[index] = nn.Linear(widths[k], widths[k + 1])
        return m

    def vgg11():
        return narrow_classifier(tv.vgg11(weights=None), [0, 3, 6], 512 * 7 * 7)

    def alexnet():
        return narrow_classifier(tv.alexnet(weights=None), [1, 4, 6], 256 * 6 * 6)

    class LSTMClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            y, _ = self.lstm(x)
            return self.fc(y[:, -1])

    class TransformerEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2)

        def forward(self, x):
            return self.encoder(x)

    return {
        "torch_resnet18": (17, lambda: tv.resnet18(weights=None), (2, 3, 64, 64), True),
        "torch_mobilenet_v2": (10, lambda: tv.mobilenet_v2(weights=None), (1, 3, 64, 64), False),
        "torch_densenet121": (13, lambda: tv.densenet121(weights=None), (1, 3, 64, 64), False),
        "torch_shufflenet_v2": (11, lambda: tv.shufflenet_v2_x0_5(weights=None), (1, 3, 64, 64), False),
        "torch_googlenet": (14, lambda: tv.googlenet(weights=None, aux_logits=False, init_weights=True),
                            (1, 3, 64, 64), False),
        "torch_squeezenet": (9, lambda: tv.squeezenet1_1(weights=None), (1, 3, 64, 64), False),
        # AdaptiveAvgPool2d((7, 7)) exports only when its input is a multiple of 7: 224 x 224.
        "torch_vgg11": (12, vgg11, (1, 3, 224, 224), False),
        # AdaptiveAvgPool2d((6, 6)) likewise needs AlexNet's 224 x 224.
        "torch_alexnet": (8, alexnet, (1, 3, 224, 224), False),
        "torch_lstm": (15, LSTMClassifier, (3, 5, 16), True),
        "torch_transformer_encoder": (17, TransformerEncoder, (2, 6, 32), False),
    }


def export(torch, name, opset, build, shape, dynamic_batch, case_dir):
    from onnx import numpy_helper

    torch.manual_seed(sum(name.encode()))
    model = build().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        y = model(x)
    os.makedirs(os.path.join(case_dir, "test_data_set_0"), exist_ok=True)
    axes = {"input": {0: "batch"}, "output": {0: "batch"}} if dynamic_batch else None
    torch.onnx.export(model, x, os.path.join(case_dir, "model.onnx"), opset_version=opset,
                      input_names=["input"], output_names=["output"], dynamic_axes=axes)
    for kind, t in (("input", x), ("output", y)):
        proto = numpy_helper.from_array(t.detach().numpy(), kind)
        with open(os.path.join(case_dir, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
            f.write(proto.SerializeToString())


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    out = os.path.abspath(sys.argv[1])
    warnings.simplefilter("ignore")  # torch.onnx's tracer warnings are about dynamic control flow
    import torch
    import torchvision

    torch.set_num_threads(1)  # the export is single-threaded work; CTest runs other tests beside it
    table = models(torch, torchvision)
    names = sys.argv[2:] or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        sys.exit(f"export_torch_models: unknown model(s) {unknown}; known: {list(table)}")
    with open(__file__, "rb") as f:
        version = hashlib.sha256(f.read() + torch.__version__.encode() + torchvision.__version__.encode())
    for name in names:
        case_dir = os.path.join(out, name)
        stamp_path = os.path.join(case_dir, "stamp")
        stamp = version.hexdigest() + name
        if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
            print(f"{name}: up to date")
            continue
        if os.path.exists(stamp_path):
            os.remove(stamp_path)
        start = time.time()
        export(torch, name, *table[name], case_dir)
        with open(stamp_path, "w") as f:
            f.write(stamp)
        print(f"{name}: exported in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
