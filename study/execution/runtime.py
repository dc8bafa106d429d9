"""The Ray runtime a study runs on: refuse an unreachable cluster in seconds, start or join
Ray, refuse storage the cluster's hosts cannot share, and stop Ray again.

`ray.init` keeps retrying a dead head node for minutes, and a multi-host cluster with a local
results path would fail only when a trial resumes on another host, so both are checked before
anything of the study is written.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import ray

from study.execution.storage import StudyStore, is_uri
from study.progress.quiet import quiet_ray_start, ray_init_options
from study.tracking import StudyTracker
from study.tracking.start import connect_tracking
from trainables.errors import UserInputError, first_line

log = logging.getLogger(__name__)


def check_address(address: str | None, timeout_s: float = 5.0) -> None:
    """Refuse an unreachable `--address` in seconds, before anything is written: `ray.init`
    itself keeps retrying a dead head node for minutes before it gives up."""
    if not address or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UserInputError(f"--address {address}: expected 'auto' or HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise UserInputError(
            f"cannot start or reach --address {address}: nothing answers there ({err}); "
            "is the head node up (ray start --head) and the port open?"
        ) from err


def _start_timed_out(err: BaseException) -> bool:
    """Ray gives its new node a fixed 30 s to register and then raises a bare Exception
    saying so; on a machine busy with other work that can happen once and not again."""
    return type(err) is Exception and "timed out during startup" in str(err)


def _start_local_ray(num_cpus: int | None, quiet: dict, verbose: bool) -> None:
    """`ray.init` of a local Ray, tried a second time when its node did not register in
    time: a busy laptop should not lose a study to Ray's fixed start-up wait."""
    for attempt in (1, 2):
        try:
            with quiet_ray_start(verbose):
                ray.init(num_cpus=num_cpus, object_store_memory=256 * 1024**2, **quiet)
            return
        except Exception as err:
            if attempt == 2 or not _start_timed_out(err):
                raise
            ray.shutdown()  # what the first start left, before the second
            log.warning("a local Ray did not start in time (%s); trying once more",
                        first_line(err, 80))  # fmt: skip


def start_ray(
    address: str | None, num_cpus: int | None, store: StudyStore, verbose: bool = False
) -> bool:
    """Start a local Ray, or join a cluster; refuse local-only storage on several hosts.
    Unless `verbose`, the trials' processes keep Ray's own info lines to themselves. True when
    Ray was started or joined here; False when the process had one already (a notebook's own,
    which the study leaves running)."""
    if ray.is_initialized():
        return False
    quiet = {"include_dashboard": False, "logging_level": logging.WARNING}
    quiet |= ray_init_options(verbose)
    where = f"--address {address}" if address else "a local Ray"
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            _start_local_ray(num_cpus, quiet, verbose)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise UserInputError(f"cannot start or reach {where}: {first_line(err)}") from err
    except Exception as err:  # Ray's own start-up timeout is a bare Exception
        if not _start_timed_out(err):
            raise
        raise UserInputError(f"cannot start {where}: {first_line(err)}") from err
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    log.info(
        "Ray: %d node(s) on %d host(s), resources %s",
        len(nodes), len({n["NodeManagerAddress"] for n in nodes}), ray.cluster_resources(),
    )  # fmt: skip
    problem = storage_problem(nodes, store)
    if problem:
        ray.shutdown()
        raise UserInputError(problem)
    return True


def local_resources(num_cpus: int | None) -> dict[str, float] | None:
    """The CPUs and GPUs a local Ray started by `start_ray` has, before it starts: `num_cpus`
    or the CPUs Ray counts on this machine (its container's limits included), and the GPUs
    it finds; a Ray this process already runs says its own. None when Ray's count cannot be
    had (its private resolver changed): the study then goes on without this check."""
    if ray.is_initialized():
        have = ray.cluster_resources()
        return {"cpu": float(have.get("CPU", 0)), "gpu": float(have.get("GPU", 0))}
    try:  # what ray.init resolves for its own node (ray==2.60, as constraints.txt pins)
        from ray._private.resource_and_label_spec import ResourceAndLabelSpec

        spec = ResourceAndLabelSpec(num_cpus=num_cpus).resolve(is_head=True)
        return {"cpu": float(spec.num_cpus), "gpu": float(spec.num_gpus or 0)}
    except Exception as err:  # noqa: BLE001 - a check we can do without
        log.debug("could not count the local Ray's resources: %s", err)
        return None


