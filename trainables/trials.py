"""Which trial a configuration asks for: the tagger (`trainables.train.Trial`, torch), the
tagger with intermediate stages (`trainables.stages.StagedTrial`, a chain of those) or the
synthetic trainable (`trainables.synthetic.SyntheticTrial`, numpy only). All have the same
interface, which is all the Tune adapter and the command line use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainables.config import TrialConfig
from trainables.surface import surface_of
from trainables.synthetic import SyntheticTrial

if TYPE_CHECKING:
    from trainables.stages import StagedTrial
    from trainables.train import Trial


def new_trial(config: TrialConfig) -> Trial | StagedTrial | SyntheticTrial:
    """The trial `config.trainable` names; torch is imported only for the tagger."""
    if surface_of(config.trainable) is not None:
        return SyntheticTrial(config)
    if config.intermediate:
        from trainables.stages import StagedTrial

        return StagedTrial(config)
    from trainables.train import Trial

    return Trial(config)
