"""d5.op, forward/backward, d5.test_forward/test_gradient, d5.ops.list; oracles are NumPy and
PyTorch computing the same maths independently of d5."""
import numpy as np
import pytest
import torch

import deep500 as d5

rng = np.random.default_rng(5)


def test_conv_forward_and_flops_match_pytorch_and_the_formula():
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    op = d5.op("Conv", [x, w, b], {"pads": [1, 1, 1, 1], "strides": [2, 2]})
    assert op.backend == "reference" and op.type == "Conv"
    assert op.outputs == ["f32[2, 4, 5, 5]"]
    (y,) = op.forward([x, w, b])
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                          stride=2, padding=1).numpy()
    # 27-term f32 dot products: a few ulp of the sum's magnitude.
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-5, atol=1e-5)
    # 2 flops per multiply-add: N * Cout * Hout * Wout * Cin * Kh * Kw * 2 (+ bias adds, if counted)
    macs = 2 * 4 * 5 * 5 * 3 * 3 * 3
    assert op.flops in (2 * macs, 2 * macs + 2 * 4 * 5 * 5)


def test_matmul_backward_is_the_analytic_gradient():
    a = rng.standard_normal((3, 5))
    b = rng.standard_normal((5, 2))
    op = d5.op("MatMul", [a, b])
    outs = op.forward([a, b])
    g = rng.standard_normal((3, 2))
    da, db = op.backward([g], [a, b], outs)
    np.testing.assert_allclose(np.asarray(da), g @ b.T, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(db), a.T @ g, rtol=1e-12)


def test_an_optimized_backend_validates_against_the_reference():
    available = {b["name"] for b in d5.info()["backends"] if b["available"]}
    names = {e["backend"] for e in d5.ops.list()} & available
    assert "reference" in names
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    for backend in sorted(names - {"reference"}):
        if not any(e["type"] == "Conv" for e in d5.ops.list(backend)):
            continue
        op = d5.op("Conv", [x, w], backend=backend)
        r = d5.test_forward(op, [x, w])
        assert r["state"] == "PASSED", (backend, r["detail"])
        assert r["outputs"][0]["max_abs_error"] < 1e-4
        # The same comparison with no tolerance at all: a different summation order is visible.
        strict = d5.test_forward(op, [x, w], rtol=0.0, atol=0.0)
        assert strict["outputs"][0]["max_abs_error"] == r["outputs"][0]["max_abs_error"]
        assert strict["state"] == ("PASSED" if strict["outputs"][0]["max_abs_error"] == 0 else "FAILED")


def test_a_check_against_zeros_is_mistrusted():
    x = -rng.random((20, 20)).astype(np.float32) - 0.1  # Relu of negatives: every output 0
    r = d5.test_forward(d5.op("Relu", [x]), [x])
    assert r["state"] == "MISTRUSTED", r["detail"]


def test_gradient_check_passes_on_smooth_ops_and_counts_elements():
    x = rng.standard_normal((4, 5))
    r = d5.test_gradient(d5.op("Tanh", [x]), [x])
    assert r["state"] == "PASSED", r["detail"]
    assert r["checked"] == 20 and r["max_abs_error"] < 1e-7


def test_calls_with_another_problem_and_unknown_ops_are_errors_with_reasons():
    x = np.zeros((2, 2), dtype=np.float32)
    op = d5.op("Relu", [x])
    with pytest.raises(d5.InvalidArgument, match=r"input 0 is f32\[3\], the operator was created for f32\[2, 2\]"):
        op.forward([np.zeros(3, dtype=np.float32)])
    with pytest.raises(d5.Unimplemented):
        d5.op("NoSuchOperator", [x])
    with pytest.raises(NotImplementedError):
        d5.op("NoSuchOperator", [x])
    with pytest.raises(d5.InvalidArgument, match="not an ONNX attribute"):
        d5.op("Relu", [x], {"alpha": {"a": 1}})


def test_a_backend_left_out_of_the_build_is_not_built():
    left_out = d5.info()["backends_not_built"]
    x = np.zeros((2, 2), dtype=np.float32)
    for backend in left_out:
        with pytest.raises(d5.NotBuilt):
            d5.op("Relu", [x], backend=backend)
    with pytest.raises(d5.InvalidArgument, match="no backend 'no-such-backend' \\(built: reference"):
        d5.op("Relu", [x], backend="no-such-backend")
    for b in d5.info()["backends"]:
        if not b["available"]:  # built, but not usable on this machine (CUDA without a GPU)
            with pytest.raises(d5.Unimplemented, match="built but cannot run here"):
                d5.op("Relu", [x], backend=b["name"])


def test_ops_list_names_every_implementation_once():
    entries = d5.ops.list("reference")
    keys = [(e["type"], e["implementation"]) for e in entries]
    assert len(keys) == len(set(keys)) and len(keys) > 80
    assert all(e["backend"] == "reference" for e in entries)
    conv = [e for e in entries if e["type"] == "Conv"]
    assert conv and conv[0]["backward"] is True
