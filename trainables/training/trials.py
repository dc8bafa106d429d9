"""Which trial a configuration asks for: the tagger (`trainables.training.train.Trial`, torch), the
tagger with intermediate stages (`trainables.training.stages.StagedTrial`, a chain of those) or the
synthetic trainable (`trainables.training.synthetic.SyntheticTrial`, numpy only). All have the same
interface, which is all the Tune adapter and the command line use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainables.settings.config import TrialConfig
from trainables.settings.surface import surface_of
from trainables.training.synthetic import SyntheticTrial

if TYPE_CHECKING:
    from trainables.training.stages import StagedTrial
    from trainables.training.train import Trial


def new_trial(config: TrialConfig) -> Trial | StagedTrial | SyntheticTrial:
    """The trial `config.trainable` names; torch is imported only for the tagger."""
    if surface_of(config.trainable) is not None:
        return SyntheticTrial(config)
    if config.intermediate:
        from trainables.training.stages import StagedTrial

        return StagedTrial(config)
    from trainables.training.train import Trial

    return Trial(config)
