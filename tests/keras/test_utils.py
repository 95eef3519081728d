"""utils (to_categorical, normalize, get_file) and preprocessing (pad_sequences, Tokenizer),
against hand-computed values."""

import hashlib
import math

import numpy as np
import pytest

from flexflow.keras.preprocessing.sequence import pad_sequences
from flexflow.keras.preprocessing.text import Tokenizer, text_to_word_sequence
from flexflow.keras.utils import get_file, normalize, to_categorical
from flexflow.keras.utils.data_utils import DownloadError


def test_to_categorical():
    np.testing.assert_array_equal(to_categorical([2, 0, 1]),
                                  [[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    out = to_categorical(np.array([[1], [3]], np.int32), num_classes=5)
    assert out.shape == (2, 5) and out.dtype == np.float32
    np.testing.assert_array_equal(out, [[0, 1, 0, 0, 0], [0, 0, 0, 1, 0]])
    with pytest.raises(ValueError, match="label 3 does not fit num_classes=3"):
        to_categorical([3], num_classes=3)


def test_normalize():
    np.testing.assert_allclose(normalize(np.array([[3.0, 4.0], [0.0, 0.0]])),
                               [[0.6, 0.8], [0.0, 0.0]])
    np.testing.assert_allclose(normalize(np.array([[1.0, 3.0]]), axis=1, order=1), [[0.25, 0.75]])


def test_pad_sequences():
    sequences = [[1, 2, 3], [4], [5, 6, 7, 8, 9]]
    np.testing.assert_array_equal(pad_sequences(sequences, maxlen=4),
                                  [[0, 1, 2, 3], [0, 0, 0, 4], [6, 7, 8, 9]])
    np.testing.assert_array_equal(
        pad_sequences(sequences, maxlen=4, padding="post", truncating="post", value=-1),
        [[1, 2, 3, -1], [4, -1, -1, -1], [5, 6, 7, 8]])
    assert pad_sequences(sequences).shape == (3, 5)


def test_tokenizer_word_index_and_sequences():
    texts = ["The cat sat.", "The dog sat on the mat!"]
    assert text_to_word_sequence(texts[1]) == ["the", "dog", "sat", "on", "the", "mat"]
    tokenizer = Tokenizer()
    tokenizer.fit_on_texts(texts)
    # counts: the 3, sat 2, then cat, dog, on, mat once each (first seen first)
    assert tokenizer.word_index == {"the": 1, "sat": 2, "cat": 3, "dog": 4, "on": 5, "mat": 6}
    assert tokenizer.texts_to_sequences(["the mat sat", "unknown cat"]) == [[1, 6, 2], [3]]
    limited = Tokenizer(num_words=3, oov_token="?")
    limited.fit_on_texts(texts)
    assert limited.texts_to_sequences(["the cat sat"]) == [[2, 1, 1]]  # "?" is id 1


def test_sequences_to_matrix_modes():
    tokenizer = Tokenizer(num_words=5)
    sequences = [[1, 1, 3], [2, 7]]  # 7 is outside num_words
    np.testing.assert_array_equal(tokenizer.sequences_to_matrix(sequences, mode="binary"),
                                  [[0, 1, 0, 1, 0], [0, 0, 1, 0, 0]])
    np.testing.assert_array_equal(tokenizer.sequences_to_matrix(sequences, mode="count"),
                                  [[0, 2, 0, 1, 0], [0, 0, 1, 0, 0]])
    np.testing.assert_allclose(tokenizer.sequences_to_matrix(sequences, mode="freq"),
                               [[0, 2 / 3, 0, 1 / 3, 0], [0, 0, 1 / 2, 0, 0]])
    tokenizer.fit_on_sequences(sequences)
    tfidf = tokenizer.sequences_to_matrix(sequences, mode="tfidf")
    idf = math.log(1 + 2 / (1 + 1))  # each id occurs in one of two documents
    np.testing.assert_allclose(tfidf[0], [0, (1 + math.log(2)) * idf, 0, idf, 0])
    with pytest.raises(ValueError, match="give num_words"):
        Tokenizer().sequences_to_matrix(sequences)


def test_get_file_uses_the_cache_and_checks_the_hash(tmp_path):
    cached = tmp_path / "datasets" / "f.txt"
    cached.parent.mkdir()
    cached.write_bytes(b"hello")
    md5 = hashlib.md5(b"hello").hexdigest()
    origin = "http://127.0.0.1:9/f.txt"  # nothing listens: a download would fail
    assert get_file("f.txt", origin, md5_hash=md5, cache_dir=tmp_path) == str(cached)
    with pytest.raises(DownloadError, match="downloading http://127.0.0.1:9/f.txt failed"):
        get_file("f.txt", origin, file_hash="0" * 64, cache_dir=tmp_path)  # wrong sha256
