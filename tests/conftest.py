"""Shared fixtures: a tiny saved model folder and tiny synthetic CoNLL corpora, made offline.

Nothing heavy is imported at the top (torch, transformers and MLflow come with the fixtures
that use them), so pytest reaches `pytest_configure` in a second or two and the default
tier's smoke study starts there, beside the imports of collection (tests/background_study.py).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from tests import background_study

PEOPLE = [["john", "smith"], ["mary"], ["john"]]
PLACES = [["paris"], ["new", "york"], ["london"], ["berlin"]]
ORGS = [["google"], ["acme", "corp"], ["united", "nations"]]
TEMPLATES = [
    ("PER", "lives", "in", "LOC"),
    ("PER", "works", "at", "ORG"),
    ("PER", "visited", "LOC", "."),
    ("the", "ORG", "is", "in", "LOC"),
]


def synthetic_sentences(n: int, seed: int) -> list[list[tuple[str, str]]]:
    """Template sentences whose entities a tiny model can learn in a few dozen steps."""
    rng = random.Random(seed)
    pools = {"PER": PEOPLE, "LOC": PLACES, "ORG": ORGS}
    out = []
    for _ in range(n):
        sentence = []
        for slot in rng.choice(TEMPLATES):
            if slot in pools:
                words = rng.choice(pools[slot])
                sentence += [(w, ("B-" if i == 0 else "I-") + slot) for i, w in enumerate(words)]
            else:
                sentence.append((slot, "O"))
        out.append(sentence)
    return out


# the synthetic types as another corpus names them: a label map renames two, and drops ORG's
OTHER_DOMAIN = {"PER": "person", "LOC": "place", "ORG": "company"}
OTHER_DOMAIN_MAP = {"person": "PER", "place": "LOC"}


def other_domain(sentences: list[list[tuple[str, str]]]) -> list[list[tuple[str, str]]]:
    rename = {f"{p}-{a}": f"{p}-{b}" for a, b in OTHER_DOMAIN.items() for p in "BI"}
    return [[(word, rename.get(tag, tag)) for word, tag in s] for s in sentences]


def write_conll(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    path.write_text("\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in sentences) + "\n")
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A whole study belongs to the slow tier, except the smoke study the default tier keeps:
    one rule here rather than a second marker on every study test."""
    for item in items:
        if item.get_closest_marker("study") and not item.get_closest_marker("smoke"):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config: pytest.Config) -> None:
    _named_tests_run(config)
    background_study.start_early(config)


def _named_tests_run(config: pytest.Config) -> None:
    """A test named by its node id runs whatever its tier (`pytest tests/x.py::test_y`): the
    default tier's `-m 'not slow'` (pyproject's addopts) would otherwise deselect a slow one
    and say only "1 deselected". Another marker expression on the command line still wins."""
    args = config.args
    if config.option.markexpr == "not slow" and args and all("::" in arg for arg in args):
        config.option.markexpr = ""


def pytest_collection_finish(session: pytest.Session) -> None:
    background_study.start_if_selected(session)


def pytest_unconfigure(config: pytest.Config) -> None:
    background_study.remove(config)


@pytest.fixture(autouse=True)
def _environment_restored():
    """Whatever a test's in-process code writes into os.environ (Ray's output-engine switch,
    a library's tracking URI) is undone before the next test, whose subprocesses would
    otherwise inherit it."""
    before = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(before)


@pytest.fixture
def hub_offline(monkeypatch):
    """The process as if started with HF_HUB_OFFLINE=1 (and HF_DATASETS_OFFLINE=1): no test
    reaches a hub, where one may answer. Both libraries read the variables once, at import, so
    the values they read are set too."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.fixture
def hub_unresolved(monkeypatch):
    """A machine whose resolver knows no hub host and that has no proxy: every name lookup
    fails at once, and the libraries are not told to stay offline. Yields the hub's host."""
    import socket
    from urllib.parse import urlparse

    import datasets.config
    import huggingface_hub.constants

    from trainables import hub

    def no_dns(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    for key in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    hub._resolves.cache_clear()  # asked once per process: not what another test saw
    yield urlparse(huggingface_hub.constants.ENDPOINT).hostname
    hub._resolves.cache_clear()


@pytest.fixture
def forget_modules():
    """Names of modules a test imports from its own temporary files (a report section of its
    making, say): forgotten after the test, so no later test finds them imported. The one
    place tests edit `sys.modules`."""
    names: list[str] = []
    yield names
    for name in names:
        sys.modules.pop(name, None)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from tests.tiny import tiny_model_folder

    return tiny_model_folder(tmp_path_factory.mktemp("model"), "bert", layers=3)


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("corpus")
    sizes = {"train": (96, 1), "dev": (24, 2), "test": (24, 3)}
    return {
        split: str(write_conll(folder / f"{split}.txt", synthetic_sentences(n, seed)))
        for split, (n, seed) in sizes.items()
    }


@pytest.fixture
def trial_settings(tiny_model, tiny_corpus) -> dict:
    """A complete trial config on the tiny model and corpus: ~2 s of training on 2 cores."""
    return {
        "model": str(tiny_model),
        "data": dict(tiny_corpus),
        "epochs": 2,
        "batch_size": 8,
        "lr": 1e-3,
        "eval_every": 6,
        "max_length": 32,
        "threads": 1,
        "seed": 3,
    }


@pytest.fixture(scope="session")
def finished_study(tmp_path_factory, tiny_model, tiny_corpus):
    """One whole study on a real Ray and MLflow store (about a minute), shared by the study,
    report, export and MLflow-UI tests, which only read it (a test that writes to a store
    works on a copy): (its folder, the finished driver process)."""
    from tests.study_helpers import run_study, write_study

    tmp = tmp_path_factory.mktemp("study")
    # extra eval sets (zero-shot transfer), scored by every trial at the end; `renamed` names
    # its types as another corpus does and comes with a label map
    renamed = write_conll(tmp / "renamed.txt", other_domain(synthetic_sentences(24, 4)))
    label_map = {"tag_map": OTHER_DOMAIN_MAP, "unseen": "as_o"}
    extra = {
        "shifted": {"conll": tiny_corpus["dev"]},
        "renamed": {"conll": str(renamed), **label_map},
    }
    data = {**tiny_corpus, "extra": extra}
    # the tiny random model's F1 is ~0: its dev loss is what differs between arms
    analysis = {"primary": "dev_loss", "margin": 0.01}
    study = write_study(tmp, str(tiny_model), tiny_corpus, data=data, analysis=analysis)
    # an override the MLflow record must show (the file says max_length 32 too)
    done = run_study(study, tmp, "--set", "fixed.max_length=32")
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, done
