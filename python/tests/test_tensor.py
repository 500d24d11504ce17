"""d5.Tensor and d5.tensor(): memory shared with NumPy and PyTorch, both ways, no copy."""
import ctypes

import numpy as np
import pytest
import torch

import deep500 as d5


@pytest.mark.parametrize("dtype,name", [(np.float32, "f32"), (np.float64, "f64"), (np.float16, "f16"),
                                        (np.int8, "i8"), (np.int16, "i16"), (np.int32, "i32"),
                                        (np.int64, "i64"), (np.uint8, "u8"), (np.bool_, "bool")])
def test_an_array_and_its_tensor_share_memory_both_ways(dtype, name):
    a = np.arange(24).reshape(2, 3, 4).astype(dtype)
    t = d5.tensor(a)
    assert t.dtype == name and t.shape == (2, 3, 4) and t.device == "cpu"
    assert t.shares_memory_with_python
    back = np.asarray(t)
    assert back.dtype == a.dtype and np.shares_memory(back, a)
    back[1, 2, 3] = 1  # written through the tensor's buffer, seen in the original array
    assert a[1, 2, 3] == 1


def test_the_tensor_keeps_the_array_alive():
    t = d5.tensor(np.full((1000,), 7.0, dtype=np.float32))  # the only reference to the array
    import gc
    gc.collect()
    np.testing.assert_array_equal(np.asarray(t), np.full((1000,), 7.0, dtype=np.float32))


def test_operator_outputs_are_d5_memory_that_numpy_views():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    (y,) = d5.op("Relu", [x]).forward([x])
    assert not y.shares_memory_with_python
    v1, v2 = np.asarray(y), np.asarray(y)
    assert np.shares_memory(v1, v2)  # both views of the one d5 buffer
    np.testing.assert_array_equal(v1, np.maximum(x, 0))


def test_a_cpu_torch_tensor_is_shared_too():
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = d5.tensor(src)
    np.asarray(t)[0, 0] = 42
    assert src[0, 0].item() == 42


def test_non_contiguous_arrays_are_refused_with_the_fix():
    a = np.zeros((4, 6), dtype=np.float32)[:, ::2]
    with pytest.raises(d5.InvalidArgument, match="not C-contiguous.*ascontiguousarray"):
        d5.tensor(a)
    with pytest.raises(ValueError):  # the built-in exception a caller may catch instead
        d5.tensor(a)


def test_unsupported_element_types_name_what_d5_takes():
    with pytest.raises(d5.InvalidArgument, match="has no d5 dtype"):
        d5.tensor(np.zeros(3, dtype=np.complex64))
    with pytest.raises(d5.InvalidArgument, match="not an array"):
        d5.tensor("not an array")


def test_torch_reads_a_d5_tensor_through_dlpack_without_a_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    (y,) = d5.op("Relu", [a]).forward([a])  # d5's memory
    t = torch.from_dlpack(y)
    assert t.shape == (3, 4) and t.dtype == torch.float32 and t.device.type == "cpu"
    t[2, 3] = -5
    assert np.asarray(y)[2, 3] == -5  # one buffer
    assert y.__dlpack_device__() == (1, 0)
    del y
    import gc
    gc.collect()
    assert t.sum().item() == sum(range(11)) - 5  # the capsule kept d5's memory alive


def _capsule_on_cuda(host_buffer):
    """A DLPack capsule saying that `host_buffer` (f32[4]) lives on CUDA device 0: what a GPU
    tensor's capsule looks like, made by hand so that no GPU is needed. Nothing reads its memory."""
    class Device(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32), ("dtype", DataType),
                    ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.c_void_p),
                    ("byte_offset", ctypes.c_uint64)]

    class Managed(ctypes.Structure):
        _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    shape = (ctypes.c_int64 * 1)(4)
    managed = Managed(DLTensor(host_buffer.ctypes.data, Device(2, 0), 1, DataType(2, 32, 1), shape, None, 0),
                      None, None)
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new_capsule(ctypes.addressof(managed), b"dltensor", None), (managed, shape)


def test_numpy_is_refused_a_tensor_on_a_gpu_with_an_error_not_an_abort():
    host = np.zeros(4, dtype=np.float32)
    capsule, keep = _capsule_on_cuda(host)
    t = d5.from_dlpack(capsule)
    assert t.device == "cuda:0" and t.shape == (4,)
    assert t.__dlpack_device__() == (2, 0)
    # NumPy asks through the buffer protocol, where an escaping C++ exception would abort Python.
    with pytest.raises(d5.InvalidArgument, match="lives on cuda:0: copy it to the host"):
        np.asarray(t)
    with pytest.raises(d5.InvalidArgument, match="lives on cuda:0"):
        memoryview(t)
    del t, capsule, keep
    # On the host, __array__ shares the memory, converts or copies as NumPy asks.
    h = d5.tensor(np.arange(3, dtype=np.float32))
    shared = h.__array__()
    shared[0] = 7
    assert np.asarray(h)[0] == 7
    assert h.__array__(np.float64).dtype == np.float64
    copied = h.__array__(copy=True)
    copied[1] = -1
    assert np.asarray(h)[1] == 1
    # So is a host tensor of a type NumPy lacks.
    b = d5.from_dlpack(torch.zeros(3, dtype=torch.bfloat16))
    with pytest.raises(d5.InvalidArgument, match="NumPy has no bf16"):
        np.asarray(b)


def test_a_view_of_numpy_memory_exported_through_dlpack_keeps_the_array_alive():
    t = torch.from_dlpack(d5.tensor(np.full(5, 3, dtype=np.int64)))  # the array's only owner is t
    import gc
    gc.collect()
    assert t.tolist() == [3] * 5


def test_d5_reads_a_torch_tensor_through_dlpack_without_a_copy():
    src = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    t = d5.from_dlpack(src)
    assert t.shape == (2, 3) and t.dtype == "f64"
    np.asarray(t)[1, 2] = -1
    assert src[1, 2].item() == -1
    del src
    import gc
    gc.collect()
    np.testing.assert_array_equal(np.asarray(t), [[0, 1, 2], [3, 4, -1]])
    with pytest.raises(d5.InvalidArgument, match="not contiguous.*contiguous\\(\\)"):
        d5.from_dlpack(torch.zeros(3, 4).t())
    with pytest.raises(d5.InvalidArgument, match="no __dlpack__"):
        d5.from_dlpack(3.5)
