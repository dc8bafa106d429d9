"""The former home of every corpus reader, kept for one import: study/fingerprint.py takes
`wnut16_path` from here. The readers are now one module per kind of source under
`trainables.data.sources`; delete this module once nothing imports it."""

from trainables.data.sources.embedded import wnut16_path

__all__ = ["wnut16_path"]
