"""`python -m study.run NAME`: run a study on Ray Tune, tracked in MLflow.

    python -m study.run ner_depth                      # the embedded default, on this machine
    python -m study.run ner_depth --profile smoke      # a few minutes' check
    python -m study.run ner_depth --dry-run            # check the data, print the plan
    python -m study.run ner_depth --resume             # continue the newest interrupted run
    python -m study.run ner_depth --profile cluster --address auto --storage s3://bucket/x
    python -m study.run ~/ner/s.yaml --set fixed.epochs=5 --set data.train=~/ner/train.txt

Phases run one after the other: explore (per-arm Optuna samples, per-arm ASHA pruning whole
samples) then confirm (the chosen sample of each arm on every seed, never pruned). The study
prints one progress line and a line per finished trial; `--verbose` adds Ray's own output.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from study.catalog import listing, study_entries
from study.closing import finish_and_report, preload_report
from study.command_line import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STORAGE,
    parse_args,
)
from study.names import (
    EXPLORE,
    OPTUNA_STUDIES_TAG,
    OPTUNA_TAG,
    tracking_uri,
)
from study.outputs import outputs_line, stores_closed, wants_report
from study.plan import StudyPlan, make_plan
from study.preflight import check_before_writing, checked_data, checked_model
from study.progress.line import StudyProgress
from study.progress.log_format import log_to_terminal
from study.progress.quiet import quiet_driver
from study.spec import StudySpec, load_study
from study.spec.stages import study_stages
from trainables.command_line import EXIT_BAD_INPUT, leaving_quickly, pipe_closed_quietly
from trainables.errors import UserInputError, joined, printable

if TYPE_CHECKING:  # the driver's Ray, Tune and MLflow: imported where a study runs, so that
    # --help, --list and a bad command line answer without them (tests/test_help_time.py)
    from study.execution import PhaseContext
    from study.execution.state import StudyState
    from study.tracking import StudyTracker
    from study.tracking.start import DriverTime

log = logging.getLogger("study")


@dataclasses.dataclass(frozen=True)
class StudyOutcome:
    """How one invocation ended: its exit code (EXIT_CODES) and, for a study that ran, its
    name (the MLflow experiment), its study run, the store holding it, where its report went
    (None: no report), the command that continues it and, when it failed (EXIT_FAILED), the
    line that said why."""

    exit_code: int
    study: str | None = None
    run_id: str | None = None
    tracking_uri: str | None = None
    report: Path | None = None
    resume: str | None = None
    error: str | None = None


MAX_TAG_CHARS = 5000  # of the study run's `error` tag (MLflow keeps up to 8000)


def _fail(message: str) -> int:
    print(f"error: {joined(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _resume_line(study: str, profile: str, overrides: list[str]) -> str:
    sets = "".join(f" --set {shlex.quote(text)}" for text in overrides)
    return f"python -m study.run {study} --profile {profile} --resume{sets}"


def interrupted_line(args: argparse.Namespace) -> str:
    """What Ctrl-C leaves on stderr: the state is saved, and the command that continues."""
    resume = _resume_line(args.study, args.profile, args.overrides)
    return f"\ninterrupted; the study's state is saved. Resume with:\n  {resume}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        print(listing(study_entries()))
        return EXIT_OK
    with _terminate_as_ctrl_c():
        try:
            return run(args).exit_code
        except UserInputError as err:
            return _fail(str(err))
        except KeyboardInterrupt:
            print(interrupted_line(args), file=sys.stderr)
            return EXIT_INTERRUPTED


def _sigterm_as_sigint(signum: int, frame: object) -> None:
    os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def _terminate_as_ctrl_c() -> Iterator[None]:
    """SIGTERM (`kill`, `timeout`, a batch scheduler's or a container's stop) ends the command
    as Ctrl-C does: Tune stops the trials and saves its state, and the resume command is
    printed. Ray's core replaces this handler with its own, which aborts with a stack dump,
    when it starts in the driver: `_run` sets it again after that (`_kept_handler`). Only in
    the main thread, where Python runs signal handlers; the previous handler comes back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _sigterm_as_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _kept_handler(signum: int, handler: object) -> None:
    """Set a Python signal handler again after Ray's core may have replaced it."""
    if callable(handler) and threading.current_thread() is threading.main_thread():
        signal.signal(signum, handler)


def run(args: argparse.Namespace) -> StudyOutcome:
    """The study a parsed command line names, run (or planned, with --dry-run): the one path
    of `main` and of `study.runner.run_study`. Bad input raises UserInputError before anything
    is written; the driver's logging and environment are set up here, for the process."""
    _set_up_driver(args.verbose)
    with contextlib.ExitStack() as held:  # what the driver holds until it ends: its lock
        return _run(args, held)


