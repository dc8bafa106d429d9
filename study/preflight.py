"""What a study's run refuses before it writes anything anywhere: the tracking server, the
storage and its lock, the report folder, the overrides of a resumed run, the precision, the
data and the model (the same checks as --dry-run's, so both refuse the same input with the same
line), the cluster's address, the local resources and CUDA, and the Optuna storage. Kept apart from
study/run.py, which runs the steps, so that the list of refusals reads in one place.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from study.folder_names import check_replaceable, report_folder
from study.names import tracking_uri
from study.outputs import outputs_line, wants_report
from study.plan import StudyPlan, make_plan
from study.precision import settle_precision
from study.spec import StudySpec, check_same_overrides, study_error
from study.spec.stages import check_stage_data
from trainables.data.relabel import LabelMapError
from trainables.data.sources import LabelMap, Splits, load_checked_splits
from trainables.errors import UserInputError, joined
from trainables.hub import only_cache_read

if TYPE_CHECKING:  # imported where a study runs, so that --help answers without them
    from study.execution import StudyStore
    from study.execution.state import StudyState

log = logging.getLogger("study")  # the driver's logger: the lines read as before


def check_before_writing(
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
    if wants_report(args.reports):  # a report that could not be written is refused now
        check_replaceable(report_folder(args.reports, spec.name, profile))
    study_dir, state = study_folder(store, spec.name, profile, args.resume)
    if args.resume:
        check_same_overrides(state.overrides, args.overrides)
        log.info("resuming %s", store.join(study_dir))
    state.profile = profile
    state.overrides = list(args.overrides)
    spec = settle_precision(spec, state, resumed=args.resume, local=args.address is None)
    data_line = checked_data(spec, args.overrides)
    checked_model(spec, args.overrides)
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


def checked_data(spec: StudySpec, overrides: Sequence[str], planning: bool = False) -> str:
    """The study's data, and every intermediate stage's, read and checked as its trials will
    read them, in a few words; a synthetic study reads none. The one check of the data of
    the real run and of --dry-run, so both refuse the same input with the same line. One
    difference, `planning` (--dry-run): a dataset the hub does not answer for (offline, or
    no network here, as when a cluster's study is planned on a laptop) is said to be unread,
    not refused; the run reads it before it writes anything, and refuses it then. A label
    map naming a type the data turns out not to have is refused at its study file line."""
    try:
        if spec.synthetic:
            check_stage_data(spec.grid, spec.fixed)
            return "none (synthetic trainable: learning curves from a formula, not a finding)"
        splits, labels = _study_data(spec, overrides)
        check_stage_data(spec.grid, spec.fixed)
    except UserInputError as err:
        if planning and _unreachable(err):
            return (f"not read here ({joined(str(err))}); the run reads it before it writes "
                    "anything, and refuses it then if it is still out of reach")  # fmt: skip
        raise
    return (f"{len(splits.train)} train / {len(splits.dev)} dev / {len(splits.test)} test "
            f"sentences, {len(labels)} labels")  # fmt: skip


def _study_data(spec: StudySpec, overrides: Sequence[str]) -> tuple[Splits, LabelMap]:
    """The study's own data, read and checked; a label map it refuses is said at the line of
    the study file (or the `--set`) that wrote it."""
    try:
        return load_checked_splits(spec.data)
    except LabelMapError as err:
        path = ("data", *err.path)
        raise UserInputError(study_error(spec, overrides, path, err.allowed, err.value)) from err


def checked_model(spec: StudySpec, overrides: Sequence[str], planning: bool = False) -> str:
    """The study's model, its config read as a trial reads it, in a few words. Reading the
    study file asks only the Hugging Face cache for a hub id (a cluster's study is planned on
    a laptop); a run asks the hub too, here, and refuses a model it cannot read at the file's
    `model` line before anything is written: every trial would fail on it, after Ray started.
    `planning` (--dry-run): a model the hub cannot be asked for, being out of reach, is said
    to be unread, not refused, as the data is."""
    if spec.synthetic:
        return "none (synthetic trainable)"
    if not spec.model_layers:  # a hub id not in the cache: its config from the hub, or why not
        from study.spec import load_study

        try:
            spec = load_study(str(spec.path), spec.profile, overrides=overrides, download=True)
        except UserInputError as err:
            if planning and only_cache_read(str(err)):
                return (f"{spec.model}, not read here (not in the Hugging Face cache, and the "
                        "hub is out of reach); the run reads it before it writes anything, and "
                        "refuses it then if it is still out of reach")  # fmt: skip
            raise
    return f"{spec.model}, {spec.model_layers} layers, {spec.model_heads} heads"


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
