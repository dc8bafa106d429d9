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
import importlib
import logging
import os
import shlex
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from study.catalog import listing, study_entries
from study.command_line import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STORAGE,
    NO_REPORT,
    parse_args,
)
from study.folder_names import check_replaceable, report_folder
from study.names import (
    EXPLORE,
    OPTUNA_STUDIES_TAG,
    OPTUNA_TAG,
    default_tracking_uri,
    tracking_uri,
)
from study.outputs import DEFAULT_REPORTS, outputs_line, stores_closed
from study.plan import StudyPlan, make_plan
from study.precision import settle_precision
from study.progress.line import StudyProgress
from study.progress.log_format import log_to_terminal
from study.progress.quiet import quiet_driver
from study.spec import StudySpec, check_same_overrides, load_study, study_error
from study.spec.stages import check_stage_data, study_stages
from trainables.command_line import EXIT_BAD_INPUT, leaving_quickly
from trainables.data.sources import load_checked_splits
from trainables.errors import UserInputError, first_line, joined, printable

if TYPE_CHECKING:  # the driver's Ray, Tune and MLflow: imported where a study runs, so that
    # --help, --list and a bad command line answer without them (tests/test_help_time.py)
    from study.execution import PhaseContext, StudyStore
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
    try:
        return run(args).exit_code
    except UserInputError as err:
        return _fail(str(err))
    except KeyboardInterrupt:
        print(interrupted_line(args), file=sys.stderr)
        return EXIT_INTERRUPTED


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
        data_line = _checked_data(spec, planning=True)
        print(f"{make_plan(spec).describe()}\n  data: {data_line}")
        return StudyOutcome(EXIT_OK, spec.name)
    print(opening_line(spec, args), flush=True)  # before Ray, MLflow and the checks: seconds
    from study.execution import PhaseContext, start_tracking_and_ray, unplaceable_on_cluster
    from study.execution.state import write_state
    from study.tracking.start import open_study_runs

    spec, plan, store, study_dir, state, uri, optuna_url = _check_before_writing(args, spec, held)
    tracker, ray_started = start_tracking_and_ray(
        uri, spec.name, args.address, args.num_cpus, store, args.verbose
    )
    if args.address:  # not refused: an autoscaling cluster may yet add a node that fits
        waiting = unplaceable_on_cluster(spec.resources)
        if waiting:
            log.warning("%s", waiting)
    if args.reports.lower() != NO_REPORT:
        _preload_report()
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


def _check_before_writing(
    args: argparse.Namespace, spec: StudySpec, held: contextlib.ExitStack
) -> tuple[StudySpec, StudyPlan, StudyStore, str, StudyState, str, str | None]:
    """Everything that can be refused is checked before anything is written anywhere: the
    tracking server, the storage, the overrides of a resumed run, the precision (before any
    data is read), the data, the cluster's address, the Optuna storage. The spec with its one
    precision settled (study/precision.py) and its plan, the store, this invocation's folder
    in it, the study's state, the tracking URI and the Optuna storage URL."""
    from study.execution import StudyStore, check_address, study_folder
    from study.execution.driver_lock import DriverLock
    from study.tracking.probe import shown_uri
    from study.tracking.start import probe_tracking

    store = StudyStore(args.storage)
    profile = spec.profile or args.profile
    uri = tracking_uri(args.tracking_uri)
    probe_tracking(uri)
    store.check_writable()  # before it is read: a store that does not answer is one line
    held.enter_context(DriverLock(store, spec.name, wait=args.wait))  # one driver a study
    if args.reports.lower() != NO_REPORT:  # a report that could not be written is refused now
        check_replaceable(report_folder(args.reports, spec.name, profile))
    study_dir, state = study_folder(store, spec.name, profile, args.resume)
    if args.resume:
        check_same_overrides(state.overrides, args.overrides)
        log.info("resuming %s", store.join(study_dir))
    state.profile = profile
    state.overrides = list(args.overrides)
    spec = settle_precision(spec, state, resumed=args.resume, local=args.address is None)
    data_line = _checked_data(spec)
    check_address(args.address)
    _check_local_resources(args, spec)
    optuna_url = _optuna_storage(args, uri, store)
    plan = make_plan(spec)
    optuna = optuna_url if spec.explore else None
    log.info("%s", outputs_line(shown_uri(uri), store.root, args.reports, optuna))  # first
    log.info("plan: %s; precision %s", plan.summary(), state.precision)
    log.info("data: %s", data_line)
    log.info("results in %s; MLflow at %s%s", store.join(study_dir), shown_uri(uri),
             f"; Optuna storage {optuna_url}" if optuna_url and spec.explore else "")  # fmt: skip
    return spec, plan, store, study_dir, state, uri, optuna_url