def _set_up_driver(verbose: bool) -> None:
    log_to_terminal()  # control characters in a logged name or description escaped
    for chatty in ("mlflow", "alembic"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    # Tune snapshots its experiment state at every checkpoint because num_to_keep is set;
    # that is what makes --resume exact, so its "snapshotting too often" warning is noise
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # MLflow's client retries an unreachable server for minutes per call, which would stall
    # Tune's driver loop, and it resends a POST whose answer was lost, which appends its
    # metrics a second time; the tracking callback queues and retries writes itself, looking
    # first whether a write in doubt was stored
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    quiet_driver(verbose)


def _run(args: argparse.Namespace, held: contextlib.ExitStack) -> StudyOutcome:
    spec = load_study(args.study, args.profile, overrides=args.overrides)
    if study_stages(spec.grid, spec.fixed):
        # an intermediate stage reports its metrics as stage<i>_..., without the study metric,
        # which only the target's results have (and Tune would otherwise refuse a result for)
        os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = "1"
    if args.dry_run:  # the data read and checked as the real run reads it, nothing written
        data_line = checked_data(spec, args.overrides, planning=True)
        model_line = checked_model(spec, args.overrides, planning=True)
        print(f"{make_plan(spec).describe()}\n  data: {data_line}\n  model: {model_line}")
        return StudyOutcome(EXIT_OK, spec.name)
    print(opening_line(spec, args), flush=True)  # before Ray, MLflow and the checks: seconds
    from study.execution import PhaseContext, start_tracking_and_ray, unplaceable_on_cluster
    from study.execution.state import write_state
    from study.tracking.start import DriverTime, open_study_runs

    spec, plan, store, study_dir, state, uri, optuna_url = check_before_writing(args, spec, held)
    on_term = signal.getsignal(signal.SIGTERM)
    tracker, ray_started = start_tracking_and_ray(
        uri, spec.name, args.address, args.num_cpus, store, args.verbose
    )
    _kept_handler(signal.SIGTERM, on_term)
    if args.address:  # not refused: an autoscaling cluster may yet add a node that fits
        waiting = unplaceable_on_cluster(spec.resources)
        if waiting:
            log.warning("%s", waiting)
    if wants_report(args.reports):
        preload_report()
    optuna_tags = _optuna_tags(optuna_url, study_dir, spec)
    study_run, arm_runs = open_study_runs(
        tracker, spec, plan, state.invocation, state.profile, state.overrides, optuna_tags
    )
    state.study_run = study_run
    write_state(store, study_dir, state)
    context = PhaseContext(
        spec=spec, plan=plan, store=store, study_dir=study_dir, tracking_uri=uri,
        study_run=study_run, arm_runs=arm_runs, max_concurrent=args.max_concurrent,
        reuse_workers=args.address is None or spec.synthetic, verbose=args.verbose,
        progress=_progress(plan, state, args.verbose), optuna_storage=optuna_url,
        driver_time=DriverTime(tracker.tags(study_run)),
    )  # fmt: skip
    try:
        return _run_study(context, state, tracker, args.reports, ray_started)
    finally:
        context.progress.close()


def opening_line(spec: StudySpec, args: argparse.Namespace) -> str:
    """What a study's run says within a second or two, on stdout (stderr keeps a refusal to
    its one line): the study, and the seconds of checks and start-up that come before the
    driver's log (Ray, MLflow and torch load; the data, the stores and the tracking server are
    checked, and nothing is written until they pass)."""
    profile = spec.profile or args.profile
    where = outputs_line(tracking_uri(args.tracking_uri), args.storage, args.reports,
                         args.optuna_storage)  # fmt: skip
    return (f"study {printable(spec.name)} (profile {printable(profile)}): checking the data, "
            "the storage and MLflow, then starting Ray; nothing is written until the checks "
            "pass" + (f"; {where}" if where.startswith("outputs in ") else ""))  # fmt: skip


def _run_study(
    context: PhaseContext,
    state: StudyState,
    tracker: StudyTracker,
    reports: str,
    ray_started: bool,
) -> StudyOutcome:
    """Run the phases, then summarise and report, stopping the Ray started for them meanwhile;
    the exit code says how it ended."""
    from study.execution import (
        SpaceReserve,
        failure_reason,
        is_storage_full,
        is_storage_unreachable,
        ray_stopped_meanwhile,
        refused_settings,
        refused_settings_line,
        run_phases,
        settle_full_storage,
        settle_refused_settings,
        settle_unreachable_storage,
    )
    from study.tracking.store import patiently
    from study.tracking.summary import confirm_summary

    spec, store, study_run = context.spec, context.store, context.study_run
    resume = _resume_line(spec.name, state.profile, state.overrides)
    ended = StudyOutcome(EXIT_OK, spec.name, study_run, context.tracking_uri, resume=resume)
    reserve = SpaceReserve(store.fs, store.fs_path(context.study_dir))
    driver_time = context.driver_time
    try:
        reserve.hold()
        finished = run_phases(context, state)
    except Exception as err:
        refused = refused_settings(err)
        if refused is not None:
            settle_refused_settings(
                tracker, study_run, context.arm_runs, driver_time.tags(), refused
            )
            print(f"error: {refused_settings_line(spec, state.overrides, refused)}",
                  file=sys.stderr)  # fmt: skip
            return dataclasses.replace(ended, exit_code=EXIT_BAD_INPUT)
        if is_storage_unreachable(err):
            reason = settle_unreachable_storage(
                err, tracker, study_run, context.arm_runs, driver_time.tags()
            )
            problem = f"cannot be reached ({reason}); once it answers again, resume"
        elif is_storage_full(err):
            reason = settle_full_storage(
                err, reserve, tracker, study_run, context.arm_runs, driver_time.tags()
            )
            problem = f"is full ({reason}); free space there, then resume"
        else:  # Tune raised, or a phase could not go on: one line, every run ended FAILED
            reserve.release()
            log.debug("the study stopped", exc_info=err)  # its traceback, with --verbose
            why = _every_trial_failed(tracker, study_run)
            return _failed(ended, context, tracker, driver_time, why or failure_reason(err))
        print(f"error: the study's storage {store.root} {problem} with: {resume}", file=sys.stderr)
        return dataclasses.replace(ended, exit_code=EXIT_STORAGE)
    if not finished:
        tracker.set_tags(study_run, {"state": "interrupted", **driver_time.tags()})
        tracker.end_study(study_run, context.arm_runs, "KILLED")
        print(f"study interrupted; its state is saved. Resume with:\n  {resume}", file=sys.stderr)
        return dataclasses.replace(ended, exit_code=EXIT_INTERRUPTED)
    reserve.release()
    uri = context.tracking_uri
    print(patiently(lambda: confirm_summary(tracker, study_run, spec.metric.name), uri))
    why = patiently(lambda: _every_trial_failed(tracker, study_run), uri)
    if why:
        return _failed(ended, context, tracker, driver_time, why)
    with ray_stopped_meanwhile(ray_started):
        report, problem = finish_and_report(context, tracker, driver_time, reports, state.profile)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return dataclasses.replace(ended, exit_code=EXIT_FAILED, error=problem)
    return dataclasses.replace(ended, report=report)


def _every_trial_failed(tracker: StudyTracker, study_run: str) -> str | None:
    """For a study whose every trial failed, the line that names the first one's error."""
    from study.execution import every_trial_failed

    first = every_trial_failed(tracker, study_run)
    if first is None:
        return None
    trial, error = first
    return f"every trial failed; the first, {trial}, with: {error}"


def _failed(
    ended: StudyOutcome,
    context: PhaseContext,
    tracker: StudyTracker,
    driver_time: DriverTime,
    why: str,
) -> StudyOutcome:
    """End a study that failed: its MLflow runs FAILED (why in the study run's `error` tag),
    Ray stopped, one line, EXIT_FAILED."""
    from study.execution import settle_failed_study

    line = joined(f"the study failed: {why}; no report made, what ran is in MLflow (study run "
                  f"{context.study_run})")  # fmt: skip
    settle_failed_study(tracker, context.study_run, context.arm_runs,
                        {"error": why[:MAX_TAG_CHARS], **driver_time.tags()})  # fmt: skip
    print(f"error: {line}", file=sys.stderr)
    return dataclasses.replace(ended, exit_code=EXIT_FAILED, error=line)


def _optuna_tags(url: str | None, study_dir: str, spec: StudySpec) -> dict[str, str]:
    """Where the explore samples are in Optuna's storage, for the study run's tags."""
    from study.search.optuna_storage import study_name

    if not url or spec.explore is None:
        return {}
    return {OPTUNA_TAG: url, OPTUNA_STUDIES_TAG: study_name(study_dir, EXPLORE, "<arm>")}


def _progress(plan: StudyPlan, state: StudyState, verbose: bool) -> StudyProgress:
    """The study's progress line; with --verbose Ray prints too, so it is logged, not drawn."""
    planned = {phase.name: phase.trials for phase in plan.phases}
    progress = StudyProgress(planned, plan.spec.metric.name, plan.spec.metric.mode,
                             terminal=False if verbose else None)  # fmt: skip
    for phase in state.phases_done:
        progress.phase_done(phase)
    return progress


def command() -> int:
    """`python -m study.run` and the installed `study-run`: `main`, then an exit that skips
    the interpreter's last garbage collection, its sqlite stores closed first."""
    return leaving_quickly(stores_closed(pipe_closed_quietly(main)))


if __name__ == "__main__":
    sys.exit(command())
