"""One line that says how far a study is, instead of Ray's tables.

    explore 6/8 (2 running: epoch 3.1/8, 0.4/8) | confirm 0/4 | best depth=3: dev_loss 0.8347
    | 1m12s, ETA 1m40s

(one line on the terminal). Trials finished of those planned per phase (confirm rounds may
stop early, so its count is at most), the trials running with the epoch each has reached by
its last evaluation of the epochs it trains at most (so a phase of long trials moves before
its first trial ends; `0.4 in stage 0` for a trial still in an intermediate stage), the best
arm so far by the study metric (the best sample mean of its completed trials, in the latest
phase that has any), the time since the study started and an ETA from measured trial times: a
trial still to run is expected to take as long as the finished trials of its phase took
(before a phase has any, as long as the completed trials so far), spread over the trials that
run at once.

On a terminal the line is rewritten in place (at most once a second) and cleared before any
log line, so the `trial finished:` lines scroll above it; elsewhere (a log file, CI) it is
logged once a minute and at the end of each phase.
"""

from __future__ import annotations

import logging
import shutil
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TextIO

from study.names import PHASES
from trainables.errors import printable

log = logging.getLogger("study.progress")

CLEAR = "\r\x1b[K"  # back to the line's start, erase it
TERMINAL_EVERY_S = 1.0
RUNNING_SHOWN = 4  # running trials whose epoch the line shows; the rest are counted


@dataclass(frozen=True)
class TrialView:
    """What the line needs of one trial."""

    key: str  # Tune's trial id
    phase: str
    arm: str
    sample: int
    state: str  # "running", "waiting" or "finished"
    completed: bool  # trained to its end (not pruned, not errored)
    value: float | None  # the study metric of its last result
    seconds: float  # training time so far
    epoch: float | None = None  # the epoch its last evaluation reached (None: none yet)
    epochs_planned: float | None = None  # the epochs it trains at most (None: unknown)
    stage: int | None = None  # the intermediate stage `epoch` counts in (None: the target)


