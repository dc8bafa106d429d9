"""The one record every reader produces and every later stage consumes."""

from dataclasses import dataclass


@dataclass(frozen=True)
class TaggedSentence:
    """Words with one tag each; `origin` says where it came from, for error messages."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    origin: str = ""

    def __post_init__(self) -> None:
        if len(self.words) != len(self.tags):
            raise ValueError(
                f"{self.origin or 'sentence'}: {len(self.words)} words but {len(self.tags)} tags"
            )

    def __len__(self) -> int:
        return len(self.words)