def too_large(need: Mapping[str, float], have: Mapping[str, float]) -> str | None:
    """The first of `need` (`cpu`, `gpu`: one trial's) that is more than `have` holds."""
    return next((key for key in ("cpu", "gpu") if need.get(key, 0) > have.get(key, 0)), None)


def unplaceable_on_cluster(need: Mapping[str, float]) -> str | None:
    """On a joined cluster: a line saying that no node alive now can hold one trial
    (`need`), or None. Not refused: an autoscaling cluster may yet add such a node."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    have = [{"cpu": n.get("CPU", 0), "gpu": n.get("GPU", 0)} for n in nodes]
    if not have or any(too_large(need, node) is None for node in have):
        return None
    largest = max(have, key=lambda node: (node["gpu"], node["cpu"]))
    return (
        f"no node of the cluster can hold one trial (resources cpu {need.get('cpu', 0):g}, "
        f"gpu {need.get('gpu', 0):g}; its largest node has cpu {largest['cpu']:g}, gpu "
        f"{largest['gpu']:g}): the trials wait until such a node joins"
    )


def stop_ray() -> None:
    """Stop Ray before the driver's last words on a full disk: its log monitor otherwise goes on
    printing the workers' buffered lines after them, and the line the user needs is no longer
    the last."""
    if ray.is_initialized():
        ray.shutdown()


@contextmanager
def ray_stopped_meanwhile(started_here: bool) -> Iterator[None]:
    """Stop the Ray this invocation started while the driver does its last work, and wait for
    it before going on. The summary and the report after the last phase read MLflow, never
    Ray; Ray's shutdown is mostly waiting for its processes to end, about 2 s that would
    otherwise follow the report (bench/study_overhead.py). A Ray the process had before the
    study is left running."""
    if not started_here:
        yield
        return
    stopping = threading.Thread(target=stop_ray, name="ray-shutdown")
    stopping.start()
    try:
        yield
    finally:
        stopping.join()


def storage_problem(nodes: list[dict], store: StudyStore) -> str | None:
    """Checkpoints written on one host must be readable where a trial resumes: a plain local
    path is only safe when every node is on this one host."""
    hosts = {n["NodeManagerAddress"] for n in nodes if n.get("Alive")}
    if len(hosts) <= 1 or is_uri(store.root):
        return None
    return (
        f"the Ray cluster spans {len(hosts)} hosts but --storage {store.root} is a local "
        "path that the other hosts cannot see; give shared storage as a URI "
        "(s3://..., gs://..., or file:///path/on/a/shared/filesystem)"
    )


def start_tracking_and_ray(
    uri: str,
    study: str,
    address: str | None,
    num_cpus: int | None,
    store: StudyStore,
    verbose: bool = False,
) -> tuple[StudyTracker, bool]:
    """Open the MLflow store (its schema, for a new sqlite file) while Ray starts: seconds
    each, mostly waiting. A store that cannot be used stops Ray again and is said last. The
    tracker, and whether Ray was started or joined here (`start_ray`)."""
    with ThreadPoolExecutor(1, thread_name_prefix="mlflow") as pool:
        tracking = pool.submit(connect_tracking, uri, study)
        try:
            started_here = start_ray(address, num_cpus, store, verbose)
        except UserInputError:
            tracking.result()  # a tracking error is said first
            raise
        try:
            return tracking.result(), started_here
        except UserInputError:
            stop_ray()
            raise
