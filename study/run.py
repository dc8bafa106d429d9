"""`python -m study.run NAME`: run a study on Ray Tune, tracked in MLflow.

    python -m study.run ner_depth                      # the embedded default, on this machine
    python -m study.run ner_depth --profile smoke      # a 2-minute check
    python -m study.run ner_depth --dry-run            # print the plan and exit
    python -m study.run ner_depth --resume             # continue the newest interrupted run
    python -m study.run ner_depth --profile cluster --address auto --storage s3://bucket/x

Phases run one after the other: explore (per-arm Optuna samples, per-arm ASHA pruning whole
samples) then confirm (the chosen sample of each arm on every seed, never pruned).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from study import phases
from study.fingerprint import code_version, data_fingerprint, hardware, model_fingerprint
from study.names import ANALYSIS_TAG, CONFIRM, EXPLORE, tracking_uri
from study.plan import make_plan
from study.rounds import run_confirm_rounds
from study.saved_state import SpaceReserve, rewrite_from_staging
from study.spec import load_study
from study.storage import StudyStore
from study.storage_guard import is_storage_full, no_space_reason, storage_context
from study.storage_outage import end_stopped_study, is_storage_unreachable, storage_unreachable
from study.tracking import StudyTracker
from study.tracking.probe import shown_uri
from study.tracking.summary import confirm_summary
from trainables.data.sources import load_checked_splits
from trainables.errors import UserInputError, joined

log = logging.getLogger("study")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m study.run", description=__doc__.split("\n")[0])
    parser.add_argument("study", help="study name (a file in search_spaces/) or a YAML path")
    parser.add_argument("--profile", default="default", help="profile in the study file")
    parser.add_argument("--address", help="Ray cluster to join: 'auto' or HOST:PORT")
    parser.add_argument("--resume", action="store_true", help="continue the newest run")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    parser.add_argument("--max-concurrent", type=int, help="trials running at once")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///mlflow.db)")
    parser.add_argument("--storage", default="ray_results", help="Ray results: path or URI")
    parser.add_argument("--num-cpus", type=int, help="CPUs for a local Ray (default: all)")
    parser.add_argument("--reports", default="reports", help="where the report folder goes")
    return parser.parse_args(argv)


def _fail(message: str) -> int:
    print(f"error: {joined(message)}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
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
    try:
        return _run(args)
    except UserInputError as err:
        return _fail(str(err))
    except KeyboardInterrupt:
        print(
            f"\ninterrupted; the study's state is saved. Resume with:\n  python -m study.run "
            f"{args.study} --profile {args.profile} --resume",
            file=sys.stderr,
        )
        return 130


def _run(args: argparse.Namespace) -> int:
    spec = load_study(args.study, args.profile)
    plan = make_plan(spec)
    if args.dry_run:
        print(plan.describe())
        return 0
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise UserInputError(f"--max-concurrent {args.max_concurrent}: expected >= 1")
    # Everything that can be refused is checked before anything is written anywhere.
    splits, labels = load_checked_splits(spec.data)
    store = StudyStore(args.storage)
    profile = spec.profile or args.profile
    uri = tracking_uri(args.tracking_uri)
    phases.probe_tracking(uri)
    store.check_writable()  # before it is read: a store that does not answer is one line
    study_dir, state = _study_dir(store, spec.name, profile, args.resume)
    state["profile"] = profile
    phases.check_address(args.address)
    log.info("plan: %s", plan.summary())
    log.info(
        "data: %d train / %d dev / %d test sentences, %d labels",
        len(splits.train), len(splits.dev), len(splits.test), len(labels),
    )  # fmt: skip
    log.info("results in %s; MLflow at %s", store.join(study_dir), shown_uri(uri))

    tracker = _start_tracking_and_ray(uri, spec.name, args, store)
    _preload_report()
    study_run, arm_runs = _mlflow_runs(tracker, spec, plan, state)
    store.write_state(study_dir, state)
    reserve = SpaceReserve(store.fs, store.fs_path(study_dir))
    context = phases.PhaseContext(
        spec=spec,
        plan=plan,
        store=store,
        study_dir=study_dir,
        tracking_uri=uri,
        study_run=study_run,
        arm_runs=arm_runs,
        max_concurrent=args.max_concurrent,
        reuse_workers=args.address is None,
    )
    started = time.time()
    try:
        reserve.hold()
        finished = _run_phases(context, state)
    except Exception as err:
        if is_storage_unreachable(err):
            return storage_unreachable(tracker, context, profile, err)
        if not is_storage_full(err):
            raise
        return _storage_full(tracker, context, profile, err, reserve)
    if not finished:
        tracker.set_tags(study_run, {"state": "interrupted"})
        tracker.end_study(study_run, arm_runs, "KILLED")
        print(
            "study interrupted; its state is saved. Resume with:\n  python -m study.run "
            f"{spec.name} --profile {profile} --resume",
            file=sys.stderr,
        )
        return 130
    summary = confirm_summary(tracker, study_run, spec.metric.name)
    print(summary)
    tracker.set_tags(study_run, {"state": "finished", "wall_s": f"{time.time() - started:.0f}"})
    _report(uri, spec.name, study_run, args.reports)
    tracker.end_study(study_run, arm_runs, "FINISHED")
    reserve.release()
    return 0


def _storage_full(
    tracker, context: phases.PhaseContext, profile: str, err: Exception, reserve: SpaceReserve
) -> int:
    """The trials have stopped: free the reserve and write Tune's last state into it (its
    own copy may have been cut short by the full disk), so `--resume` can read it."""
    reserve.release()
    storage = storage_context(err)
    if storage is not None and not rewrite_from_staging(storage):
        log.warning("the saved state of this phase may not be whole; --resume will say so")
    reason = no_space_reason(err)
    end_stopped_study(tracker, context, "storage_full")
    print(
        f"error: the study's storage {context.store.root} is full ({reason}); free space "
        f"there, then resume with: python -m study.run {context.spec.name} --profile "
        f"{profile} --resume",
        file=sys.stderr,
    )
    return 3


def _start_tracking_and_ray(
    uri: str, study: str, args: argparse.Namespace, store: StudyStore
) -> StudyTracker:
    """Open the MLflow store (its schema, for a new sqlite file) while Ray starts: seconds
    each, mostly waiting. A store that cannot be used stops Ray again and is said last."""
    with ThreadPoolExecutor(1, thread_name_prefix="mlflow") as pool:
        tracking = pool.submit(phases.connect_tracking, uri, study)
        try:
            phases.start_ray(args.address, args.num_cpus, store)
        except UserInputError:
            tracking.result()  # a tracking error is said first
            raise
        try:
            return tracking.result()
        except UserInputError:
            phases.stop_ray()
            raise


def _preload_report() -> None:
    """Import the report's modules (pandas, matplotlib, deepsig with torch: seconds) in the
    background while the trials run, not on the way out when the user is waiting."""
    threading.Thread(target=_import_quietly, args=("study.report",), daemon=True).start()


def _import_quietly(module: str) -> None:
    """A driver that stops early (bad input, full disk) exits while this import runs, which
    then fails on the way out; `_report` imports again and says any real error."""
    with contextlib.suppress(BaseException):
        importlib.import_module(module)


def _report(uri: str, study: str, study_run: str, reports: str) -> None:
    """The study's data is safe in MLflow whatever happens here: a failed report is said in
    one line with the command that makes it again, and the study still counts as finished."""
    from study.report.build import write_report  # see _preload_report

    try:
        report = write_report(uri, study, run_id=study_run, reports_root=reports)
    except Exception as err:  # noqa: BLE001 - any failure of the report, never of the study
        log.error(
            "the study finished but its report failed (%s: %s); make it with: "
            "python -m study.report %s --run-id %s", type(err).__name__, err, study, study_run,
        )  # fmt: skip
        return
    print(report.summary_line())


def _study_dir(
    store: StudyStore, study: str, profile: str, resume: bool
) -> tuple[str, dict[str, Any]]:
    if not resume:
        return store.new_study_dir(study, profile), {"invocation": uuid.uuid4().hex}
    latest = store.latest_study_dir(study, profile)
    state = store.read_state(latest) if latest else None
    if state is None:
        raise UserInputError(
            f"--resume: no earlier run of study {study} (profile {profile}) in {store.root}; "
            "run it once without --resume"
        )
    log.info("resuming %s", store.join(latest))
    return latest, state


def _mlflow_runs(
    tracker: StudyTracker, spec, plan, state: dict[str, Any]
) -> tuple[str, dict[str, str]]:
    tags = {
        "study": spec.name,
        "profile": state["profile"],
        "plan": plan.summary(),
        "code_version": code_version(),
        "model": spec.model,
        "model_fingerprint": model_fingerprint(spec.model),
        "data_fingerprint": data_fingerprint(spec.data),
        "study_file": str(spec.path),
        "hardware": hardware(),
        ANALYSIS_TAG: spec.analysis.to_json(),
    }
    if spec.compare_baseline is not None:  # resolved values, as the arm runs record them
        tags["compare_baseline"] = json.dumps(spec.compare_baseline)
    name = f"{spec.name}/{state['profile']}"
    study_run = tracker.study_run(state["invocation"], name, tags, {"plan": spec.raw})
    arm_runs = {arm.id: tracker.arm_run(study_run, arm.id, arm.factors) for arm in plan.arms}
    state.update(study_run=study_run)
    return study_run, arm_runs


def _run_phases(context: phases.PhaseContext, state: dict[str, Any]) -> bool:
    """Run explore then confirm; a phase recorded as done in the state file is not rerun."""
    done = set(state.setdefault("phases_done", []))
    spec = context.spec
    if spec.explore is not None and EXPLORE not in done:
        if not phases.run_explore(context):
            return False
        state["phases_done"].append(EXPLORE)
        context.store.write_state(context.study_dir, state)
    if spec.confirm is not None and CONFIRM not in done:
        chosen = state.get("chosen") or phases.choose_samples(context)
        state["chosen"] = chosen
        context.store.write_state(context.study_dir, state)
        if not run_confirm_rounds(context, state, chosen):
            return False
        state["phases_done"].append(CONFIRM)
        context.store.write_state(context.study_dir, state)
    return True


if __name__ == "__main__":
    sys.exit(main())
