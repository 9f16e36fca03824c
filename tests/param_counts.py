"""Closed-form parameter counts of the suite's networks, shared by the framework ports' tests.

Plain arithmetic over the layer shapes (no framework imported), so each framework's test compares
its own model against the same independent count.
"""

from __future__ import annotations


def resnet50_counts() -> tuple[int, int]:
    """(trainable parameters, BatchNorm running/moving-stat values) of ResNet-50 v1.5, 1000 classes, by closed form."""
    weights, bn_channels = 3 * 64 * 7 * 7, 64  # stem conv and its BatchNorm
    in_ch = 64
    for stage, blocks in enumerate((3, 4, 6, 3)):
        w = 64 * 2 ** stage
        for block in range(blocks):
            weights += in_ch * w + 9 * w * w + w * 4 * w  # 1x1, 3x3, 1x1 convolutions, no bias
            bn_channels += w + w + 4 * w
            if block == 0:  # projection shortcut: 1x1 conv + BatchNorm
                weights += in_ch * 4 * w
                bn_channels += 4 * w
            in_ch = 4 * w
    weights += 2048 * 1000 + 1000  # fully connected layer with bias
    return weights + 2 * bn_channels, 2 * bn_channels  # gamma+beta trainable; running mean+variance not


def inception3_counts() -> tuple[int, int]:
    """(trainable parameters, BatchNorm running-stat values) of torchvision's Inception3, 1000 classes, by closed form.

    Each BasicConv2d (cin, cout, kh, kw) holds cin*cout*kh*kw conv weights (no bias) and a BatchNorm
    of cout channels (gamma, beta trainable; running mean and variance not).
    """
    convs = [(3, 32, 3, 3), (32, 32, 3, 3), (32, 64, 3, 3), (64, 80, 1, 1), (80, 192, 3, 3)]  # stem

    def block_a(cin, pool):  # -> 64 + 64 + 96 + pool channels
        return [(cin, 64, 1, 1), (cin, 48, 1, 1), (48, 64, 5, 5), (cin, 64, 1, 1), (64, 96, 3, 3),
                (96, 96, 3, 3), (cin, pool, 1, 1)]

    def block_c(c7):  # 768 -> 4 * 192
        return [(768, 192, 1, 1), (768, c7, 1, 1), (c7, c7, 1, 7), (c7, 192, 7, 1), (768, c7, 1, 1),
                (c7, c7, 7, 1), (c7, c7, 1, 7), (c7, c7, 7, 1), (c7, 192, 1, 7), (768, 192, 1, 1)]

    def block_e(cin):  # -> 320 + 2 * 384 + 2 * 384 + 192 = 2048
        return [(cin, 320, 1, 1), (cin, 384, 1, 1), (384, 384, 1, 3), (384, 384, 3, 1), (cin, 448, 1, 1),
                (448, 384, 3, 3), (384, 384, 1, 3), (384, 384, 3, 1), (cin, 192, 1, 1)]

    convs += block_a(192, 32) + block_a(256, 64) + block_a(288, 64)  # Mixed_5b..5d: 192 -> 256 -> 288 -> 288
    convs += [(288, 384, 3, 3), (288, 64, 1, 1), (64, 96, 3, 3), (96, 96, 3, 3)]  # Mixed_6a: -> 384+96+288 = 768
    convs += block_c(128) + block_c(160) + block_c(160) + block_c(192)  # Mixed_6b..6e
    convs += [(768, 128, 1, 1), (128, 768, 5, 5)]  # AuxLogits conv0, conv1
    convs += [(768, 192, 1, 1), (192, 320, 3, 3), (768, 192, 1, 1), (192, 192, 1, 7), (192, 192, 7, 1),
              (192, 192, 3, 3)]  # Mixed_7a: -> 320 + 192 + 768 = 1280
    convs += block_e(1280) + block_e(2048)  # Mixed_7b, 7c
    weights = sum(cin * cout * kh * kw for cin, cout, kh, kw in convs)
    bn_channels = sum(cout for _, cout, _, _ in convs)
    fcs = (768 * 1000 + 1000) + (2048 * 1000 + 1000)  # aux fc and main fc, with bias
    return weights + 2 * bn_channels + fcs, 2 * bn_channels


def seq2seq_count(vocab: int = 17_188, embed: int = 512, hidden: int = 512, lstm_biases: int = 2) -> int:
    """Trainable parameters of the NMT model by closed form; `lstm_biases` bias vectors per LSTM layer
    (PyTorch and MXNet keep two, b_ih and b_hh; a Keras LSTM one)."""
    lstm_layer0 = 4 * hidden * (embed + hidden) + lstm_biases * 4 * hidden
    lstm_layer1 = 4 * hidden * (hidden + hidden) + lstm_biases * 4 * hidden
    return (2 * vocab * embed + 2 * (lstm_layer0 + lstm_layer1)
            + hidden * hidden + 2 * hidden * hidden + hidden * vocab)
