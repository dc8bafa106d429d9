"""Search distributions: how Optuna samples one searched factor inside an arm.

Each kind is a small frozen class that knows everything about itself: which keys its YAML
mapping takes and how they are checked (`parse`, with the same one-line errors as every other
field), its Optuna form (`to_optuna`), how the plan prints it (`describe`), its points when
there are finitely many (`points`, None for a real range), its largest value (`largest`, the
epochs an `epochs` factor may reach) and the values written in the file (`written_values`, for
checks that depend on the arm). `KINDS` is the registry the study file is read against, so a
new kind is a new class here, added to `KINDS`.

Instances are plain data: a spec travels pickled inside the searcher that Tune saves with each
experiment (a study saved by code of another layout is refused on --resume:
study/execution/state.py's LAYOUT_VERSION).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from study.spec.document import Doc, FieldPath, show
from study.spec.factors import Shape, check_value, describe_field, takes_real

if TYPE_CHECKING:  # optuna is imported for a search, not to read a study file (see to_optuna)
    from optuna.distributions import BaseDistribution


class Distribution:
    """The base of the kinds below: one searched factor's distribution."""

    kind: ClassVar[str]  # the `type` a study file names it by
    keys: ClassVar[tuple[str, ...]]  # the keys of its mapping besides `type`

    @classmethod
    def parse(cls, doc: Doc, path: FieldPath, name: str, spec: dict, shape: Shape) -> Distribution:
        """The distribution of factor `name` written at `path` (its keys already checked)."""
        raise NotImplementedError

    def to_optuna(self) -> BaseDistribution:
        raise NotImplementedError

    def describe(self) -> str:
        """How the plan shows it, e.g. `loguniform[3e-05, 0.0003]`."""
        raise NotImplementedError

    def points(self) -> Sequence[Any] | None:
        """Every value it can draw, in order; None when there are infinitely many."""
        raise NotImplementedError

    def largest(self) -> Any:
        """The most it can draw as written (a range's `high`): an `epochs` factor's budget."""
        raise NotImplementedError

    def written_values(self) -> list[tuple[FieldPath, Any]]:
        """Each value it holds with where it is written, relative to the factor's mapping."""
        raise NotImplementedError


@dataclass(frozen=True)
class _Range(Distribution):
    """A range from `low` to `high`, both included."""

    low: float | int
    high: float | int

    keys: ClassVar[tuple[str, ...]] = ("low", "high")

    @classmethod
    def parse(cls, doc: Doc, path: FieldPath, name: str, spec: dict, shape: Shape) -> Distribution:
        """Bounds are checked as a range first, then each as a setting the trainable must accept
        (Optuna may draw either end)."""
        low, high = (cls._bound(doc, (*path, key), spec.get(key)) for key in ("low", "high"))
        if low >= high:
            raise doc.bad((*path, "low"), low, f"low must be below high ({show(high)})")
        more = cls._more(doc, path, spec)
        low, high = (check_value(doc, (*path, k), name, spec[k], shape) for k in ("low", "high"))
        return cls(low, high, **more)

    @classmethod
    def _bound(cls, doc: Doc, path: FieldPath, value: Any) -> float | int:
        if value is None:
            raise doc.missing(path, f"the {path[-1]} bound of the {cls.kind} distribution")
        return cls._read_bound(doc, path, value)

    @classmethod
    def _read_bound(cls, doc: Doc, path: FieldPath, value: Any) -> float | int:
        return doc.number(path, value, lambda _: True, "a finite number")

    @classmethod
    def _more(cls, doc: Doc, path: FieldPath, spec: dict) -> dict[str, Any]:
        """Checks beyond low < high, and the fields other than the bounds."""
        return {}

    def describe(self) -> str:
        return f"{self.kind}[{self.low:g}, {self.high:g}]"

    def points(self) -> Sequence[Any] | None:
        return None

    def largest(self) -> float | int:
        return self.high

    def written_values(self) -> list[tuple[FieldPath, Any]]:
        return [(("low",), self.low), (("high",), self.high)]


@dataclass(frozen=True)
class _RealRange(_Range):
    """A range of real numbers: only for factors that take one."""

    @classmethod
    def parse(cls, doc: Doc, path: FieldPath, name: str, spec: dict, shape: Shape) -> Distribution:
        if not takes_real(name):
            allowed = f"{name} takes {describe_field(name)}; use int or categorical"
            raise doc.bad((*path, "type"), cls.kind, allowed)
        return super().parse(doc, path, name, spec, shape)


@dataclass(frozen=True)
class LogUniform(_RealRange):
    kind: ClassVar[str] = "loguniform"

    @classmethod
    def _more(cls, doc: Doc, path: FieldPath, spec: dict) -> dict[str, Any]:
        if spec["low"] <= 0:
            raise doc.bad((*path, "low"), spec["low"], "a loguniform low must be > 0")
        return {}

    def to_optuna(self) -> BaseDistribution:
        from optuna.distributions import FloatDistribution

        return FloatDistribution(float(self.low), float(self.high), log=True)


