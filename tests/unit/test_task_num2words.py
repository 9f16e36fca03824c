"""The num2words English-to-French translation task (models/tasks/num2words_translation.py): the split is fixed
and disjoint, the sentences are num2words' own, BLEU is sacrebleu's and matches a value worked out by hand,
greedy decoding is the models' teacher-forced math, and a short training beats an untrained model."""

from __future__ import annotations

import math

import pytest
import torch

from tbd.models.tasks.num2words_translation import (
    BOS,
    EOS,
    HELD_OUT,
    PAD,
    TRAIN_PAIRS,
    UNK,
    Split,
    bleu,
    build,
    detokenize,
    draw_numbers,
    greedy_seq2seq,
    greedy_transformer,
    load_split,
    sentence_pairs,
    tokenize,
)

# the task's own packages (setup.cfg's train extra); the module imports them only where it uses them
pytest.importorskip("num2words")
pytest.importorskip("sacrebleu")


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_split_is_fixed_disjoint_and_spans_every_length():
    train, test = draw_numbers()
    assert (train, test) == draw_numbers()  # SPLIT_SEED, not the run's seed
    assert len(train) == len(set(train)) == TRAIN_PAIRS and len(test) == len(set(test)) == HELD_OUT
    assert not set(train) & set(test)
    assert all(0 <= n <= 999_999 for n in train + test)
    # digits uniform over 1..6: the 100 numbers below 100 are all drawn early, into training; the held-out ones
    # (the last drawn) have 3..6 digits; six digits are not 90 % of the data as 0..999,999 uniform would make them
    assert set(range(100)) <= set(train) and min(test) >= 100
    lengths = [len(str(n)) for n in train]
    assert set(lengths) == {1, 2, 3, 4, 5, 6} and lengths.count(6) < TRAIN_PAIRS / 3


def test_the_pairs_are_num2words_own_sentences():
    assert sentence_pairs((71, 342, 99, 80, 200, 21_001)) == [
        ("seventy-one", "soixante et onze"),
        ("three hundred and forty-two", "trois cent quarante-deux"),
        ("ninety-nine", "quatre-vingt-dix-neuf"),
        ("eighty", "quatre-vingts"),
        ("two hundred", "deux cents"),
        ("twenty-one thousand and one", "vingt et un mille un"),
    ]


def test_word_tokens_split_hyphens_and_commas_and_join_back_exactly():
    assert tokenize("quatre-vingt-dix-neuf") == ["quatre", "-", "vingt", "-", "dix", "-", "neuf"]
    assert tokenize("twelve thousand, three hundred") == ["twelve", "thousand", ",", "three", "hundred"]
    vocab, train, test = load_split()
    for i in range(0, len(test), 25):
        english = vocab.decode(test.src[i].tolist())
        assert detokenize(tokenize(english)) == english
        assert vocab.decode(test.tgt_out[i].tolist()) == test.references[i]
    # every held-out word is in the training split's vocabulary, so the task never asks for an <unk>
    assert not (test.src == UNK).any() and not (test.tgt_out == UNK).any()
    assert len(vocab) == 63  # 4 specials, "," and "-", 31 English and 27 French words ("six" in both)
    assert (train.tgt_out[torch.arange(len(train.tgt_len)), train.tgt_len - 1] == EOS).all()
    assert (train.tgt_in[:, 0] == BOS).all()


def test_bleu_is_sacrebleus_corpus_bleu_in_points_worked_by_hand():
    assert bleu(["deux mille trois cent quarante-deux"], ["deux mille trois cent quarante-deux"]) == pytest.approx(100)
    assert bleu(["trois cent quarante-deux"], ["trois cent quarante-deux"]) == 0.0  # no 4-gram: BLEU is 0
    # five 13a tokens each, one wrong at the end ("quarante" for "quarante-deux": hyphenated words stay whole):
    # n-gram precisions 4/5, 3/4, 2/3, 1/2, equal lengths (no brevity penalty)
    hand = 100 * math.exp((math.log(4 / 5) + math.log(3 / 4) + math.log(2 / 3) + math.log(1 / 2)) / 4)
    assert bleu(["deux mille trois cent quarante"], ["deux mille trois cent quarante-deux"]) == pytest.approx(hand)
    assert hand == pytest.approx(66.874, abs=1e-3)
    # four of the five tokens, all right: precisions 1, brevity penalty exp(1 - 5/4)
    assert bleu(["deux mille trois cent"], ["deux mille trois cent quarante-deux"]) == pytest.approx(
        100 * math.exp(1 - 5 / 4))


@pytest.mark.parametrize("model_name", ["seq2seq", "transformer"])
def test_greedy_decoding_is_the_teacher_forced_forward_one_token_at_a_time(model_name):
    run = build(model_name, 64, seed=3, size="test")
    run.model.eval()
    src, src_len = run.test.src[:16], run.test.src_len[:16]
    with torch.no_grad():
        if model_name == "seq2seq":
            out = greedy_seq2seq(run.model, src, src_len, max_len=10)
            by_len = src_len.argsort(descending=True)
            logits = run.model(src[by_len], src_len[by_len], torch.cat([torch.full((16, 1), BOS), out[by_len, :-1]],
                                                                        dim=1))
            out = out[by_len]
        else:
            out = greedy_transformer(run.model, src, max_len=10)
            logits = run.model(src, torch.cat([torch.full((16, 1), BOS), out[:, :-1]], dim=1))
    assert out.shape == (16, 10)  # an untrained model does not stop, so all 10 steps ran
    assert torch.equal(logits.argmax(-1), out)


def test_a_short_training_beats_the_untrained_model_and_counts_its_samples():
    run = build("transformer", 64, seed=0, size="test")
    assert (run.train_samples, run.eval_samples) == (TRAIN_PAIRS, HELD_OUT)
    assert run.evaluate() < 1.0  # an untrained model's BLEU: no 4-gram right
    assert run.train_epoch() == TRAIN_PAIRS
    trained = run.evaluate()
    assert 5.0 < trained <= 100.0  # one epoch (125 steps, still in the warm-up) of seed 0 scores 13.9
    run.test = Split(run.test.src[:10], run.test.src_len[:10], run.test.tgt_in[:10], run.test.tgt_out[:10],
                     run.test.tgt_len[:10], run.test.references[:10])
    assert 0.0 < run.latency_per_item_s() < 1.0


def test_only_the_two_translation_models_build():
    with pytest.raises(ValueError, match="seq2seq or transformer"):
        build("resnet50", 64, seed=0)
    assert PAD == 0  # the suite models' padding id, which both losses ignore