def _check_local_resources(args: argparse.Namespace, spec: StudySpec) -> None:
    """A trial that needs more CPUs or GPUs than the local Ray will ever have would wait
    forever for a place: refused at the `resources` line. A joined cluster is not checked
    here (see `unplaceable_on_cluster`)."""
    from study.execution import local_resources, too_large

    if args.address:
        return
    have = local_resources(args.num_cpus)
    _check_local_cuda(args, spec, have)
    key = too_large(spec.resources, have) if have is not None else None
    if key is None:
        return
    count = have[key]
    source = f"--num-cpus {args.num_cpus}" if key == "cpu" and args.num_cpus else "this machine"
    words = {"cpu": "CPUs", "gpu": "GPUs"}[key]
    allowed = (f"one trial would hold more {words} than the local Ray has ({count:g}, from "
               f"{source}), so none could ever start; at most {count:g}, or join a cluster "
               "with --address")  # fmt: skip
    raise UserInputError(study_error(spec, args.overrides, ("resources", key), allowed))


def cuda_field(spec: StudySpec) -> tuple[str, ...] | None:
    """Where the study file asks its trials to train on CUDA (`device: cuda` under `fixed`,
    or among a grid factor's values), or None. `resources.gpu` above 0 also puts trials on
    CUDA (study/plan.py); that request is checked as a resource."""
    if spec.fixed.get("device") == "cuda":
        return ("fixed", "device")
    if "cuda" in spec.grid.get("device", ()):
        return ("grid", "device")
    return None


def _check_local_cuda(
    args: argparse.Namespace, spec: StudySpec, have: dict[str, float] | None
) -> None:
    """`device: cuda` in a local study on a machine whose Ray finds no GPU: every trial would
    fail on its first line, after Ray started and the runs were opened, so it is refused
    here, before anything is written. Ray's count is the one the driver has without
    importing torch (study/execution/runtime.py `local_resources`)."""
    path = cuda_field(spec)
    if path is None or have is None or have["gpu"] > 0:
        return
    allowed = ("device cuda trains on a GPU, and the local Ray finds none on this machine, "
               "where a local study's trials run; device auto or cpu here, or --address to "
               "join a cluster that has GPUs")  # fmt: skip
    raise UserInputError(study_error(spec, args.overrides, path, allowed))


def _checked_data(spec: StudySpec, planning: bool = False) -> str:
    """The study's data, and every intermediate stage's, read and checked as its trials will
    read them, in a few words; a synthetic study reads none. The one check of the data of
    the real run and of --dry-run, so both refuse the same input with the same line. One
    difference, `planning` (--dry-run): a dataset the hub does not answer for (offline, or
    no network here, as when a cluster's study is planned on a laptop) is said to be unread,
    not refused; the run reads it before it writes anything, and refuses it then."""
    try:
        if spec.synthetic:
            check_stage_data(spec.grid, spec.fixed)
            return "none (synthetic trainable: learning curves from a formula, not a finding)"
        splits, labels = load_checked_splits(spec.data)
        check_stage_data(spec.grid, spec.fixed)
    except UserInputError as err:
        if planning and _unreachable(err):
            return (f"not read here ({joined(str(err))}); the run reads it before it writes "
                    "anything, and refuses it then if it is still out of reach")  # fmt: skip
        raise
    return (f"{len(splits.train)} train / {len(splits.dev)} dev / {len(splits.test)} test "
            f"sentences, {len(labels)} labels")  # fmt: skip


