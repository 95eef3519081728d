"""Text preprocessing: `text_to_word_sequence` and `Tokenizer`, with Keras's semantics (word
ids start at 1 and follow word frequency; `num_words` keeps ids below it)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

DEFAULT_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'


def text_to_word_sequence(text, filters=DEFAULT_FILTERS, lower=True, split=" ") -> list[str]:
    if lower:
        text = text.lower()
    text = text.translate(str.maketrans({c: split for c in filters}))
    return [word for word in text.split(split) if word]


class Tokenizer:
    def __init__(self, num_words=None, filters=DEFAULT_FILTERS, lower=True, split=" ",
                 char_level=False, oov_token=None, **kwargs):
        if kwargs:
            raise TypeError(f"Tokenizer got unexpected arguments {sorted(kwargs)}")
        self.num_words, self.filters, self.lower = num_words, filters, lower
        self.split, self.char_level, self.oov_token = split, char_level, oov_token
        self.word_counts: Counter = Counter()
        self.word_docs: Counter = Counter()
        self.word_index: dict[str, int] = {}
        self.index_word: dict[int, str] = {}
        self.index_docs: defaultdict = defaultdict(int)
        self.document_count = 0

    def _words(self, text) -> list[str]:
        if self.char_level or isinstance(text, list):
            return [t.lower() for t in text] if self.lower else list(text)
        return text_to_word_sequence(text, self.filters, self.lower, self.split)

    def fit_on_texts(self, texts) -> None:
        for text in texts:
            self.document_count += 1
            words = self._words(text)
            self.word_counts.update(words)
            self.word_docs.update(set(words))
        ranked = sorted(self.word_counts, key=lambda w: -self.word_counts[w])
        if self.oov_token is not None:
            ranked = [self.oov_token] + [w for w in ranked if w != self.oov_token]
        self.word_index = {word: i for i, word in enumerate(ranked, start=1)}
        self.index_word = {i: word for word, i in self.word_index.items()}
        self.index_docs = defaultdict(int, {self.word_index[w]: n
                                            for w, n in self.word_docs.items()})

    def fit_on_sequences(self, sequences) -> None:
        """Count, for tf-idf, the documents each word id occurs in."""
        for sequence in sequences:
            self.document_count += 1
            for j in set(sequence):
                self.index_docs[j] += 1

    def texts_to_sequences(self, texts) -> list[list[int]]:
        oov = self.word_index.get(self.oov_token) if self.oov_token is not None else None
        out = []
        for text in texts:
            ids = []
            for word in self._words(text):
                i = self.word_index.get(word)
                if i is not None and (not self.num_words or i < self.num_words):
                    ids.append(i)
                elif oov is not None:
                    ids.append(oov)
            out.append(ids)
        return out

    def texts_to_matrix(self, texts, mode="binary") -> np.ndarray:
        return self.sequences_to_matrix(self.texts_to_sequences(texts), mode)

    def sequences_to_matrix(self, sequences, mode="binary") -> np.ndarray:
        """(len(sequences), num_words) float64: per id, 'binary' 1 if present, 'count' its
        count, 'freq' count / length, 'tfidf' (1 + log count) * log(1 + docs / (1 + docs with
        the id)). Ids >= num_words are left out."""
        if mode not in ("binary", "count", "tfidf", "freq"):
            raise ValueError(f"sequences_to_matrix: unknown mode {mode!r}")
        num_words = self.num_words or (len(self.word_index) + 1 if self.word_index else None)
        if not num_words:
            raise ValueError("sequences_to_matrix: give num_words to the Tokenizer, or fit it on "
                             "texts first")
        if mode == "tfidf" and not self.document_count:
            raise ValueError("sequences_to_matrix(mode='tfidf') needs the Tokenizer fitted on "
                             "texts or sequences")
        matrix = np.zeros((len(sequences), num_words))
        for i, sequence in enumerate(sequences):
            counts = Counter(j for j in sequence if j < num_words)
            for j, count in counts.items():
                if mode == "count":
                    matrix[i, j] = count
                elif mode == "freq":
                    matrix[i, j] = count / len(sequence)
                elif mode == "binary":
                    matrix[i, j] = 1
                else:
                    idf = math.log(1 + self.document_count / (1 + self.index_docs.get(j, 0)))
                    matrix[i, j] = (1 + math.log(count)) * idf
        return matrix
