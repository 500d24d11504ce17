#!/usr/bin/python3
"""Executes an ONNX model with PyTorch operators, independently of d5: the graph is read with the
onnx package, every node is computed by torch (torch.nn.functional, or the operator's equations
written out where torch has no single call), and the weights are the model's initializers. It is
the independent runtime that d5's exports are checked against (tests/integration/
test_cli_models_export.cpp): a wrong weight layout, attribute or node order in the file shows up as
outputs that differ from d5's.

Usage: run_onnx_in_torch.py MODEL.onnx CASE_DIR
Reads CASE_DIR/input_<i>.pb (TensorProtos named after the graph's inputs) and writes
CASE_DIR/output_<i>.pb, one per graph output, in the graph's order. An operator or attribute this
runtime does not implement ends it with exit code 3 and the name; it never guesses.
"""
import glob
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


class Unsupported(Exception):
    pass


def attrs_of(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def spatial_pads(pads, rank):
    """ONNX pads [x1_begin, ..., xn_begin, x1_end, ..., xn_end] as F.pad's list (last axis first)."""
    n = rank
    out = []
    for axis in reversed(range(n)):
        out += [pads[axis], pads[axis + n]]
    return out


def conv(x, w, b, a):
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise Unsupported("Conv auto_pad")
    nd = w.dim() - 2
    pads = a.get("pads", [0] * 2 * nd)
    x = F.pad(x, spatial_pads(pads, nd))
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    return fn(x, w, b, stride=a.get("strides", [1] * nd), dilation=a.get("dilations", [1] * nd),
              groups=a.get("group", 1))


def max_pool(x, a):
    nd = x.dim() - 2
    if a.get("storage_order", 0) != 0:
        raise Unsupported("MaxPool storage_order")
    pads = a.get("pads", [0] * 2 * nd)
    x = F.pad(x, spatial_pads(pads, nd), value=float("-inf"))
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
    return fn(x, a["kernel_shape"], stride=a.get("strides", [1] * nd), dilation=a.get("dilations", [1] * nd),
              ceil_mode=bool(a.get("ceil_mode", 0)))


def slice_(x, starts, ends, axes, steps):
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = ax % x.dim()
        d = x.shape[ax]
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        x = torch.index_select(x, ax, torch.arange(s, e, st, dtype=torch.int64))
    return x


def pad(x, pads, value, mode):
    nd = x.dim()
    if mode == "constant":
        return F.pad(x, spatial_pads(pads, nd), value=value)
    raise Unsupported(f"Pad mode {mode}")


def reshape(x, shape):
    shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def lstm(x, w, r, b, a):
    """ONNX LSTM, layout 0, gates in the order i, o, f, c, activations sigmoid/tanh/tanh."""
    for unsupported in ("activations", "clip", "layout"):
        if a.get(unsupported) not in (None, 0):
            raise Unsupported(f"LSTM {unsupported}")
    if a.get("input_forget", 0):
        raise Unsupported("LSTM input_forget")
    direction = a.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]
    seq, batch, _ = x.shape
    hidden = a["hidden_size"]
    ys, hs, cs = [], [], []
    for d, reverse in enumerate(dirs):
        wb, rb = (b[d, :4 * hidden], b[d, 4 * hidden:]) if b is not None else (0.0, 0.0)
        h = torch.zeros(batch, hidden)
        c = torch.zeros(batch, hidden)
        out = [None] * seq
        for t in (reversed(range(seq)) if reverse else range(seq)):
            g = x[t] @ w[d].T + h @ r[d].T + wb + rb
            i, o, f, cc = g.split(hidden, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(cc)
            h = torch.sigmoid(o) * torch.tanh(c)
            out[t] = h
        ys.append(torch.stack(out))
        hs.append(h)
        cs.append(c)
    return torch.stack(ys, dim=1), torch.stack(hs), torch.stack(cs)


def run_node(node, args):
    """The outputs of one node, from its inputs (None where an optional input is absent)."""
    op, a = node.op_type, attrs_of(node)
    x = args[0] if args else None
    if node.domain not in ("", "ai.onnx"):
        raise Unsupported(f"{node.domain}::{op}")
    if op == "Constant":
        if "value" not in a:
            raise Unsupported("Constant without a tensor value")
        return [torch.from_numpy(numpy_helper.to_array(a["value"]).copy())]
    if op == "Conv":
        return [conv(x, args[1], args[2] if len(args) > 2 else None, a)]
    if op == "MaxPool":
        if len(node.output) > 1:
            raise Unsupported("MaxPool Indices")
        return [max_pool(x, a)]
    if op == "GlobalAveragePool":
        return [x.mean(dim=tuple(range(2, x.dim())), keepdim=True)]
    if op == "BatchNormalization":
        if a.get("training_mode", 0) or len(node.output) > 1:
            raise Unsupported("BatchNormalization training_mode")
        return [F.batch_norm(x, args[3], args[4], args[1], args[2], training=False, eps=a.get("epsilon", 1e-5))]
    if op == "LayerNormalization":
        axis = a.get("axis", -1) % x.dim()
        if len(node.output) > 1:
            raise Unsupported("LayerNormalization Mean/InvStdDev outputs")
        return [F.layer_norm(x, x.shape[axis:], args[1], args[2] if len(args) > 2 else None, a.get("epsilon", 1e-5))]
    if op == "Gemm":
        A = x.T if a.get("transA", 0) else x
        B = args[1].T if a.get("transB", 0) else args[1]
        y = a.get("alpha", 1.0) * (A @ B)
        if len(args) > 2 and args[2] is not None:
            y = y + a.get("beta", 1.0) * args[2]
        return [y]
    if op == "MatMul":
        return [torch.matmul(x, args[1])]
    binary = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div}
    if op in binary:
        return [binary[op](x, args[1])]
    unary = {"Relu": torch.relu, "Tanh": torch.tanh, "Sigmoid": torch.sigmoid, "Identity": lambda t: t,
             "Sqrt": torch.sqrt, "Erf": torch.erf, "Exp": torch.exp, "Neg": torch.neg}
    if op in unary:
        return [unary[op](x)]
    if op == "Clip":
        lo = args[1] if len(args) > 1 and args[1] is not None else None
        hi = args[2] if len(args) > 2 and args[2] is not None else None
        return [torch.clamp(x, lo, hi)]
    if op == "Flatten":
        axis = a.get("axis", 1) % (x.dim() + 1) if x.dim() else 0
        return [x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)]
    if op == "Reshape":
        if a.get("allowzero", 0):
            raise Unsupported("Reshape allowzero")
        return [reshape(x, args[1].tolist())]
    if op == "Transpose":
        return [x.permute(a.get("perm", list(reversed(range(x.dim())))))]
    if op == "Concat":
        return [torch.cat(args, dim=a["axis"])]
    if op == "Squeeze":
        axes = args[1].tolist() if len(args) > 1 and args[1] is not None else None
        if axes is None:
            return [x.squeeze()]
        for ax in sorted((ax % x.dim() for ax in axes), reverse=True):
            x = x.squeeze(ax)
        return [x]
    if op == "Unsqueeze":
        out_rank = x.dim() + len(args[1])
        for ax in sorted(ax % out_rank for ax in args[1].tolist()):
            x = x.unsqueeze(ax)
        return [x]
    if op == "Slice":
        opt = [args[i].tolist() if len(args) > i and args[i] is not None else None for i in (3, 4)]
        return [slice_(x, args[1].tolist(), args[2].tolist(), *opt)]
    if op == "Pad":
        value = float(args[2]) if len(args) > 2 and args[2] is not None else 0.0
        mode = a.get("mode", b"constant")
        return [pad(x, args[1].tolist(), value, mode.decode() if isinstance(mode, bytes) else mode)]
    if op == "Gather":
        axis = a.get("axis", 0) % x.dim()
        idx = args[1].long()
        idx = torch.where(idx < 0, idx + x.shape[axis], idx)
        picked = torch.index_select(x, axis, idx.reshape(-1))
        return [picked.reshape(x.shape[:axis] + idx.shape + x.shape[axis + 1:])]
    if op == "Softmax":
        return [torch.softmax(x, dim=a.get("axis", -1))]
    if op == "ReduceMean":
        axes = a.get("axes", list(range(x.dim())))
        return [x.mean(dim=tuple(axes), keepdim=bool(a.get("keepdims", 1)))]
    if op == "LSTM":
        if len(args) > 4 and args[4] is not None or len(args) > 5:
            raise Unsupported("LSTM sequence_lens, initial states or peepholes")
        return list(lstm(x, args[1], args[2], args[3] if len(args) > 3 else None, a))[:len(node.output)]
    if op == "SoftmaxCrossEntropyLoss":
        if len(node.output) > 1:
            raise Unsupported("SoftmaxCrossEntropyLoss log_prob output")
        reduction = a.get("reduction", b"mean")
        reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
        weight = args[2] if len(args) > 2 else None
        return [F.cross_entropy(x, args[1], weight=weight, ignore_index=a.get("ignore_index", -100),
                                reduction=reduction)]
    raise Unsupported(op)


