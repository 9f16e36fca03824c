"""The spoken-numbers task: espeak-ng's audio of number words, a split disjoint by number, WER against a hand count,
greedy CTC decoding by hand, and a short training of the suite's Deep Speech 2 that beats chance on held-out numbers.

The audio is synthesized for a few numbers only (the module's NUMBERS, HELD_OUT and VARIANTS narrowed), into a
temporary cache, so the file needs espeak-ng but not the full data set's minute of synthesis."""

from __future__ import annotations

import shutil

import pytest
import torch

from tbd.core.errors import FrameworkMissingError
from tbd.models.pytorch.deepspeech2 import ALPHABET, BINS, HOP, SAMPLE_RATE, WINDOW
from tbd.models.tasks import spoken_numbers

pytest.importorskip("torchmetrics")
pytest.importorskip("num2words")
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng (apt package) not installed")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The task narrowed to numbers 0-59, 12 held out, two variants, cached in a temporary directory."""
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    patch.setattr(spoken_numbers, "NUMBERS", range(60))
    patch.setattr(spoken_numbers, "HELD_OUT", 12)
    patch.setattr(spoken_numbers, "VARIANTS", spoken_numbers.VARIANTS[:2])
    torch.set_num_threads(1)
    yield spoken_numbers
    patch.undo()


def test_the_full_split_is_fixed_and_disjoint_by_number():
    train, held = spoken_numbers.split_numbers()
    assert len(train) == 800 and len(held) == 200 and not set(train) & set(held)
    assert sorted(train + held) == list(range(1000))
    assert spoken_numbers.split_numbers() == (train, held)  # no seed of a run enters it
    # Every held-out word is one the training numbers teach.
    words = {w for n in train for w in spoken_numbers.transcript(n).split()}
    assert {w for n in held for w in spoken_numbers.transcript(n).split()} <= words


def test_transcripts_are_number_words_in_the_models_alphabet():
    assert spoken_numbers.transcript(0) == "zero"
    assert spoken_numbers.transcript(123) == "one hundred and twenty three"
    assert spoken_numbers.transcript(999) == "nine hundred and ninety nine"
    assert spoken_numbers.encode("one two").tolist() == [ALPHABET.index(c) + 1 for c in "one two"]
    assert all(set(spoken_numbers.transcript(n)) <= set(ALPHABET) for n in range(1000))


def test_greedy_ctc_decoding_by_hand():
    # Frames: blank, o, o, blank, n, e, e, blank, blank, x (past the length: ignored).
    classes = [0, 1 + ALPHABET.index("o"), 1 + ALPHABET.index("o"), 0, 1 + ALPHABET.index("n"),
               1 + ALPHABET.index("e"), 1 + ALPHABET.index("e"), 0, 0, 1 + ALPHABET.index("x")]
    log_probs = torch.full((len(classes), 1, 1 + len(ALPHABET)), -10.0)
    for t, c in enumerate(classes):
        log_probs[t, 0, c] = 0.0
    assert spoken_numbers.greedy_decode(log_probs, torch.tensor([9])) == ["one"]
    # o, blank, o: a blank between repeats keeps both.
    log_probs = torch.full((3, 1, 1 + len(ALPHABET)), -10.0)
    log_probs[0, 0, 1 + ALPHABET.index("o")] = log_probs[1, 0, 0] = log_probs[2, 0, 1 + ALPHABET.index("o")] = 0.0
    assert spoken_numbers.greedy_decode(log_probs, torch.tensor([3])) == ["oo"]


def test_word_error_rate_by_hand():
    from torchmetrics.text import WordErrorRate

    # 1 substitution + 1 deletion + 0 insertions over 2 + 4 reference words.
    hypotheses = ["one two", "one hundred three"]
    references = ["one ten", "one hundred and three"]
    assert float(WordErrorRate()(hypotheses, references)) == pytest.approx(2 / 6)


def test_missing_espeak_names_the_package(monkeypatch):
    monkeypatch.setattr(spoken_numbers.shutil, "which", lambda name: None)
    with pytest.raises(FrameworkMissingError, match="espeak-ng, which is not installed") as caught:
        spoken_numbers.build("deepspeech2", 16, 0, "test")
    assert caught.value.hint == "apt-get install -y espeak-ng"


@needs_espeak
def test_audio_is_espeak_speech_at_16_khz(small):
    audio = small.load_audio()
    assert sorted(audio) == [(n, v) for n in range(60) for v in range(2)]
    seven = small.trim_silence(audio[(7, 0)])
    assert abs(seven.astype(float)).max() > 3000  # "seven", spoken
    assert small.MIN_S * SAMPLE_RATE <= len(seven) < len(audio[(7, 0)]) < 1.5 * SAMPLE_RATE  # trailing silence cut
    assert len(audio[(57, 0)]) > len(audio[(7, 0)])  # "fifty seven" is longer than "seven"
    spectrogram = small.log_spectrogram(seven)
    assert spectrogram.shape == (1 + (len(seven) - WINDOW) // HOP, BINS)
    assert small.load_audio()[(7, 0)].tobytes() == audio[(7, 0)].tobytes()  # read back from the cache


@needs_espeak
def test_short_training_beats_chance_on_held_out_numbers(small):
    task = small.build("deepspeech2", 8, 0, "test")
    assert task.train_samples == 96 and task.eval_samples == 24
    assert not set(task.train.texts) & set(task.held_out.texts)
    untrained = task.evaluate()
    assert untrained >= 0.9  # chance: next to no held-out word right
    for _ in range(15):
        assert task.train_epoch() == 96
    trained = task.evaluate()
    assert 0.0 <= trained < 0.5  # measured: 0.2 after these 180 updates (seed 0)
    assert task.latency_per_item_s() > 0
    task.train_step()  # the profiler's step: one batch, no error
