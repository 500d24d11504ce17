"""Networks and executors from Python: the zoo, ONNX, PyTorch modules, a graph built by hand,
events, validation; oracles are PyTorch running the same weights and NumPy."""
import numpy as np
import pytest
import torch

import deep500 as d5

rng = np.random.default_rng(7)


def available_executors():
    built = {b["name"] for b in d5.info()["backends"] if b["available"]}
    return [b for b in ("reference", "onednn", "torch", "cuda") if b in built]


@pytest.mark.parametrize("backend", available_executors())
def test_a_zoo_network_validates_on_every_executor(backend):
    net = d5.models.create("lenet5", batch=4, with_loss=True)
    assert net.inputs == {"input": "f32[4, 1, 28, 28]", "labels": "i64[4]"}
    feeds = {"input": rng.random((4, 1, 28, 28), dtype=np.float32), "labels": np.arange(4, dtype=np.int64)}
    ex = d5.executor(net, backend)
    out = ex.inference(feeds)
    assert np.asarray(out["logits"]).shape == (4, 10)
    assert d5.test_executor(ex, feeds)["state"] == "PASSED"
    step = d5.test_executor(ex, feeds, loss="loss")
    assert step["state"] == "PASSED", step["detail"]
    ex.inference_and_backprop(feeds, "loss")
    assert set(ex.gradients()) == set(net.params)


@pytest.mark.full_build
def test_a_pytorch_module_runs_with_its_own_weights():
    torch.manual_seed(3)
    module = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 6 * 6, 5))
    x = torch.randn(3, 2, 6, 6)
    net = d5.from_torch(module, [x])
    assert list(net.inputs) == ["input_0"] and list(net.outputs) == ["output_0"]
    expected = module(x).detach().numpy()
    for backend in available_executors():
        out = d5.executor(net, backend).inference({"input_0": x.numpy()})["output_0"]
        # A 72-term convolution and a 144-term product in f32: errors of 1e-5 of the outputs' scale.
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-4, atol=1e-5, err_msg=backend)


@pytest.mark.full_build
def test_onnx_round_trip_keeps_outputs(tmp_path):
    net = d5.models.create("mlp", batch=2)
    x = rng.random((2, 1, 28, 28), dtype=np.float32)
    before = np.asarray(d5.executor(net).inference({"input": x})["logits"]).copy()
    d5.save_onnx(net, tmp_path / "mlp.onnx")
    again = d5.load_onnx(tmp_path / "mlp.onnx")
    after = np.asarray(d5.executor(again).inference({"input": x})["logits"])
    np.testing.assert_array_equal(after, before)
    with pytest.raises(d5.Error):
        d5.load_onnx(tmp_path / "missing.onnx")


def test_text_models_read_ids_of_the_vocabulary_they_are_given():
    net = d5.models.create("text-lstm", batch=2, input_shape=[8], vocabulary=50, classes=3)
    assert net.inputs["input"] == "i64[2, 8]"
    ids = rng.integers(0, 50, size=(2, 8), dtype=np.int64)
    logits = np.asarray(d5.executor(net).inference({"input": ids})["logits"])
    assert logits.shape == (2, 3)
    with pytest.raises(d5.InvalidArgument, match="model 'lenet5' reads float features, not token ids"):
        d5.models.create("lenet5", vocabulary=50)
    assert d5.dataset("synthetic", samples=4).vocabulary == 0


def test_events_see_every_operator_and_can_stop_the_executor():
    net = d5.models.create("lenet5", batch=2, with_loss=True)
    feeds = {"input": rng.random((2, 1, 28, 28), dtype=np.float32), "labels": np.zeros(2, dtype=np.int64)}
    ex = d5.executor(net, "reference")
    seen = []
    ex.on("before_op", lambda node, op_type, pass_, tensors: seen.append((op_type, pass_, len(tensors))))
    ex.inference_and_backprop(feeds, "loss")
    forward = [s for s in seen if s[1] == "forward"]
    assert [s[0] for s in forward] == [t for _, t in net.nodes]
    assert any(s[1] == "backward" for s in seen)
    with pytest.raises(d5.InvalidArgument, match="no executor event 'before_lunch'"):
        ex.on("before_lunch", print)


class Square(d5.CustomOperator):
    def forward(self, x):
        return x * x

    def backward(self, grad_outputs, inputs, outputs):
        return [2 * inputs[0] * grad_outputs[0]]

    def flops(self):
        return float(np.prod(self.inputs[0][0]))


class WrongSquare(Square):
    def backward(self, grad_outputs, inputs, outputs):
        return [3 * inputs[0] * grad_outputs[0]]  # the derivative of x^2 is 2x


def test_a_python_operator_passes_its_checks_and_a_wrong_gradient_fails():
    d5.register_op("PySquare", Square)
    d5.register_op("PyWrongSquare", WrongSquare)
    x = rng.standard_normal((3, 4))
    op = d5.op("PySquare", [x])
    assert op.implementation == "python:Square" and op.flops == 12 and op.has_gradient
    np.testing.assert_array_equal(np.asarray(op.forward([x])[0]), x * x)
    assert d5.test_gradient(op, [x])["state"] == "PASSED"
    wrong = d5.test_gradient(d5.op("PyWrongSquare", [x]), [x])
    assert wrong["state"] == "FAILED" and wrong["max_rel_error"] > 0.4


@pytest.mark.parametrize("backend", available_executors())
def test_a_python_operator_trains_inside_a_network_on_every_executor(backend):
    d5.register_op("PySquare", Square)
    net = d5.Network("custom")
    net.add_input("x", [3, 4])
    net.add_node("PySquare", ["w"], ["w2"])
    net.add_node("Mul", ["w2", "x"], ["y"])
    net.add_node("ReduceSum", ["y"], ["loss"], {"keepdims": 0})
    w = rng.standard_normal((3, 4)).astype(np.float32)
    net.feed_param("w", w)
    net.add_output("y")
    net.add_output("loss")
    x = rng.standard_normal((3, 4)).astype(np.float32)
    ex = d5.executor(net, backend)
    out = ex.inference_and_backprop({"x": x}, "loss")
    np.testing.assert_allclose(np.asarray(out["y"]), w * w * x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ex.gradients()["w"]), 2 * w * x, rtol=1e-6)  # d/dw sum(w^2 x)
    assert "python:Square" in ex.implementations.values()


def test_python_operators_report_their_own_mistakes():
    class ReturnsF32(d5.CustomOperator):
        def forward(self, x):
            return x.astype(np.float32)

    class Raises(d5.CustomOperator):
        def forward(self, x):
            raise KeyError("boom")

    d5.register_op("PyReturnsF32", ReturnsF32)
    d5.register_op("PyRaises", Raises)
    x = np.zeros((2, 2))
    with pytest.raises(d5.InvalidArgument, match=r"forward's output 0 is f32\[2, 2\], declared f64\[2, 2\]"):
        d5.op("PyReturnsF32", [x]).forward([x])
    with pytest.raises(KeyError, match="boom"):  # the Python exception itself, not a translation
        d5.op("PyRaises", [x]).forward([x])
    assert not d5.op("PyRaises", [x]).has_gradient
    with pytest.raises(d5.InvalidArgument, match="not a d5.CustomOperator subclass"):
        d5.register_op("PyNothing", object)
