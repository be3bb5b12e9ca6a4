import pytest
import torch

from dragoman.engine.device import (
    DeviceError, copy_many_to_device, copy_to_device, resolve_device, resolve_dtype, tensors_to_device, to_device,
    to_device_many, tokens_to_device,
)


def test_to_device_makes_the_tensor_torch_tensor_would():
    data = [[1, 2], [3, 4]]
    out = to_device(data, torch.device("cpu"), torch.int32)
    assert out.dtype == torch.int32 and out.tolist() == data
    assert to_device([0.5, -1.0], torch.device("cpu")).dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_to_device_arrives_whole_while_the_stream_is_busy():
    device = torch.device("cuda")
    busy = torch.randn(4096, 4096, device=device)
    for _ in range(20):  # queue work ahead of the copy
        busy = busy @ busy / 64
    data = list(range(100_000))
    out = to_device(data, device)
    assert out.tolist() == data


def test_tokens_to_device_packs_the_sequences_one_after_another():
    sequences = [[5, 2**40, 7], [], [-1, 0]]
    out = tokens_to_device(sequences, torch.device("cpu"))
    assert out.dtype == torch.int64 and out.tolist() == [5, 2**40, 7, -1, 0]
    assert tokens_to_device([[]], torch.device("cpu")).tolist() == []
    if torch.cuda.is_available():
        assert tokens_to_device(sequences, torch.device("cuda")).tolist() == out.tolist()


def test_to_device_many_sends_each_list_as_a_view_of_one_copy():
    lists = [[3, -1, 7], [[1, 2], [3, 4], [5, 6]], [], [2**31 - 1]]
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        out = to_device_many(lists, device)
        assert [t.tolist() for t in out] == lists
        assert all(t.dtype == torch.int32 and t.device.type == device.type for t in out)
        assert out[0].untyped_storage().data_ptr() == out[1].untyped_storage().data_ptr()  # one copy
    with pytest.raises(ValueError, match="one length"):
        to_device_many([[[1, 2], [3]]], torch.device("cpu"))


def test_copy_to_device_fills_a_tensor_in_place():
    target = torch.zeros(2, 3, dtype=torch.int64)
    copy_to_device(target[:, :2], [[1, 2], [3, 4]])
    assert target.tolist() == [[1, 2, 0], [3, 4, 0]]


def test_unknown_devices_are_refused_with_a_message():
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu")


def test_copy_many_to_device_gives_the_views_to_device_many_gives_in_one_buffer():
    lists = [[1, 2, 3], [[4, 5], [6, 7], [8, 9]], []]
    buffer = torch.full((16,), -1, dtype=torch.int32)
    views = copy_many_to_device(buffer, lists)
    assert [v.tolist() for v in views] == [v.tolist() for v in to_device_many(lists, torch.device("cpu"))]
    assert all(v.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr() for v in views)
    assert buffer[9:].tolist() == [-1] * 7  # only what the lists hold is written
    again = copy_many_to_device(buffer, [[7, 7, 7], [[0, 0]] * 3, []])  # same shapes: the same views, new values
    assert [v.data_ptr() for v in again] == [v.data_ptr() for v in views] and views[0].tolist() == [7, 7, 7]
    with pytest.raises(ValueError, match="do not fit"):
        copy_many_to_device(buffer, [list(range(17))])


def test_automatic_precision_is_bfloat16_from_ampere_on_and_float16_on_turing(gpu_profile):
    for name in ("sm_80", "sm_86", "sm_89", "sm_90"):
        assert resolve_dtype("auto", gpu_profile(name)) == torch.bfloat16
    assert resolve_dtype("auto", gpu_profile("sm_75")) == torch.float16


def test_bfloat16_is_refused_on_turing_with_the_reason(gpu_profile):
    gpu = gpu_profile("sm_75")
    with pytest.raises(DeviceError, match=r"bfloat16 needs a GPU of compute capability 8.0 or later \(this one is 7.5\)"):
        resolve_dtype("bfloat16", gpu)
    assert resolve_dtype("float16", gpu) == torch.float16
    assert resolve_dtype("bfloat16", gpu_profile("sm_86")) == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_zeroed_memory_on_the_cpu_is_zeros_of_its_own(dtype):
    """The KV caches' memory: zeros from the OS's pages, writable, one map per tensor."""
    from dragoman.engine.device import zeroed

    first, second = (zeroed((3, 5, 2), dtype, torch.device("cpu")) for _ in range(2))
    assert first.shape == (3, 5, 2) and first.dtype == dtype and first.is_contiguous()
    assert not first.any()
    first[1, 2] = 7
    assert first.sum().item() == 14 and not second.any()
    assert not zeroed((0, 4), dtype, torch.device("cpu")).numel()


def test_tensors_go_to_the_device_in_one_copy_as_views_of_their_shapes():
    tensors = [torch.arange(6).view(2, 3), torch.tensor([7]), torch.arange(24).view(2, 3, 4) * -1]
    sent = tensors_to_device(tensors, torch.device("cpu"))
    assert [t.shape for t in sent] == [t.shape for t in tensors]
    assert all(torch.equal(a, b) and b.is_contiguous() for a, b in zip(tensors, sent))
    assert len({t.untyped_storage().data_ptr() for t in sent}) == 1  # one buffer
