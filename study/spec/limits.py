"""What a study may ask for, checked with arithmetic before anything is planned in memory.

A typo (`seeds: 1000000000`, a grid of eight long lists) would otherwise make the checks of the
arms, or `study.plan`, build millions of trials before the user hears anything. The reader's
own limits (nesting, text length, aliases expanded) are in trainables/yaml_reading.py.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from study.spec.document import Doc

if TYPE_CHECKING:  # validated imports distributions, which imports factors, which imports this
    from study.spec.validated import ConfirmPhase, ExplorePhase

MAX_TRIALS = 1_000_000  # trials one study may plan, all phases together


def planned_trials(
    grid: dict[str, tuple], explore: ExplorePhase | None, confirm: ConfirmPhase | None
) -> tuple[int, str]:
    """The most trials the study's plan holds (every confirm round run), and how: arms x
    samples x seeds per phase, as `study.plan` expands them."""
    arms = math.prod(len(values) for values in grid.values())
    total, parts = 0, []
    if explore is not None:
        total += arms * explore.samples * len(explore.seeds)
        parts.append(f"explore {arms} arms x {explore.samples} samples x "
                     f"{len(explore.seeds)} seeds")  # fmt: skip
    if confirm is not None:
        samples = 1 if isinstance(confirm.select, str) else len(confirm.select)
        data_seeds = len(confirm.data_seeds) if confirm.data_seeds else 1
        total += arms * samples * len(confirm.seeds) * data_seeds
        parts.append(f"confirm {arms} arms x {samples} samples x {len(confirm.seeds)} seeds"
                     + (f" x {data_seeds} data seeds" if confirm.data_seeds else ""))  # fmt: skip
    return total, "; ".join(parts)


def check_plan_size(
    doc: Doc, grid: dict[str, tuple], explore: ExplorePhase | None, confirm: ConfirmPhase | None
) -> None:
    """Refuse a study of more than MAX_TRIALS trials, before its arms are expanded."""
    total, how = planned_trials(grid, explore, confirm)
    if total > MAX_TRIALS:
        raise doc.fail(("grid",), f"the study would plan {total:,} trials ({how}); at most "
                       f"{MAX_TRIALS:,}: fewer grid values, samples or seeds")  # fmt: skip
