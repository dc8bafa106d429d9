"""bench/search_efficiency.py's cache as two copies: the MLflow store the runs are trained into,
and a committed ledger of their trials (one CSV row per trial), so that a fresh clone has the
cache without the store. The machines this project is measured on keep nothing between
sittings, and the first full run on MiniLM takes longer than one sitting: the ledger is what
lets it be built over several, each committing what it trained.

A cached study run is found by its cache tag (`search_reference.KEY_TAG` with the grid's key,
`CONTENDER_TAG` with a contender repetition's tag) in either copy. Each run is copied into the
ledger as soon as it is tagged, and on start every tagged store run the ledger lacks is copied
too. The ledger holds what the bench reads (arm, phase, sample, seed, status, lr, last epoch,
the study's metric and primary metric) and the MLflow ids of the run and its trials, as the
store that trained them named them. Beside it, a second ledger keeps every evaluation of every
trial (bench/search_evaluations.py), copied at the same moments; a ledger run whose evaluations
are missing there (copied before there was a second ledger) gets them from the store when the
store has the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import search_evaluations as evaluations
import search_reference as grid

from study import UserInputError, load_trials
from study.tracking.reading import tagged_runs

# what identifies a ledger row's study run, then the trial columns the bench reads
RUN_COLUMNS = ["study", "cache_tag", "cache_value", "study_run"]
TRIAL_COLUMNS = ["run_id", "phase", "arm", "sample", "seed", "status", "lr", "epoch"]
TAGS = (grid.KEY_TAG, grid.CONTENDER_TAG)


def read(path: Path | None) -> pd.DataFrame:
    """The ledger's rows (none where there is no ledger yet)."""
    if path is None or not path.exists():
        return pd.DataFrame(columns=RUN_COLUMNS + TRIAL_COLUMNS)
    return pd.read_csv(path, dtype={"cache_value": str, "study_run": str, "run_id": str})


def write(path: Path, rows: pd.DataFrame) -> None:
    """The whole ledger, in a stable order (so a commit's diff shows only new rows), written
    beside and then moved over the old one: a crash leaves the old ledger or the new, never
    half of one."""
    rows = rows.sort_values(["study", "cache_tag", "cache_value", "study_run", "run_id"],
                            kind="stable", ignore_index=True)  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    rows.to_csv(partial, index=False)
    os.replace(partial, path)


def _matches(values: pd.Series, value: str) -> pd.Series:
    """`value` as the store's tag search reads it: a trailing % matches any text."""
    if value.endswith("%"):
        return values.str.startswith(value[:-1])
    return values == value


