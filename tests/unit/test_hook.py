"""Pieces of the PyTorch hook that need no workload run."""

import pytest
import torch

from tbd.core.errors import UsageError
from tbd.profilers.pytorch.hook import is_out_of_memory, resolve_device


def test_out_of_memory_is_recognised_on_cpu_and_cuda():
    assert is_out_of_memory(MemoryError())
    assert is_out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate "
                                         "memory: you tried to allocate 2457600000 bytes"))
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_device_resolution():
    assert resolve_device(torch, "cpu").type == "cpu"
    assert resolve_device(torch, "auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(UsageError, match="unknown device"):
        resolve_device(torch, "tpu:zero")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="no CUDA device"):
            resolve_device(torch, "cuda")
