"""TensorFlow (Keras 3) Transformer base: parameter count against PyTorch's, masks, schedule, loss, one trace, training.

Runs only where tensorflow imports (its own venv):
    .venv-tensorflow/bin/python -m pytest -q -p no:cacheprovider tests/models/tensorflow/test_tensorflow_transformer.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
import keras  # noqa: E402  (Keras 3, installed with tensorflow)

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.tensorflow import transformer  # noqa: E402
from tbd.models.tensorflow.transformer import BOS, EOS, PAD  # noqa: E402

CPU = "/CPU:0"
VOCAB, D, HEADS, D_FF, LAYERS = 37_000, 512, 8, 2048, 6  # Vaswani et al. 2017, Table 3 "base"; §5.1 vocab


def _count(variables) -> int:
    return sum(int(np.prod(v.shape)) for v in variables)


def _tiny(**overrides) -> transformer.Transformer:
    """A small model with its variables built (call with training=False: no dropout)."""
    args = {"vocab": 40, "d_model": 16, "heads": 4, "d_ff": 32, "encoder_layers": 2, "decoder_layers": 2}
    keras.utils.set_random_seed(0)
    model = transformer.Transformer(**{**args, **overrides})
    model((tf.constant([[5, 6]]), tf.constant([[BOS, 7]])))
    return model


# --- Architecture --------------------------------------------------------------------------

def test_full_parameter_count_closed_form_equals_pytorch():
    embedding = VOCAB * D  # ONE table: source = target = pre-softmax projection (§3.4)
    attention = 4 * (D * D + D)  # W_Q, W_K, W_V, W_O with biases
    ffn = D * D_FF + D_FF + D_FF * D + D  # W1, b1, W2, b2
    layer_norm = 2 * D  # gain and bias
    encoder_layer = attention + ffn + 2 * layer_norm
    decoder_layer = 2 * attention + ffn + 3 * layer_norm  # masked self-attention + encoder-decoder attention
    expected = embedding + LAYERS * encoder_layer + LAYERS * decoder_layer
    pytorch = 63_082_496  # models/pytorch/transformer.py (tests/models/pytorch/test_pytorch_transformer.py)
    assert expected == pytorch
    with tf.device(CPU):
        model = transformer.Transformer(VOCAB, D, HEADS, D_FF, LAYERS, LAYERS)
        model((tf.constant([[5, 6, 7]]), tf.constant([[BOS, 8]])))
    assert _count(model.trainable_weights) == expected
    assert model.non_trainable_weights == []
    # Layer for layer: 6 * 2 + 6 * 3 post-LNs with PyTorch's eps; every linear has a bias (PyTorch's nn.Linear).
    layers = model.encoder + model.decoder
    norms = [n for layer in layers for n in (layer.norm1, layer.norm2, getattr(layer, "norm3", None)) if n]
    assert len(norms) == LAYERS * 2 + LAYERS * 3 and all(n.epsilon == 1e-5 for n in norms)
    attentions = [a for layer in layers for a in (layer.self_attn, getattr(layer, "cross_attn", None)) if a]
    dense = [d for a in attentions for d in (a.q_proj, a.k_proj, a.v_proj, a.out_proj)]
    dense += [d for layer in layers for d in (layer.w1, layer.w2)]
    assert len(dense) == LAYERS * (4 + 2) + LAYERS * (8 + 2) and all(d.use_bias for d in dense)
    assert abs(_count(model.trainable_weights) - pytorch) / pytorch < 0.01


def test_embedding_is_shared_and_pad_lookups_send_it_no_gradient():
    model = _tiny()
    assert sum(1 for v in model.trainable_weights if v.shape[0] == 40) == 1  # only the embedding has a vocab axis
    # The last decoder position is a pad whose own embedding feeds its logits (a src pad only
    # reaches masked keys, so it could not show the difference).
    src, tgt_in = tf.constant([[5, 6, 7, PAD]]), tf.constant([[BOS, 8, 9, PAD]])
    with tf.GradientTape() as tape:
        logit = model((src, tgt_in))[0, -1, 11]
    grad = tf.convert_to_tensor(tape.gradient(logit, model.embed.embeddings)).numpy()
    # Row 11 appears in neither input, so only the pre-softmax projection can give it a gradient.
    assert np.abs(grad[11]).sum() > 0 and np.abs(grad[5]).sum() > 0
    # PAD is looked up but is not class 11: nn.Embedding(padding_idx=PAD) gives its row no gradient.
    assert np.abs(grad[PAD]).sum() == 0


def test_sinusoid_table_hand_values():
    expected = np.array([
        [0.0, 1.0, 0.0, 1.0],
        [math.sin(1), math.cos(1), math.sin(1 / 10_000 ** (2 / 4)), math.cos(1 / 10_000 ** (2 / 4))],
        [math.sin(2), math.cos(2), math.sin(2 / 10_000 ** (2 / 4)), math.cos(2 / 10_000 ** (2 / 4))],
    ])
    np.testing.assert_allclose(transformer.sinusoid_table(3, 4), expected, rtol=1e-6, atol=1e-7)


def test_decoder_is_causal_and_padding_does_not_change_a_sentence():
    model = _tiny()
    src = tf.constant([[5, 6, 7, 8]])
    a = model((src, tf.constant([[BOS, 9, 10, 11]]))).numpy()
    b = model((src, tf.constant([[BOS, 9, 30, 31]]))).numpy()
    np.testing.assert_allclose(a[:, :2], b[:, :2], rtol=1e-5, atol=1e-6)  # positions 0, 1 never see tokens 2, 3
    assert not np.allclose(a[:, 2:], b[:, 2:])
    # The same pair alone and right-padded on both sides (next to a longer pair): same logits.
    alone = model((tf.constant([[5, 6]]), tf.constant([[BOS, 9, 10]]))).numpy()[0]
    batched = model((tf.constant([[5, 6, PAD, PAD], [7, 8, 9, 10]]),
                     tf.constant([[BOS, 9, 10, PAD, PAD], [BOS, 3, 4, 5, 6]]))).numpy()[0, :3]
    np.testing.assert_allclose(batched, alone, rtol=1e-5, atol=1e-5)


# --- Loss and schedule ---------------------------------------------------------------------

def test_label_smoothed_loss_matches_a_numpy_hand_computation():
    rng = np.random.RandomState(0)
    logits = rng.standard_normal((2, 3, 5))
    labels = np.array([[3, 4, EOS], [4, EOS, PAD]])
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    per_token = (1 - 0.1) * nll + 0.1 * (-log_p.mean(-1))  # PyTorch: epsilon spread over all 5 classes
    real = labels != PAD
    expected = per_token[real].sum() / real.sum()  # mean over the 5 real tokens
    loss = transformer.smoothed_cross_entropy(tf.constant(logits, tf.float32), tf.constant(labels, tf.int32))
    assert float(loss) == pytest.approx(expected, rel=1e-5)


def test_learning_rate_schedule_hand_values():
    lr = transformer.inverse_sqrt_lr
    assert lr(1, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)  # linear warm-up
    assert lr(4000, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)  # peak: both branches meet
    assert lr(16_000, 512, 4000) == pytest.approx(512 ** -0.5 / 16_000 ** 0.5)  # inverse-sqrt decay
    schedule = transformer.InverseSqrtSchedule(512, 4000)
    # Keras passes the 0-based optimizer.iterations; the paper's step is that plus one.
    assert [float(schedule(i)) for i in (0, 3999, 15_999)] == pytest.approx(
        [lr(1, 512, 4000), lr(4000, 512, 4000), lr(16_000, 512, 4000)], rel=1e-6)


# --- Workload ------------------------------------------------------------------------------

def test_workload_pool_one_trace_schedule_and_tokens():
    work = transformer.build(4, CPU, "test", seed=0, pool_size=3)
    assert (work.name, work.samples_per_step, work.throughput_unit) == ("transformer", 4, "sentences/s")
    opt = work.optimizer
    assert isinstance(opt, keras.optimizers.Adam)
    assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.9, 0.98, 1e-9)
    inputs = [t.numpy() for t in work.inputs()]
    assert len(inputs) == 3 * 3 and all(t.dtype == np.int32 for t in inputs)
    # One static shape for the whole pool (so one trace, and MatMul shapes are known to the hook)...
    assert len({(a.shape, b.shape, c.shape) for a, b, c in zip(inputs[0::3], inputs[1::3], inputs[2::3])}) == 1
    src_len = np.concatenate([(src != PAD).sum(1) for src in inputs[0::3]])
    assert src_len.min() >= 4 and src_len.max() <= 10 and inputs[0].shape[1] == src_len.max()
    # ... although sentences differ in length: the padding to the pool's longest only appends PAD.
    assert len(set(src_len)) > 1
    for src, tgt_in, tgt_out in zip(inputs[0::3], inputs[1::3], inputs[2::3]):
        assert np.all(tgt_in[:, 0] == BOS) and np.all((tgt_out == EOS).sum(1) == 1)
    per_batch = [transformer.batch_tokens(inputs[i], inputs[i + 2]) for i in (0, 3, 6)]
    assert work.units_per_step == {"tokens/s": sum(per_batch) / 3}
    # Test size: d_model 32, warm-up 4; the lr the optimizer uses at paper step s is lr(s, 32, 4).
    seen = []
    for _ in range(6):
        seen.append(float(opt.learning_rate))
        loss = work.step()
        assert isinstance(loss, tf.Tensor) and loss.shape == ()
    assert seen == pytest.approx([transformer.inverse_sqrt_lr(s, 32, 4) for s in range(1, 7)], rel=1e-6)
    assert work.step.train_step.experimental_get_tracing_count() == 1


def test_test_size_training_lowers_loss_on_a_fixed_batch():
    work = transformer.build(4, CPU, "test", seed=0, pool_size=1)
    losses = [float(work.step()) for _ in range(8)]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_same_seed_same_workload():
    a, b = (transformer.build(2, CPU, "test", seed=3, pool_size=1) for _ in range(2))
    c = transformer.build(2, CPU, "test", seed=4, pool_size=1)
    for x, y in zip(a.model.weights + a.inputs(), b.model.weights + b.inputs(), strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert not all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a.inputs(), c.inputs()))
    assert np.all(a.model.embed.embeddings.numpy()[PAD] == 0)  # the pad row starts at zero


@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": CPU, "size": "test", **kwargs}
    with pytest.raises(UsageError):
        transformer.build(**args)
