"""DLPack with GPU memory: a torch CUDA tensor enters d5 and a d5 CUDA tensor leaves for torch
without a copy (the same device address both ways), and d5's CUDA operators compute on them. Runs
where d5's cuda backend is usable and torch sees a CUDA device; skipped, saying which, elsewhere."""
import numpy as np
import pytest
import torch

import deep500 as d5


def _why_no_cuda():
    backends = {b["name"]: b for b in d5.info()["backends"]}
    if "cuda" not in backends:
        return "no CUDA device: this d5 was built without the cuda backend"
    if not backends["cuda"]["available"]:
        return "no CUDA device: " + backends["cuda"].get("unavailable_reason", "the cuda backend cannot run")
    if not torch.cuda.is_available():
        return "no CUDA device: this torch has no CUDA"
    return None


# All or nothing: this file is a ctest of its own (python_package_gpu), whose skip must not hide a
# failure beside it.
if _why_no_cuda():
    pytest.skip(_why_no_cuda(), allow_module_level=True)


def test_a_torch_cuda_tensor_enters_d5_and_returns_without_a_copy():
    x = torch.arange(-6, 6, dtype=torch.float32, device="cuda").reshape(3, 4)
    t = d5.from_dlpack(x)
    assert t.device == "cuda:0" and t.shape == (3, 4) and t.dtype == "f32"
    assert t.__dlpack_device__() == (2, 0)  # kDLCUDA
    back = torch.from_dlpack(t)
    assert back.device.type == "cuda" and back.data_ptr() == x.data_ptr()
    back[0, 0] = 42
    assert x[0, 0].item() == 42  # one buffer
    with pytest.raises(d5.InvalidArgument, match="lives on cuda:0"):
        np.asarray(t)


def test_a_cuda_operator_reads_and_writes_device_memory_that_torch_shares():
    x = torch.randn(64, 33, device="cuda")
    w = torch.randn(17, 33, device="cuda")
    op = d5.op("Gemm", [x.cpu().numpy(), w.cpu().numpy()], {"transB": 1}, backend="cuda")
    (y,) = op.forward([d5.from_dlpack(x), d5.from_dlpack(w)])
    assert y.device == "cuda:0"
    got = torch.from_dlpack(y)
    assert got.device.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    want = x @ w.t()
    # f32 products of 33 terms of magnitude ~1, summed in different orders: 1e-5 relative.
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    del y
    import gc
    gc.collect()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # the capsule keeps d5's memory


if __name__ == "__main__":  # for a GPU host without pytest (see docs/python.md)
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print("passed", name)