class TrialCache:
    """The cached study runs of one study: in the store `uri`, in the ledger `path` (None: the
    store alone), or both."""

    def __init__(self, uri: str, path: Path | None, study: str, metrics: list[str]):
        self.uri, self.path, self.study = uri, path, study
        self.columns = TRIAL_COLUMNS + list(dict.fromkeys(metrics))
        self.rows = read(path)
        self.rows = self.rows[self.rows.study == study]
        # the second ledger: the study metric and the primary's per-evaluation score
        self.curve_names = evaluations.curve_names(metrics[0], metrics[-1])
        self.curve_path = evaluations.path_beside(path) if path is not None else None
        curves = evaluations.read(self.curve_path, self.curve_names)
        self.curves = curves[curves.study == study]

    def evaluations(self, study_run: str) -> pd.DataFrame:
        """Every evaluation of a cached study run's trials: from the second ledger where it has
        the run, else from the store."""
        mine = self.curves[self.curves.study_run == study_run]
        if len(mine):
            return mine.reset_index(drop=True)
        try:
            trials = load_trials(self.uri, self.study, study_run)
        except UserInputError:  # a ledger run the store does not hold: no curves known
            return pd.DataFrame(columns=evaluations.EVALUATION_COLUMNS + self.curve_names)
        return evaluations.run_evaluations(self.uri, self.study, study_run, trials,
                                           self.curve_names)  # fmt: skip

    def runs_without_test_curves(self, key: str) -> list[str]:
        """The grid runs of `key` whose trials recorded no test score at any evaluation
        (trained before `eval_test_each_time`): what `--test-curves` trains again."""
        test = self.curve_names[-1] if len(self.curve_names) > 1 else None
        out = []
        for run_id in self.runs(grid.KEY_TAG, key):
            curves = self.evaluations(run_id)
            if test is None or test not in curves or not curves[test].notna().any():
                out.append(run_id)
        return out

    def runs(self, tag: str, value: str) -> list[str]:
        """The study runs tagged `tag` = `value` in either copy, store first."""
        stored = grid.tagged_runs(self.uri, self.study, tag, value)
        mine = self.rows[(self.rows.cache_tag == tag) & _matches(self.rows.cache_value, value)]
        return list(dict.fromkeys([*stored, *mine.study_run]))

    def other_grid_keys(self, key: str) -> list[str]:
        """The grid keys the ledger holds runs of, but `key` (another precision, model, data,
        profile or grid seeds), to say why a fresh clone's cache may miss."""
        keys = self.rows[self.rows.cache_tag == grid.KEY_TAG].cache_value.unique()
        return sorted(k for k in keys if k != key)

    def trials(self, study_run: str) -> pd.DataFrame:
        """One row per trial of a cached study run: from the ledger where it has the run (what
        the bench reads is there), else from the store."""
        mine = self.rows[self.rows.study_run == study_run]
        if len(mine):
            return mine[self.columns].reset_index(drop=True)
        return load_trials(self.uri, self.study, study_run)

    def keep(self, study_run: str, tag: str, value: str) -> None:
        """Tag a finished study run in the store and copy its trials into the ledger."""
        grid.tag(self.uri, [study_run], value, tag)
        self._copy(study_run, tag, value)

    def forget(self, key: str) -> int:
        """`--refresh`: the grid's and the contenders' runs of this key are no longer cached,
        in the store (untagged) or in the ledger (dropped); how many runs were set aside."""
        untagged = grid.untag(self.uri, self.study, key)
        of_key = self.rows.cache_value.str.split(":").str[0] == key
        runs = list(self.rows[of_key].study_run.unique())
        self._drop(runs)
        return untagged + len(runs)

    def forget_runs(self, study_runs: list[str]) -> None:
        """These runs are no longer cached: untagged in the store, dropped from both ledgers."""
        for tag in TAGS:
            stored = set(grid.tagged_runs(self.uri, self.study, tag, "%"))
            grid.untag_runs(self.uri, [r for r in study_runs if r in stored], tag)
        self._drop(study_runs)

    def _drop(self, study_runs: list[str]) -> None:
        if study_runs and self.path is not None:
            rest = read(self.path)
            write(self.path, rest[~((rest.study == self.study) & rest.study_run.isin(study_runs))])
            curves = evaluations.read(self.curve_path, self.curve_names)
            gone = (curves.study == self.study) & curves.study_run.isin(study_runs)
            evaluations.write(self.curve_path, curves[~gone])
        self.rows = self.rows[~self.rows.study_run.isin(study_runs)]
        self.curves = self.curves[~self.curves.study_run.isin(study_runs)]

    def sync(self) -> int:
        """Copy every tagged store run the ledger lacks into it (runs trained before there was a
        ledger, or by a bench run with another ledger); how many."""
        if self.path is None:
            return 0
        have, copied = set(self.rows.study_run), 0
        with_curves = set(self.curves.study_run)
        for tag in TAGS:
            for run_id, value in tagged_runs(self.uri, self.study, tag).items():
                if run_id not in have:
                    self._copy(run_id, tag, value)
                    copied += 1
                elif run_id not in with_curves:  # copied before the second ledger existed
                    self._copy_curves(run_id, load_trials(self.uri, self.study, run_id))
        return copied

    def _copy(self, study_run: str, tag: str, value: str) -> None:
        if self.path is None:
            return
        loaded = load_trials(self.uri, self.study, study_run)
        trials = loaded.reindex(columns=self.columns)
        head = {"study": self.study, "cache_tag": tag, "cache_value": value,
                "study_run": study_run}  # fmt: skip
        new = trials.assign(**head)[RUN_COLUMNS + self.columns]
        rest = read(self.path)
        rest = rest[rest.study_run != study_run]
        write(self.path, pd.concat([rest, new], ignore_index=True) if len(rest) else new)
        self.rows = pd.concat([self.rows[self.rows.study_run != study_run], new],
                              ignore_index=True)  # fmt: skip
        self._copy_curves(study_run, loaded)

    def _copy_curves(self, study_run: str, trials: pd.DataFrame) -> None:
        """Every evaluation of the run's trials (`trials`: their `load_trials` rows) into the
        second ledger."""
        if self.curve_path is None:
            return
        new = evaluations.run_evaluations(self.uri, self.study, study_run, trials,
                                          self.curve_names)  # fmt: skip
        rest = evaluations.read(self.curve_path, self.curve_names)
        rest = rest[rest.study_run != study_run]
        both = pd.concat([rest, new], ignore_index=True) if len(rest) else new
        evaluations.write(self.curve_path, both)
        self.curves = pd.concat([self.curves[self.curves.study_run != study_run], new],
                                ignore_index=True)  # fmt: skip