def _unreachable(err: BaseException) -> bool:
    """Whether a data error came from a connection that failed (the `datasets` library raises
    ConnectionError for a hub it cannot reach), not from the data."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ConnectionError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


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
    from study.tracking.start import DriverTime
    from study.tracking.store import patiently
    from study.tracking.summary import confirm_summary

    spec, store, study_run = context.spec, context.store, context.study_run
    resume = _resume_line(spec.name, state.profile, state.overrides)
    ended = StudyOutcome(EXIT_OK, spec.name, study_run, context.tracking_uri, resume=resume)
    reserve = SpaceReserve(store.fs, store.fs_path(context.study_dir))
    driver_time = DriverTime(tracker.tags(study_run))
    try:
        reserve.hold()
        finished = run_phases(context, state)
    except Exception as err:
        refused = refused_settings(err)
        if refused is not None:
            settle_refused_settings(tracker, study_run, context.arm_runs, driver_time.tags())
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
        report, problem = _finish_and_report(context, tracker, driver_time, reports, state.profile)
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


def _finish_and_report(
    context: PhaseContext,
    tracker: StudyTracker,
    driver_time: DriverTime,
    reports: str,
    profile: str,
) -> tuple[Path | None, str | None]:
    """The finished study's state in MLflow and its report: the report's folder (None
    without one), and the line that says the report failed (None when it did not)."""
    from study.tracking.store import patiently

    spec, study_run, uri = context.spec, context.study_run, context.tracking_uri
    finished = {"state": "finished", **driver_time.tags()}
    patiently(lambda: tracker.set_tags(study_run, finished), uri)
    report, problem = None, None
    again = _report_command(uri, spec.name, study_run, reports, profile)
    if reports.lower() == NO_REPORT:
        print(f"no report made (--reports {NO_REPORT}); make it with: {again}")
    else:
        report, problem = _report(tracker, uri, spec.name, study_run, reports, again)
    patiently(lambda: tracker.end_study(study_run, context.arm_runs, "FINISHED"), uri)
    return report, problem


def _report_command(uri: str, study: str, study_run: str, reports: str, profile: str) -> str:
    """The command that writes the study run's report where this one would have."""
    command = f"python -m study.report {shlex.quote(study)} --run-id {study_run}"
    if uri != default_tracking_uri():
        command += f" --tracking-uri {shlex.quote(uri)}"
    if reports.lower() != NO_REPORT and Path(reports) != Path(DEFAULT_REPORTS):
        command += f" --out {shlex.quote(str(report_folder(reports, study, profile)))}"
    return command


def _optuna_storage(args: argparse.Namespace, uri: str, store: StudyStore) -> str | None:
    """Where the explore samples are copied for Optuna's tools (None: nowhere)."""
    from study.search.optuna_storage import check_storage, default_storage

    if args.optuna_storage is not None:
        if args.optuna_storage.lower() == "none":
            return None
        check_storage(args.optuna_storage)
        return args.optuna_storage
    url = default_storage(uri, store.root)
    if url is None:
        log.info("no Optuna storage (the tracking store and --storage are remote); give "
                 "--optuna-storage to keep the explore samples for optuna-dashboard")  # fmt: skip
    return url


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


def _preload_report() -> None:
    """Import the report's modules (pandas, matplotlib, deepsig with torch: seconds) in the
    background while the trials run, not on the way out when the user is waiting."""
    threading.Thread(target=_import_quietly, args=("study.report",), daemon=True).start()


def _import_quietly(module: str) -> None:
    """A driver that stops early (bad input, full disk) exits while this import runs, which
    then fails on the way out; `_report` imports again and says any real error."""
    with contextlib.suppress(BaseException):
        importlib.import_module(module)


def _report(
    tracker: StudyTracker, uri: str, study: str, study_run: str, reports: str, again: str
) -> tuple[Path | None, str | None]:
    """The study's data is safe in MLflow whatever happens here, and the study counts as
    finished there; a failed report is one line with the command (`again`) that makes it,
    and an exit code that says so (EXIT_FAILED). The report only reads: its summary and its
    folder are logged here, on the runs this driver owns. The report's folder, absolute, and
    None; or None and that line."""
    from study.report.build import run_metrics, write_report  # see _preload_report
    from study.tracking.store import patiently

    try:
        report = write_report(uri, study, run_id=study_run, reports_root=reports)
        per_run, counts = run_metrics(report)
        patiently(lambda: tracker.log_report(study_run, per_run, counts, report.folder), uri)
    except Exception as err:  # noqa: BLE001 - any failure of the report, never of the study
        log.debug("the report failed", exc_info=err)  # its traceback, with --verbose
        return None, joined(
            f"the study finished but its report failed ({type(err).__name__}: "
            f"{first_line(err, 300)}); its data is in MLflow: make the report with: {again}"
        )
    print(report.summary_line())
    return report.folder.resolve(), None


def command() -> int:
    """`python -m study.run` and the installed `study-run`: `main`, then an exit that skips
    the interpreter's last garbage collection, its sqlite stores closed first."""
    return leaving_quickly(stores_closed(main()))


if __name__ == "__main__":
    sys.exit(command())
