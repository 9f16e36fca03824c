"""Framework-neutral sizes and hyper-parameters of the suite's workloads, one copy for every framework.

models/<framework>/<model>.py say how a network is built in that framework; what it is (layer
widths, the "full" and "test" sizes, loss weights, optimizer settings, init scales) is written
once here, so the PyTorch, TensorFlow and MXNet versions cannot drift apart. Faster R-CNN's live
in models/host_data/detection.py, Deep Speech 2's data constants in models/host_data/speech.py.
Plain Python (and tbd.core.errors, for the checks every port shares): importable from every
framework's interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

from tbd.core.errors import UsageError

# --- Inception-v3 (Szegedy et al., CVPR 2016; torchvision's Inception3, TF-slim's training recipe)

#: Per-stage block settings of torchvision's Inception3: InceptionA's pool-branch widths
#: (Mixed_5b..5d), InceptionC's 7x7-branch widths (Mixed_6b..6e), and the number of InceptionE
#: blocks (Mixed_7b..7c).
INCEPTION3_FULL_STAGES = ((32, 64, 64), (128, 160, 160, 192), 2)

#: size -> (stages, channel width multiplier, image side in pixels, classes). "full" is ImageNet's
#: 3x299x299 / 1000 classes; "test" keeps every block type and the 299x299 input the auxiliary
#: head needs (a 17x17 grid after Mixed_6e), with one block per stage at 1/16 of the channels.
INCEPTION3_SIZES = {
    "full": (INCEPTION3_FULL_STAGES, 1.0, 299, 1000),
    "test": (((32,), (128,), 1), 1 / 16, 299, 10),
}

#: Weight of the auxiliary classifier's loss (TF-slim train_image_classifier.py).
INCEPTION3_AUX_WEIGHT = 0.4
#: Label smoothing epsilon (Szegedy et al. 2016, section 7).
INCEPTION3_LABEL_SMOOTHING = 0.1
#: torchvision's init std for convolution and linear weights, and for the auxiliary fc.
INCEPTION3_INIT_STD, INCEPTION3_AUX_FC_STD = 0.1, 0.001
#: Smallest batch that trains: the auxiliary head ends on a 1x1 map, so at batch 1 its conv1
#: BatchNorm would normalise one value per channel, whose batch variance is 0 (training-mode
#: BatchNorm refuses it in PyTorch; torchvision's model has the same limit).
INCEPTION3_MIN_BATCH = 2


def check_inception3_batch(batch: int) -> None:
    """UsageError when `batch` is below INCEPTION3_MIN_BATCH (every port refuses it alike)."""
    if batch < INCEPTION3_MIN_BATCH:
        raise UsageError(f"inception3 needs a batch of at least {INCEPTION3_MIN_BATCH} images, got {batch}",
                         hint="the auxiliary classifier's BatchNorm sees one value per channel at batch 1")


# --- A3C (Mnih et al., ICML 2016)

A3C_STACK, A3C_ACTIONS = 4, 6  # stacked frames per observation; Pong's minimal action set
A3C_GAMMA, A3C_ENTROPY_BETA, A3C_VALUE_COEF = 0.99, 0.01, 0.5
A3C_LR, A3C_ALPHA, A3C_EPS = 7e-4, 0.99, 0.1  # RMSProp (see models/pytorch/a3c.py)


@dataclass(frozen=True)
class A3CArch:
    """Network and frame sizes: frame side (pixels), conv (filters, kernel, stride) x2, hidden units."""

    side: int
    conv1: tuple[int, int, int]
    conv2: tuple[int, int, int]
    hidden: int


#: "full" is the paper's network on 84x84 frames. "test" keeps the layer structure on 42x42 frames
#: with half the kernel and stride of conv1 (so both convs still give 20x20 and 9x9 maps) and
#: narrower layers.
A3C_SIZES = {"full": A3CArch(84, (16, 8, 4), (32, 4, 2), 256), "test": A3CArch(42, (8, 4, 2), (16, 4, 2), 64)}


# --- WGAN-GP (Gulrajani et al., NeurIPS 2017; the authors' gan_64x64.py)

#: Gradient-penalty weight lambda (gan_64x64.py LAMBDA; paper Algorithm 1).
WGAN_GP_WEIGHT = 10.0
#: Adam settings of both networks (gan_64x64.py, MODE 'wgan-gp'; paper Algorithm 1).
WGAN_LEARNING_RATE, WGAN_BETAS = 1e-4, (0.0, 0.9)

#: size -> (DIM, image side in pixels, noise width, critic updates per generator update).
#: "full" is gan_64x64.py; "test" keeps the four blocks per network at DIM 8 on 32x32 images
#: (the generator starts from 2x2 instead of 4x4) with two critic updates per iteration. Not
#: 16x16: a 1x1 start would leave the generator's first BatchNorm one value per channel at batch
#: 1, which training mode rejects.
WGAN_SIZES = {"full": (64, 64, 128, 5), "test": (8, 32, 128, 2)}
WGAN_BLOCKS = 4  # residual blocks per network; each doubles (generator) or halves (critic) the side

#: Per-channel mean and standard deviation of ImageNet pixels in [0, 1] (R, G, B): the
#: normalisation constants of the torchvision / fb.resnet.torch ImageNet recipes. Down-sampling
#: to 64x64 averages pixels, which keeps the means.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# --- ResNet (He et al., CVPR 2016; torchvision's v1.5 bottleneck networks)

#: Bottleneck blocks per stage, by network (He et al. 2016, Table 1).
RESNET_DEPTHS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3), "resnet152": (3, 8, 36, 3)}

#: Per variant: size -> (blocks per stage, stem width in channels, image side in pixels, classes).
#: "full" is ImageNet's 3x224x224 / 1000 classes; "test" keeps each variant's shape (the third
#: stage is the deep one) at CI speed, a CPU step well under a second.
RESNET_SIZES = {
    "resnet50": {"full": (RESNET_DEPTHS["resnet50"], 64, 224, 1000), "test": ((1, 1, 1, 1), 8, 32, 10)},
    "resnet101": {"full": (RESNET_DEPTHS["resnet101"], 64, 224, 1000), "test": ((1, 1, 3, 1), 8, 32, 10)},
    "resnet152": {"full": (RESNET_DEPTHS["resnet152"], 64, 224, 1000), "test": ((1, 2, 4, 1), 8, 32, 10)},
}


# --- Seq2Seq (the tensorflow/nmt model the TBD paper ran: Luong et al. 2015 attention)

#: size -> (vocab for source and target, embedding width, LSTM units, LSTM layers, shortest and
#: longest sentence in tokens). "full" is the paper's configuration with sentences of 20..30
#: tokens; "test" is the same architecture shrunk for CI.
SEQ2SEQ_SIZES = {
    "full": (17_188, 512, 512, 2, (20, 30)),
    "test": (50, 16, 16, 2, (4, 8)),
}
#: Every parameter starts uniform in [-SEQ2SEQ_INIT_SCALE, SEQ2SEQ_INIT_SCALE] (tensorflow/nmt's init_weight).
SEQ2SEQ_INIT_SCALE = 0.1


# --- Transformer (Vaswani et al., NeurIPS 2017, the base model)

#: Longest sentence (tokens) the position table covers; WMT14 training pairs are kept to <= 50.
TRANSFORMER_MAX_POSITIONS = 256

#: size -> (shared vocab, d_model, heads, FFN width, encoder layers, decoder layers, shortest and
#: longest sentence in tokens, warm-up steps of the lr schedule). "full" is Table 3's base model on
#: WMT14 en-de with sentences of 10..50 BPE tokens (mean 30; the registry's <= 50 cap); "test" is
#: the same architecture shrunk for CI, with a short warm-up so a handful of steps reach a useful
#: learning rate.
TRANSFORMER_SIZES = {
    "full": (37_000, 512, 8, 2048, 6, 6, (10, 50), 4000),
    "test": (64, 32, 4, 128, 2, 2, (4, 10), 4),
}
TRANSFORMER_DROPOUT = 0.1  # P_drop of the base model (Table 3)
TRANSFORMER_LABEL_SMOOTHING = 0.1  # epsilon_ls (§5.4)
TRANSFORMER_ADAM_BETAS, TRANSFORMER_ADAM_EPS = (0.9, 0.98), 1e-9  # §5.3


# --- Deep Speech 2 (Amodei et al., ICML 2016; the MXNet example's deepspeech.cfg)

#: One convolution: (output channels, (time, frequency) kernel, (time, frequency) stride).
DS2ConvSpec = tuple[int, tuple[int, int], tuple[int, int]]


@dataclass(frozen=True)
class DS2Config:
    """Layer sizes of one Deep Speech 2 variant and the utterance durations it is fed."""

    convs: tuple[DS2ConvSpec, ...]
    gru_layers: int
    hidden: int  # GRU units per direction
    fc: int  # rear fully connected units
    durations_s: tuple[float, float] | None  # uniform range in seconds, or None: LibriSpeech's spread


#: "full" is deepspeech.cfg; "test" keeps the layer types (conv + BN + clipped ReLU, bi-GRUs with
#: sequence-wise BN between them, FC + BN, classifier, CTC) with 1 conv and 2 small GRUs on 0.5-1 s.
DS2_SIZES = {
    "full": DS2Config(convs=((32, (11, 41), (2, 2)), (32, (11, 21), (1, 2))), gru_layers=5, hidden=1760,
                      fc=1760, durations_s=None),
    "test": DS2Config(convs=((4, (11, 41), (2, 2)),), gru_layers=2, hidden=16, fc=16, durations_s=(0.5, 1.0)),
}