def run(model, feeds):
    values = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in model.graph.initializer}
    values.update(feeds)
    for node in model.graph.node:
        args = [values[n] if n else None for n in node.input]
        outs = run_node(node, args)
        for name, t in zip(node.output, outs):
            if name:
                values[name] = t
    return [values[o.name] for o in model.graph.output]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-4])
    model_path, case = sys.argv[1:]
    model = onnx.load(model_path)  # external data is read from beside the model
    feeds = {}
    for path in sorted(glob.glob(os.path.join(case, "input_*.pb"))):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        feeds[t.name] = torch.from_numpy(numpy_helper.to_array(t).copy())
    with torch.no_grad():
        try:
            outputs = run(model, feeds)
        except Unsupported as e:
            print(f"run_onnx_in_torch: {os.path.basename(model_path)}: refused, this runtime has no {e}",
                  file=sys.stderr)
            sys.exit(3)
    for i, (info, t) in enumerate(zip(model.graph.output, outputs)):
        proto = numpy_helper.from_array(t.numpy(), info.name)
        with open(os.path.join(case, f"output_{i}.pb"), "wb") as f:
            f.write(proto.SerializeToString())
    print(f"run_onnx_in_torch: {os.path.basename(model_path)}: {len(model.graph.node)} nodes, {len(outputs)} outputs")


if __name__ == "__main__":
    main()