class StudyProgress:
    """The study's progress over its phases (see the module docstring)."""

    def __init__(
        self,
        planned: Mapping[str, int],
        metric: str,
        mode: str,
        *,
        stream: TextIO | None = None,
        terminal: bool | None = None,
        every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.planned = dict(planned)
        self.metric, self.mode = metric, mode
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.every_s = every_s if not self.terminal else TERMINAL_EVERY_S
        self.clock = clock
        self.started = clock()
        self.done_before = {phase: 0 for phase in self.planned}  # in experiments that ended
        self.ended: list[TrialView] = []  # the trials of experiments that ended
        self.current: dict[str, TrialView] = {}  # the running experiment's trials
        self.at_once = 1
        self.shown_at: float | None = None
        self.on_screen = False
        self._clearer = _ClearBeforeLogs(self)

    # --- what the driver tells it ----------------------------------------------------------
    def phase_done(self, phase: str) -> None:
        """A phase an earlier driver finished (`--resume`)."""
        self.done_before[phase] = self.planned.get(phase, 0)

    def experiment_started(self, at_once: int) -> None:
        self.at_once = max(1, at_once)
        self.current = {}
        if self.terminal:
            self._clearer.install()

    def update(self, trials: Iterable[TrialView]) -> None:
        self.current = {view.key: view for view in trials}
        now = self.clock()
        if self.shown_at is None and not self.terminal:
            self.shown_at = now  # the first logged line comes a minute in
        if self.shown_at is None or now - self.shown_at >= self.every_s:
            self._show(now)

    def experiment_ended(self) -> None:
        """Fold the experiment's trials into the totals and say where the study stands."""
        for view in self.current.values():
            if view.state == "finished":
                self.done_before[view.phase] = self.done_before.get(view.phase, 0) + 1
                self.ended.append(view)
        self.current = {}
        self._erase()
        log.info("progress: %s", self.line())

    def close(self) -> None:
        self._erase()
        self._clearer.remove()

    # --- the line --------------------------------------------------------------------------
    def line(self, width: int | None = None) -> str:
        """The whole line, or, in `width` columns (a terminal's), one that keeps its end, the
        elapsed time and ETA: the running trials' epochs go first, then the best arm's text is
        cut (`…`), then the best arm."""
        eta = self._eta()
        elapsed = _duration(self.clock() - self.started)
        tail = f"{elapsed}, ETA {_duration(eta)}" if eta is not None else elapsed
        best = self._best()
        for brief in (False, True):
            phases = [self._phase_part(phase, brief) for phase in self._phases()]
            text = " | ".join([*phases, *([best] if best else []), tail])
            if width is None or len(text) <= width:
                return text
        room = width - len(" | ".join([*phases, tail])) - len(" | ")
        if best and room >= 12:
            return " | ".join([*phases, best[: room - 1] + "…", tail])
        return " | ".join([*phases, tail])[-width:]

    def _phases(self) -> list[str]:
        return [phase for phase in PHASES if phase in self.planned] + [
            phase for phase in self.planned if phase not in PHASES
        ]

    def _views(self) -> list[TrialView]:
        return self.ended + list(self.current.values())

    def _finished(self, phase: str) -> int:
        now = sum(1 for v in self.current.values() if v.phase == phase and v.state == "finished")
        return self.done_before.get(phase, 0) + now

    def _running(self, phase: str) -> list[TrialView]:
        return [v for v in self.current.values() if v.phase == phase and v.state == "running"]

    def _phase_part(self, phase: str, brief: bool = False) -> str:
        running = self._running(phase)
        text = f"{phase} {self._finished(phase)}/{self.planned[phase]}"
        if running and brief:
            return text + f" ({len(running)} running)"
        return text + (f" ({running_part(running)})" if running else "")

    def _best(self) -> str | None:
        """The best arm so far: its best sample's mean over completed seeds, in the latest
        phase with completed trials."""
        done = [v for v in self._views() if v.completed and v.value is not None]
        if not done:
            return None
        latest = max(self._phases().index(v.phase) for v in done)
        values: dict[tuple[str, int], list[float]] = defaultdict(list)
        for view in done:
            if self._phases().index(view.phase) == latest:
                values[(view.arm, view.sample)].append(view.value)
        means = {key: statistics.fmean(vs) for key, vs in values.items()}
        pick = max if self.mode == "max" else min
        (arm, _), value = pick(means.items(), key=lambda item: item[1])
        return f"best {arm}: {self.metric} {value:.4f}"

    def _eta(self) -> float | None:
        """Seconds left: trials still to run at their phase's measured time, and what the
        running ones still need, over the trials that run at once; None before any finished."""
        finished = [v for v in self._views() if v.state == "finished"]
        completed = [v.seconds for v in finished if v.completed]
        fallback = statistics.fmean(completed) if completed else None
        work = 0.0
        for phase, planned in self.planned.items():
            measured = [v.seconds for v in finished if v.phase == phase]
            expected = statistics.fmean(measured) if measured else fallback
            running = self._running(phase)
            left = max(planned - self._finished(phase) - len(running), 0)
            if not (left or running):
                continue
            if expected is None:
                return None
            work += left * expected + sum(max(expected - v.seconds, 0.0) for v in running)
        return work / self.at_once

    # --- output ----------------------------------------------------------------------------
    def _show(self, now: float) -> None:
        self.shown_at = now
        if not self.terminal:
            log.info("progress: %s", self.line())
            return
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self.stream.write(CLEAR + printable(self.line(width))[:width])  # arm and metric names
        self.stream.flush()
        self.on_screen = True

    def _erase(self) -> None:
        if self.on_screen:
            self.stream.write(CLEAR)
            self.stream.flush()
            self.on_screen = False


class _ClearBeforeLogs(logging.Filter):
    """On a terminal, a log line would be written after the progress line's text: erase the
    line first; the next update draws it again below."""

    def __init__(self, progress: StudyProgress):
        super().__init__()
        self.progress = progress
        self.handlers: list[logging.Handler] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.progress.on_screen:
            self.progress._erase()
            self.progress.shown_at = None  # drawn again at the next update
        return True

    def install(self) -> None:
        if self.handlers:
            return
        self.handlers = [
            h
            for h in logging.getLogger().handlers
            if getattr(h, "stream", None) is self.progress.stream
        ]
        for handler in self.handlers:
            handler.addFilter(self)

    def remove(self) -> None:
        for handler in self.handlers:
            handler.removeFilter(self)
        self.handlers = []


def running_part(running: list[TrialView], shown: int = RUNNING_SHOWN) -> str:
    """`2 running: epoch 3.1/8, 0.4/8`: how many trials run, and how far the first `shown`
    of them are (a trial yet to report is at epoch 0)."""
    where = [_position(view) for view in running[:shown]]
    more = [f"+{len(running) - shown} more"] if len(running) > shown else []
    return f"{len(running)} running: epoch {', '.join(where + more)}"


def _position(view: TrialView) -> str:
    text = f"{view.epoch or 0.0:.1f}"
    if view.stage is not None:
        return f"{text} in stage {view.stage}"
    return text + (f"/{view.epochs_planned:.3g}" if view.epochs_planned else "")


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
