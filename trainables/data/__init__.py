"""Corpora in, padded tensors out: reading, label maps, data fractions, sub-word alignment."""
