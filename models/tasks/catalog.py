"""Which task each suite model trains on in `tbd train`, its metric and default target, or why it has none yet.

A task is real data that works offline on a CPU machine, shipped by a package (nothing downloads at
run time), a held-out split, and a metric computed on it. Each model trains the same architecture
family as its `tbd profile` workload, sized to the data.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
from dataclasses import dataclass
from typing import Any, Protocol


class TaskRun(Protocol):
    """One run of a task, built by its module's `build(model, batch, seed, size, device) -> TaskRun`.

    Timing is the caller's: it logs MLPerf's epoch and eval intervals around these calls, so each
    returns only once the device has finished its work (`sync`)."""

    train_samples: int  # samples (images, sentence pairs, utterances, environment frames) in one epoch
    eval_samples: int  # items of the held-out split `evaluate` scores
    hyperparameters: dict[str, Any]  # logged as MLPerf keys (opt_name, opt_base_learning_rate, ...)

    def train_epoch(self) -> int:
        """One epoch (or block) of training; the samples it trained on."""

    def evaluate(self) -> float:
        """The metric on the held-out split, in the TaskSpec's scale."""

    def latency_per_item_s(self) -> float | None:
        """DAWNBench's inference latency: held-out items one at a time, mean seconds each; None where the
        task has no per-item inference (say why in the module)."""

    def sync(self) -> None:
        """Wait for the device's queued work."""


#: What a task's run may also offer: `train_step()`, one optimizer step on a fixed batch of its training
#: data, which `tbd train` hands to tbd's profiler for the stable-phase throughput of the same configuration,
#: and `samples_per_step`, the samples that step trains on (default: the batch).
TRAIN_STEP = "train_step"
SAMPLES_PER_STEP = "samples_per_step"


@dataclass(frozen=True)
class TaskSpec:
    model: str  # the suite model ("resnet50")
    task: str  # short name ("digits")
    data: str  # what the data is and where it comes from
    metric: str  # the quality metric on the held-out split ("top1")
    target: float  # the default target, in the metric's own scale (a fraction for accuracy)
    higher_is_better: bool
    module: str  # the models.tasks module that builds it
    fraction: bool = True  # the metric is a fraction (DAWNBench's TSV shows it in percent)
    dawnbench_column: str = "top1Accuracy"  # the metric's column in the DAWNBench TSV
    batch: int = 64  # `tbd train --batch`'s default (A3C: frames per worker per update, t_max)
    # What the task needs beyond torch: (Python module, pip name) or ("", program) for a Debian package's
    # program; `missing()` names the first one absent, so `tbd train` says it in one line before it starts.
    requires: tuple[tuple[str, str], ...] = ()

    def missing(self) -> tuple[str, str] | None:
        """(what is missing, the command that installs it), or None."""
        for module, package in self.requires:
            if module and importlib.util.find_spec(module) is None:
                return f"the Python package {package}", f"pip install '{package}' (or: pip install -e '.[pytorch]')"
            if not module and shutil.which(package) is None:
                return f"the program {package}", f"apt-get install -y {package}"
        return None

    @property
    def comparison(self) -> str:
        return ">=" if self.higher_is_better else "<="

    def reached(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target

    def build(self, batch: int, seed: int, size: str, device: Any) -> TaskRun:
        """A run of this task (the module is imported here: each task brings its own packages)."""
        return importlib.import_module(f"tbd.models.tasks.{self.module}").build(self.model, batch, seed, size, device)


_DIGITS = ("scikit-learn's bundled handwritten digits (UCI ML hand-written digits: 1,797 8x8 images, 10 classes; "
           "80/20 stratified split, held-out 360), upsampled to 32x32")

_NUM2WORDS = ("numbers 0..999,999 written in English and in French by the num2words package (rule-based, offline); "
              "8,000 training and 500 held-out numbers, disjoint, fixed seed; greedy decoding")

_CARTPOLE = ("gymnasium's CartPole-v1 (reward threshold 475, episodes cut at 500 steps); held out: one greedy "
             "episode from each of reset seeds 0..99, training episodes reset with seeds >= 100")

_CANVASES = ("scikit-learn's digits (split as the ResNet task's) placed 1-3 per 96x96 canvas, non-overlapping, "
             "fixed layout: 727 training / 186 held-out canvases; mAP at IoU 0.5 by pycocotools' COCOeval")

_WGAN = ("scikit-learn's bundled digits (train split of the digits task, 1,437 images, upsampled to 32x32 test / "
         "64x64 full); score: Frechet distance (torchmetrics' FrechetInceptionDistance) between 1,000 generated digits "
         "and the 360 held-out digits in the 64-d penultimate features of a small CNN digits classifier trained once "
         "on the train split")
_SPOKEN = ("English words of the numbers 0-999 (num2words) spoken by espeak-ng in 4 voice/speed/pitch variants, "
           "16 kHz 161-bin log spectrograms; 800 numbers train (3,200 utterances), 200 disjoint numbers held out "
           "(800 utterances); WER by torchmetrics, greedy CTC decoding")
_SKLEARN = (("sklearn", "scikit-learn"),)

TASKS: dict[str, TaskSpec] = {
    **{name: TaskSpec(name, "digits", _DIGITS, "top1", 0.97, True, "digits", requires=_SKLEARN)
       for name in ("resnet50", "resnet101", "resnet152")},
    **{name: TaskSpec(name, "num2words", _NUM2WORDS, "bleu", 97.0, True, "num2words_translation", fraction=False,
                      dawnbench_column="bleu", requires=(("num2words", "num2words"), ("sacrebleu", "sacrebleu")))
       for name in ("seq2seq", "transformer")},
    "inception3": TaskSpec("inception3", "digits", _DIGITS.replace("upsampled to 32x32", "upsampled to 75x75"),
                           "top1", 0.96, True, "inception_digits", requires=_SKLEARN),
    "faster_rcnn": TaskSpec("faster_rcnn", "digit canvases", _CANVASES, "mAP", 0.2, True, "canvas_detection",
                            dawnbench_column="mAP", batch=1, requires=(*_SKLEARN, ("pycocotools", "pycocotools"))),
    "a3c": TaskSpec("a3c", "cartpole", _CARTPOLE, "mean_return", 475.0, True, "cartpole", fraction=False,
                    dawnbench_column="meanReturn", batch=5, requires=(("gymnasium", "gymnasium"),)),
    "wgan": TaskSpec("wgan", "digits_wgan", _WGAN, "fid", 40.0, False, "digits_wgan", fraction=False,
                     dawnbench_column="FID", batch=32, requires=(*_SKLEARN, ("torchmetrics", "torchmetrics"))),
    "deepspeech2": TaskSpec("deepspeech2", "spoken_numbers", _SPOKEN, "wer", 0.05, False, "spoken_numbers",
                            dawnbench_column="WER", batch=32,
                            requires=(("num2words", "num2words"), ("torchmetrics", "torchmetrics"), ("", "espeak-ng"))),
}

#: Models without a task in this version, and why.
NO_TASK: dict[str, str] = {
}


def task_for(model: str) -> TaskSpec | None:
    return TASKS.get(model)
