"""A compact record of a trial's final encoder, for comparing fine-tuned encoders with each
other (Hao et al.: the low layers of two runs stay alike, the last ones diverge).

Not to be confused with the *model and data fingerprints* of `study/fingerprint.py`, which are
digests naming what a study ran on. A layer fingerprint holds every layer's hidden states and
attention maps on the fixed dynamics sample, over real tokens only, in half precision.

`record` (the file and its reading, NumPy only), `compare` (layer by layer similarity of two
fingerprints, NumPy only: the report uses it) and `capture` (taking one from an encoder:
torch, so imported by the trainable only, never from here).
"""

from __future__ import annotations

from trainables.measures.fingerprints.record import FILE_NAME, LayerFingerprint, sentences_within

__all__ = ["FILE_NAME", "LayerFingerprint", "sentences_within"]