@dataclass(frozen=True)
class Uniform(_RealRange):
    kind: ClassVar[str] = "uniform"

    def to_optuna(self) -> BaseDistribution:
        from optuna.distributions import FloatDistribution

        return FloatDistribution(float(self.low), float(self.high))


@dataclass(frozen=True)
class IntRange(_Range):
    """Integers from `low` to `high` by `step` (1 when not given)."""

    step: int | None = None

    kind: ClassVar[str] = "int"
    keys: ClassVar[tuple[str, ...]] = ("low", "high", "step")

    @classmethod
    def _read_bound(cls, doc: Doc, path: FieldPath, value: Any) -> float | int:
        return doc.integer(path, value, None, "an integer bound")

    @classmethod
    def _more(cls, doc: Doc, path: FieldPath, spec: dict) -> dict[str, Any]:
        step = spec.get("step")
        if step is not None:
            doc.integer((*path, "step"), step, 1, "an integer step >= 1")
        return {"step": step}

    def to_optuna(self) -> BaseDistribution:
        from optuna.distributions import IntDistribution

        return IntDistribution(int(self.low), int(self.high), step=self.step or 1)

    def points(self) -> Sequence[Any] | None:
        return range(int(self.low), int(self.high) + 1, self.step or 1)


@dataclass(frozen=True)
class Categorical(Distribution):
    """One of the listed values."""

    choices: tuple

    kind: ClassVar[str] = "categorical"
    keys: ClassVar[tuple[str, ...]] = ("choices",)

    @classmethod
    def parse(cls, doc: Doc, path: FieldPath, name: str, spec: dict, shape: Shape) -> Distribution:
        choices = spec.get("choices")
        allowed = "a non-empty list of values"
        if choices is None:
            raise doc.missing((*path, "choices"), allowed)
        if not isinstance(choices, list) or not choices:
            raise doc.bad((*path, "choices"), choices, allowed)
        where = (*path, "choices")
        checked = [check_value(doc, (*where, i), name, v, shape) for i, v in enumerate(choices)]
        doc.distinct(where, choices, checked)
        return cls(tuple(checked))

    def to_optuna(self) -> BaseDistribution:
        from optuna.distributions import CategoricalDistribution

        return CategoricalDistribution(list(self.choices))

    def describe(self) -> str:
        return f"categorical{list(self.choices)}"

    def points(self) -> Sequence[Any] | None:
        return self.choices

    def largest(self) -> Any:
        return max(self.choices)

    def written_values(self) -> list[tuple[FieldPath, Any]]:
        return [(("choices", i), choice) for i, choice in enumerate(self.choices)]


KINDS: dict[str, type[Distribution]] = {
    cls.kind: cls for cls in (LogUniform, Uniform, IntRange, Categorical)
}
# The keys of a distribution mapping, over every kind, with what each takes and is for
# (docs/study-keys.md; a kind's `keys` are some of these).
KEYS = {
    "type": f"one of {', '.join(KINDS)}: how Optuna samples the factor",
    "low": "a number (an integer for `int`): the smallest value, included",
    "high": "a number (an integer for `int`): the largest value, included",
    "step": "an integer >= 1 (default 1): the spacing of an `int` range",
    "choices": "a list of values of the factor: what `categorical` picks from",
}


def search_space(doc: Doc, search: dict, shape: Shape) -> dict[str, Distribution]:
    """The `search` section: factor name -> its distribution."""
    return {
        name: _distribution(doc, ("search", name), name, spec, shape)
        for name, spec in search.items()
    }


def _distribution(doc: Doc, path: FieldPath, name: str, spec: Any, shape: Shape) -> Distribution:
    kinds = ", ".join(KINDS)
    example = "a distribution mapping, e.g. {type: loguniform, low: 1.0e-5, high: 3.0e-4}"
    doc.mapping(path, spec, example)
    kind = spec.get("type")
    if kind is None:
        raise doc.missing((*path, "type"), f"one of {kinds}")
    if not isinstance(kind, str) or kind not in KINDS:
        raise doc.bad((*path, "type"), kind, f"one of {kinds}")
    cls = KINDS[kind]
    doc.check_keys(path, spec, ("type", *cls.keys), f"a {kind} distribution")
    return cls.parse(doc, path, name, spec, shape)


def finite_points(space: Mapping[str, Distribution]) -> list[dict[str, Any]]:
    """Every point of a space whose factors all have finite points, in order; [] otherwise."""
    values = [dist.points() for dist in space.values()]
    if any(points is None for points in values):
        return []
    names = list(space)
    return [dict(zip(names, point, strict=True)) for point in itertools.product(*values)]
