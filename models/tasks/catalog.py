"""Which task each suite model trains on in `tbd train`, its metric and default target, or why it has none yet.

A task is real data that works offline on a CPU machine, shipped by a package (nothing downloads at
run time), a held-out split, and a metric computed on it. Each model trains the same architecture
family as its `tbd profile` workload, sized to the data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskSpec:
    model: str  # the suite model ("resnet50")
    task: str  # short name ("digits")
    data: str  # what the data is and where it comes from
    metric: str  # the quality metric on the held-out split ("top1")
    target: float  # the default target, in the metric's own scale (a fraction for accuracy)
    higher_is_better: bool
    module: str  # the models.tasks module that builds it


_DIGITS = ("scikit-learn's bundled handwritten digits (UCI ML hand-written digits: 1,797 8x8 images, 10 classes; "
           "80/20 stratified split, held-out 360), upsampled to 32x32")

TASKS: dict[str, TaskSpec] = {
    name: TaskSpec(name, "digits", _DIGITS, "top1", 0.97, True, "digits")
    for name in ("resnet50", "resnet101", "resnet152")
}

#: Models without a task in this version, and why.
NO_TASK: dict[str, str] = {
    "inception3": "not yet: its test size keeps the 299x299 input, which digits upsampled that far makes "
                  "minutes per epoch on a CPU; a task sized to it comes with the next tasks",
    "seq2seq": "not yet: a num2words translation task (BLEU by sacrebleu) comes next",
    "transformer": "not yet: a num2words translation task (BLEU by sacrebleu) comes next",
    "a3c": "not yet: CartPole-v1 to its reward threshold (gymnasium) comes next",
    "deepspeech2": "not yet: spoken numbers synthesized by espeak-ng, to a WER, come next",
    "faster_rcnn": "not yet: digits placed on a canvas, to an mAP (torchmetrics), come next",
    "wgan": "not yet: a stated sample-quality score comes next",
}


def task_for(model: str) -> TaskSpec | None:
    return TASKS.get(model)
