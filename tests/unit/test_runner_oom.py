"""The runner child's verdict on a thread that cannot start: out of memory under --memory-limit-gib only."""

import errno

from tbd.cli.runner import _thread_refused_under_cap
from tbd.core.records import RunSpec


def test_a_thread_refused_under_the_cap_is_out_of_memory():
    capped = RunSpec(model="resnet50", memory_limit_bytes=870 << 20)
    assert _thread_refused_under_cap(RuntimeError("Resource temporarily unavailable"), capped)
    assert _thread_refused_under_cap(OSError(errno.EAGAIN, "can't start new thread"), capped)
    assert not _thread_refused_under_cap(RuntimeError("shape mismatch"), capped)


def test_without_a_cap_it_stays_a_crash():
    assert not _thread_refused_under_cap(RuntimeError("Resource temporarily unavailable"), RunSpec(model="resnet50"))


def test_onednn_refusing_a_primitive_under_the_cap_is_out_of_memory():
    """Seen at batch 768 of a capped max sweep: the convolution's scratch did not fit, and PyTorch raised
    oneDNN's error instead of an allocation failure; without a cap it is a crash to report."""
    error = RuntimeError("could not create a primitive descriptor for a convolution forward propagation primitive")
    assert _thread_refused_under_cap(RuntimeError("could not create a primitive"), RunSpec(model="resnet50",
                                                                                          memory_limit_bytes=870 << 20))
    assert not _thread_refused_under_cap(error, RunSpec(model="resnet50"))
