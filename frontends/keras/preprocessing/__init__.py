"""Keras preprocessing: `text` (Tokenizer, text_to_word_sequence) and `sequence`
(pad_sequences)."""

from . import sequence, text

__all__ = ["sequence", "text"]
