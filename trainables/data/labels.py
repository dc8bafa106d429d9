"""The tag <-> id mapping shared by the head, the loss and decoding."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from trainables.data.tags import check_tag, located
from trainables.data.types import TaggedSentence
from trainables.errors import DataError


def _label_key(label: str) -> tuple[int, str, str]:
    return (0, "", "") if label == "O" else (1, label[2:], label[:1])


class LabelMap:
    """Tag <-> id mapping shared by the head, the loss and decoding.

    Built from training data only, so dev/test cannot leak into the model's output space.
    For every entity type seen, both `B-TYPE` and `I-TYPE` are included even if training
    never used one of them (e.g. only single-word entities): a prediction of any valid IOB2
    tag for a known type can then always be expressed and decoded. `O` is always present
    and always id 0; the rest are ordered by type, B before I, so the ids do not depend on
    the order sentences happen to appear in.
    """

    def __init__(self, labels: Sequence[str]):
        for label in labels:
            check_tag(label, "label map")
        if len(set(labels)) != len(labels):
            raise DataError(f"label map: duplicate labels in {list(labels)}")
        self.labels: tuple[str, ...] = tuple(labels)
        self._ids = {label: i for i, label in enumerate(self.labels)}

    @classmethod
    def from_sentences(cls, sentences: Iterable[TaggedSentence]) -> LabelMap:
        types = {tag[2:] for s in sentences for tag in s.tags if tag != "O"}
        labels = ["O"] + [f"{p}-{t}" for t in types for p in ("B", "I")]
        return cls(sorted(labels, key=_label_key))

    @classmethod
    def from_labels(cls, labels: Sequence[str]) -> LabelMap:
        """Rebuild a saved map; the given order is kept because ids must not move."""
        return cls(labels)

    def to_dict(self) -> dict[str, int]:
        """label -> id, in id order (so `from_labels(list(d))` restores the map)."""
        return dict(self._ids)

    def index(self, tag: str) -> int:
        try:
            return self._ids[tag]
        except KeyError:
            raise DataError(
                f"tag {tag!r} is not in the label map ({', '.join(self.labels)})"
            ) from None

    def entity_types(self) -> set[str]:
        return {label[2:] for label in self.labels if label != "O"}

    def check(
        self, sentences: Iterable[TaggedSentence], split_name: str, where: str | None = None
    ) -> None:
        """Fail before training, not mid-evaluation, when a split has a tag we cannot score;
        `where`, the split's field in `data`, points at the label map that would fix it."""
        remedy = (
            f"; map its type with data.{where}.tag_map, or drop such entities with "
            f"data.{where}.unseen: as_o"
            if where
            else ""
        )
        for sentence in sentences:
            for tag in sentence.tags:
                if tag not in self._ids:
                    raise DataError(
                        f"{located(sentence.origin)}tag {tag!r} in the {split_name} split never "
                        f"occurs in training (training tags: {', '.join(self.labels)}){remedy}"
                    )

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, tag: object) -> bool:
        return tag in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelMap) and self.labels == other.labels

    def __hash__(self) -> int:
        return hash(self.labels)

    def __repr__(self) -> str:
        return f"LabelMap({list(self.labels)!r})"
