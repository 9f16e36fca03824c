"""TensorFlow memory categories: the analysis over hand-built hook records (no tensorflow), and the
analytic feature maps read off a traced step's graph (tensorflow only: .venv-tensorflow through the
Makefile's TENSORFLOW_TESTS) checked against hand-computed and independently recounted figures."""

from __future__ import annotations

import math

import pytest

from tbd.analysis.memory.tensorflow import RECORDS_SCHEMA, memory_breakdown
from tbd.core.errors import ResultFormatError


def _records(feature_maps=(283_476, 283_476), **over):
    its = [{"step": s, "weights_bytes": 4000, "non_trainable_bytes": 64, "gradients_bytes": 4000,
            "optimizer_state_bytes": 4008, "input_bytes": 500} for s in (5, 6)]
    if feature_maps is not None:
        for it, fm in zip(its, feature_maps):
            it["feature_maps_bytes"] = fm
    reasons = {"feature_maps": "analytic: 90 forward tensors the step's gradient ops read"}
    return {"schema": RECORDS_SCHEMA, "device_index": -1, "iterations": its, "reasons": reasons, **over}


def test_feature_maps_are_analytic_and_no_peak_is_invented():
    m = memory_breakdown(_records(), None)
    assert m.feature_maps == 283_476 and m.reasons["feature_maps"].startswith("analytic")
    assert m.sources == {"weights": "measured", "gradients": "analytic", "dynamic": "measured",
                         "feature_maps": "analytic"}
    # No allocator events on the CPU: no peak, and the analytic figure is not put in at_peak.
    assert m.allocator_peak is None and all(v is None for v in m.at_peak.values())
    assert "analytic feature maps" in m.reasons["at_peak"]
    assert m.workspace is None and m.reasons["workspace"]


def test_feature_maps_null_with_reason_or_absent_in_older_records():
    rec = _records(feature_maps=(None, None), reasons={"feature_maps": "no static size in the traced graph"})
    m = memory_breakdown(rec, None)
    assert m.feature_maps is None and m.reasons["feature_maps"] == "no static size in the traced graph"
    assert "feature_maps" not in m.sources
    m = memory_breakdown(_records(feature_maps=None, reasons={}), None)
    assert m.feature_maps is None and "predate" in m.reasons["feature_maps"]
    with pytest.raises(ResultFormatError):
        memory_breakdown(_records(feature_maps=(1.5, 2)), None)


def _tiny_step(tf, keras):
    """conv 2->4 (3x3, valid) + ReLU + Flatten + Dense(3) + sparse softmax cross-entropy, one tf.function step."""
    inp = keras.Input((8, 8, 2))
    x = keras.layers.ReLU()(keras.layers.Conv2D(4, 3)(inp))
    model = keras.Model(inp, keras.layers.Dense(3)(keras.layers.Flatten()(x)))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = keras.optimizers.SGD(0.1)

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    train_step(tf.ones((2, 8, 8, 2)), tf.constant([0, 1]))
    return train_step


def test_tiny_conv_fc_step_by_hand():
    tf = pytest.importorskip("tensorflow")
    import keras

    from tbd.profilers.tensorflow.hook import memory_records
    from tbd.profilers.tensorflow.memory import step_feature_maps

    got = step_feature_maps(_tiny_step(tf, keras))
    # ReluGrad reads the ReLU output [2, 6, 6, 4] (1152 B); Dense's weight gradient reads the Flatten of
    # it, a Reshape view of the same buffer (not counted again); the conv's filter gradient reads the
    # batch (inputs, not a feature map); the loss keeps its softmax backprop [2, 3] (24 B) and the summed
    # loss, a float32 scalar its mean's gradient reads (4 B).
    assert got["bytes"] == 2 * 6 * 6 * 4 * 4 + 2 * 3 * 4 + 4 == 1180
    assert got["by_op"] == {"Relu": 1152, "SparseSoftmaxCrossEntropyWithLogits": 24, "Sum": 4}
    rec = memory_records(type("D", (), {"index": -1})(), [{"step": 1, "weights_bytes": 8}],
                         type("W", (), {"model": 1, "optimizer": 1, "inputs": 1})(), got)
    assert rec["iterations"][0]["feature_maps_bytes"] == 1180 and rec["feature_maps"]["tensors"] == 3
    assert rec["reasons"]["feature_maps"].startswith("analytic")


def test_step_without_a_tf_function_is_null_with_reason():
    from tbd.profilers.tensorflow.memory import step_feature_maps

    got = step_feature_maps(lambda: None)
    assert got["bytes"] is None and "not a tf.function" in got["reason"]


def _recount(model, batch: int, classes: int) -> int:
    """Independent recount, layer by layer from Keras's own output shapes, of what each layer's gradient
    reads as TF registers it (Conv2DBackpropFilter: x; Keras BatchNormalization, written with tf ops:
    x and three [C] vectors (batch mean, rsqrt(var + eps), gamma * rsqrt); ReluGrad: y; MaxPoolGrad:
    x and y; MatMul: x; Add, Pad, Mean (global average pooling): shapes only)."""
    kept: dict[int, int] = {}
    small = 0

    def nbytes(t) -> int:
        return math.prod(batch if d is None else d for d in t.shape) * 4  # float32

    def keep(t) -> None:
        if not any(t is i for i in model.inputs):  # the batch is inputs, not a feature map
            kept[id(t)] = nbytes(t)

    for layer in model.layers:
        kind = type(layer).__name__
        if kind in ("InputLayer", "ZeroPadding2D", "Add", "GlobalAveragePooling2D"):
            continue
        if kind in ("Conv2D", "Dense"):
            keep(layer.input)
        elif kind == "BatchNormalization":
            keep(layer.input)
            small += 3 * layer.input.shape[-1] * 4
        elif kind == "ReLU":
            keep(layer.output)
        elif kind == "MaxPooling2D":
            keep(layer.input)
            keep(layer.output)
        else:
            raise AssertionError(f"the recount has no rule for {kind}")
    loss = batch * classes * 4 + 4  # softmax backprop [N, classes] and the summed loss scalar
    return sum(kept.values()) + small + loss


def test_resnet50_test_size_feature_maps_equal_an_independent_recount():
    pytest.importorskip("tensorflow")
    from tbd.cli.registry import load_builder
    from tbd.profilers.tensorflow.memory import step_feature_maps

    batch = 4
    w = load_builder("resnet50", "tensorflow")(batch, "/CPU:0", "test", 0)
    w.step()
    got = step_feature_maps(w.step)
    assert got["reason"] is None and got["graphs"] == 1
    assert got["bytes"] == _recount(w.model, batch, 10)
    # Regression guard, by hand: the explicit pads the conv/max-pool gradients read (stem 38x38x3 and
    # 18x18x8; the stride-2 3x3 convs' 10x10x16, 6x6x32, 4x4x64), per image, 4 B each.
    assert got["by_op"]["Pad"] == batch * 4 * (38 * 38 * 3 + 18 * 18 * 8 + 10 * 10 * 16 + 6 * 6 * 32 + 4 * 4 * 64)
