"""Short content fingerprints recorded with every study run, so a number in MLflow can be traced
to the exact model weights, data files and code that produced it."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from trainables.data.sources import data_inputs
from trainables.settings import TINY_MODEL, instruction_caps, resolve_model

REPO = Path(__file__).resolve().parent.parent


def _hash_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode())
        with path.open("rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def model_fingerprint(model: str, revision: str | None = None) -> str:
    """Content hash of a local model folder (which has no revisions: its files are what ran); a
    hub id stands for itself, with the revision the study pinned (`hub:ID@REV`).
    The `tiny` model is built by the trials from the code, which `code_version` pins, and the
    driver does not build it (that would load torch)."""
    if model == TINY_MODEL:
        return f"builtin:{model}"
    try:
        resolved = Path(resolve_model(model))
    except Exception:  # reported properly when the trial loads the model
        return f"unresolved:{model}"
    if not resolved.is_dir():
        return f"hub:{model}" + (f"@{revision}" if revision else "")
    return "sha256:" + _hash_files([p for p in resolved.iterdir() if p.is_file()])


def data_fingerprint(data: dict[str, Any]) -> str:
    """Content hash of the files a study reads (a whole corpus named with its hash, then the
    other files together); dataset names are recorded as given. Each kind of source says which
    files and names it has, so a new kind needs nothing here."""
    inputs = data_inputs(data)
    parts = []
    if inputs.corpus is not None:
        corpus_hash = _hash_files(inputs.corpus.files())
        parts.append(f"{inputs.corpus.recorded_name()}:sha256:{corpus_hash}")
    files = [path for source in inputs.splits.values() for path in source.files()]
    files = [path for path in files if path.is_file()]
    parts += ["sha256:" + _hash_files(files)] if files else []
    parts += sorted(inputs.recorded_names())
    return ";".join(parts) or "none"


def study_hash(text: str) -> str:
    """The design's identity: sha256 (hex) of the study as it runs, the `study.yaml` text the
    study run records (profile and overrides merged, paths resolved), so a reviewer can
    check it with `sha256sum` on the artifact."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# git pathspec: the generated study reports, which a study run rewrites
REPORTS = ":(exclude)reports"


def code_version() -> str:
    """The git commit, with +dirty when tracked files other than the generated reports have
    changed (a study run rewrites `reports/`, which says nothing about the code that ran),
    else the commit the installed package was built from (or, without one, its version). An
    installed package is not a checkout: git would describe
    whatever repository holds its environment."""
    if not (REPO / "pyproject.toml").is_file():
        return _package_version()
    try:
        commit = _git("rev-parse", "--short=12", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", REPORTS)
        return commit + ("+dirty" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return _package_version()


def _package_version() -> str:
    """The commit an installed package was built from, which setuptools-scm puts in the
    version's local part (`0.1.devN+g<commit>`, `.d<date>` added when the tree was dirty);
    a package built without git history says its version alone."""
    version = metadata.version("ner-depth-study")
    local = version.partition("+")[2]
    if local.startswith("g"):
        commit, _, date = local[1:].partition(".")
        return commit + ("+dirty" if date.startswith("d") else "")
    return "ner-depth-study " + version


def _git(*args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
    )
    return out.stdout.strip()


def hardware() -> str:
    """Where the driver runs and what Ray sees, for the report's reproducibility block."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    caps = instruction_caps()
    if caps:
        text += f"; instructions capped by {', '.join(caps)}"
    try:
        import ray

        if ray.is_initialized():
            resources = ray.cluster_resources()
            nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
            text += (f"; Ray: {nodes} node(s), {resources.get('CPU', 0):g} CPUs, "
                     f"{resources.get('GPU', 0):g} GPUs")  # fmt: skip
    except Exception:  # noqa: BLE001 - a description, never a reason to stop
        pass
    return text


# the libraries a study's numbers depend on, whose versions the study run records
LIBRARIES = ("torch", "transformers", "ray", "optuna", "mlflow", "datasets", "scipy",
             "statsmodels", "numpy", "pandas")  # fmt: skip


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str]:
    """The installed version of each library (torch's with its build, e.g. 2.13.0+cpu), as
    resolved on the driver: the pyproject bounds allow a range, constraints.txt pins what was
    tested, and this says what actually ran. A library not installed reads 'absent'."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions
