"""Which workloads exist, for which framework, and where each one's builder lives.

Adding a model is one file in models/<framework>/ plus one line in MODELS.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field

from tbd.core.errors import UsageError

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet")


@dataclass(frozen=True)
class ModelInfo:
    name: str
    application: str
    dominant_layer: str
    dataset: str
    throughput_unit: str
    default_batch: int
    implementations: dict[str, str]  # framework -> module path providing build()
    fixed_batch: int | None = None  # the model always runs this batch (Faster R-CNN: one image)
    # framework -> CPU threads per process unless --threads says otherwise (absent: the framework's own)
    default_threads: dict[str, int] = field(default_factory=dict)
    # The batch a CPU run takes unless --batch says otherwise (None: default_batch). The paper's GPU
    # batch makes a full-size image model's iteration last 3-25 s on a 2-core machine; at 4 (0.75 s
    # quiet, ~9 s beside a busy loop in another session) `make profile` ends within 3 minutes (docs/setup.md).
    cpu_batch: int | None = None


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        # Default batches follow the TBD paper's GPU runs (Table II/IV) where it names one.
        ModelInfo("resnet50", "image classification", "CONV", "ImageNet (3x224x224, 1000 classes)",
                  "images/s", 32, {"pytorch": "tbd.models.pytorch.resnet50", "mxnet": "tbd.models.mxnet.resnet50",
                                "tensorflow": "tbd.models.tensorflow.resnet50"}, cpu_batch=4),
        ModelInfo("resnet101", "image classification", "CONV", "ImageNet (3x224x224, 1000 classes)",
                  "images/s", 32, {"pytorch": "tbd.models.pytorch.resnet101"}, cpu_batch=4),
        ModelInfo("resnet152", "image classification", "CONV", "ImageNet (3x224x224, 1000 classes)",
                  "images/s", 32, {"pytorch": "tbd.models.pytorch.resnet152"}, cpu_batch=4),
        ModelInfo("inception3", "image classification", "CONV", "ImageNet (3x299x299, 1000 classes)",
                  "images/s", 32, {"pytorch": "tbd.models.pytorch.inception3", "mxnet": "tbd.models.mxnet.inception3",
                                "tensorflow": "tbd.models.tensorflow.inception3"}, cpu_batch=4),
        ModelInfo("seq2seq", "machine translation", "LSTM", "IWSLT15 en-vi (vocab 17,188; 20-30 tokens)",
                  "sentences/s", 64, {"pytorch": "tbd.models.pytorch.seq2seq", "mxnet": "tbd.models.mxnet.seq2seq",
                                   "tensorflow": "tbd.models.tensorflow.seq2seq"}),
        ModelInfo("transformer", "machine translation", "Attention", "WMT14 en-de (vocab 37,000; <= 50 tokens)",
                  "sentences/s", 64, {"pytorch": "tbd.models.pytorch.transformer",
                                   "tensorflow": "tbd.models.tensorflow.transformer"}),
        ModelInfo("faster_rcnn", "object detection", "CONV", "Pascal VOC 2007 (~500x350, 20 classes)",
                  "images/s", 1, {"pytorch": "tbd.models.pytorch.faster_rcnn", "mxnet": "tbd.models.mxnet.faster_rcnn",
                               "tensorflow": "tbd.models.tensorflow.faster_rcnn"}, fixed_batch=1),
        ModelInfo("deepspeech2", "speech recognition", "RNN (GRU)", "LibriSpeech (spectrograms, 161 bins)",
                  "audio_s/s", 16, {"pytorch": "tbd.models.pytorch.deepspeech2",
                                 "mxnet": "tbd.models.mxnet.deepspeech2"}),
        ModelInfo("wgan", "adversarial learning", "CONV", "down-sampled ImageNet (3x64x64)",
                  "images/s", 64, {"pytorch": "tbd.models.pytorch.wgan", "tensorflow": "tbd.models.tensorflow.wgan"}),
        ModelInfo("a3c", "deep reinforcement learning", "CONV", "Atari 2600 (4x84x84 frames)",
                  "frames/s", 20, {"pytorch": "tbd.models.pytorch.a3c", "mxnet": "tbd.models.mxnet.a3c"},
                  # Each PyTorch A3C worker acts on one frame at a time: one thread per process, as
                  # the paper's CPU workers ran; OpenMP threads only contend with the other workers.
                  # MXNet's A3C steps all environments as one batch in one process: its own default.
                  default_threads={"pytorch": 1}),
    )
}


def model_info(name: str) -> ModelInfo:
    """The registry entry for `name`; UsageError listing the valid names otherwise."""
    if name not in MODELS:
        raise UsageError(f"unknown model '{name}'", hint=f"choose one of: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def check_framework(framework: str) -> None:
    if framework not in FRAMEWORKS:
        raise UsageError(f"unknown framework '{framework}'", hint=f"choose one of: {', '.join(FRAMEWORKS)}")


def builder_module(name: str, framework: str) -> str:
    """Module path of the workload builder; UsageError if this pair is not implemented."""
    check_framework(framework)
    info = model_info(name)
    if framework not in info.implementations:
        have = ", ".join(sorted(info.implementations)) or "none yet"
        raise UsageError(f"model '{name}' has no {framework} implementation yet",
                         hint=f"available frameworks for {name}: {have}")
    return info.implementations[framework]


#: The module each framework's runner imports; `tbd suite` checks it without importing it.
FRAMEWORK_MODULES = {"pytorch": "torch", "tensorflow": "tensorflow", "mxnet": "mxnet"}


def framework_installed(framework: str) -> bool:
    """Whether this interpreter can import the framework (found on the path, not imported)."""
    return importlib.util.find_spec(FRAMEWORK_MODULES[framework]) is not None


def load_builder(name: str, framework: str):
    """Import and return the `build(batch, device, size, seed) -> Workload` function."""
    return importlib.import_module(builder_module(name, framework)).build
