"""Which workloads exist, for which framework, and where each one's builder lives.

Adding a model is one file in models/<framework>/ plus one line in MODELS.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from tbd.errors import UsageError

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


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("resnet50", "image classification", "CONV", "ImageNet (3x224x224, 1000 classes)",
                  "images/s", 32, {"pytorch": "models.pytorch.resnet50"}),
        ModelInfo("seq2seq", "machine translation", "LSTM", "IWSLT15 en-vi (vocab 17,188; 20-30 tokens)",
                  "sentences/s", 64, {"pytorch": "models.pytorch.seq2seq"}),
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


def load_builder(name: str, framework: str):
    """Import and return the `build(batch, device, size, seed) -> Workload` function."""
    return importlib.import_module(builder_module(name, framework)).build
