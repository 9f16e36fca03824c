"""The framework-neutral synthetic data (models/host_data/synthetic.py) the MXNet and TensorFlow ports share."""

from __future__ import annotations

import numpy as np

from tbd.models.host_data import synthetic


def test_sentence_pair_batch_layout():
    rng = np.random.RandomState(0)
    src, tgt_in, tgt_out = synthetic.sentence_pair_batch(64, 50, 4, 8, rng)
    src_len = (src != synthetic.PAD).sum(1)
    assert src_len.min() >= 4 and src_len.max() <= 8 and src.shape[1] == src_len.max()
    assert np.all(np.diff(src_len) <= 0)  # longest source first
    assert src[src != synthetic.PAD].min() >= synthetic.FIRST_TOKEN and src.max() < 50
    assert tgt_in.shape == tgt_out.shape and np.all(tgt_in[:, 0] == synthetic.BOS)
    tgt_len = (tgt_out != synthetic.PAD).sum(1) - 1  # words, without </s>
    assert tgt_len.min() >= 4 and tgt_len.max() <= 8 and tgt_out.shape[1] == tgt_len.max() + 1
    assert np.all(tgt_out[np.arange(64), tgt_len] == synthetic.EOS)
    assert np.all((tgt_out == synthetic.EOS).sum(1) == 1)
    # The decoder reads the words shifted right by one: tgt_in[t + 1] == tgt_out[t] for words.
    words = np.arange(tgt_out.shape[1] - 1)[None, :] < tgt_len[:, None]
    assert np.all(tgt_in[:, 1:][words] == tgt_out[:, :-1][words])
    assert synthetic.batch_tokens(src, tgt_out) == src_len.sum() + (tgt_len + 1).sum()


def test_image_batch_shapes_and_seeding():
    images, labels = synthetic.image_batch(5, (3, 8, 8), 10, np.random.RandomState(1))
    assert images.shape == (5, 3, 8, 8) and images.dtype == np.float32
    assert labels.shape == (5,) and labels.min() >= 0 and labels.max() < 10
    again, _ = synthetic.image_batch(5, (3, 8, 8), 10, np.random.RandomState(1))
    assert np.array_equal(images, again)
