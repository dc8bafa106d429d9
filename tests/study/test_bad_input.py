"""Every kind of bad input the issue lists, through the real command line: one line on stderr
that names the file, field or value at fault, a non-zero exit, and nothing written to MLflow,
the Ray results folder or the reports folder.

The cases whose meaning depends on a fresh process run as a real `python -m study.run` (about
ten seconds each, mostly imports): the hub told it is offline before it is imported, a Ray
address joined, and one file error as a user meets it. The others call the same entry point,
`study.run.main`, in-process with stdout and stderr captured (the fuzz tests' way), where an
escaping exception is the traceback a user would see.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from servers import free_port  # bench/servers.py: a port nothing listens on
from transformers import AutoConfig

from tests.study_helpers import REPO, run_in_process, study_command, write_study
from tests.tiny import tiny_model_folder
from trainables.settings.precision import FORCE_ENV

Case = Callable[[Path, dict], tuple[list[str], str | list[str]]]
INF = float("inf")  # YAML's .inf


def _edit(study: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = study
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value


def _write_file(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


def _study_with(tmp: Path, base: dict, **edits) -> Path:
    study = yaml.safe_load(yaml.safe_dump(base))
    for dotted, value in edits.items():
        _edit(study, dotted.replace("__", "."), value)
    path = tmp / "teststudy.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def _data_case(split: str, text: str, expected: Callable[[str], str]) -> Case:
    def case(tmp: Path, base: dict):
        path = _write_file(tmp, f"bad_{split}.txt", text)
        return [str(_study_with(tmp, base, **{f"data__{split}": path}))], expected(path)

    return case


def _edit_case(expected: str, **edits) -> Case:
    return lambda tmp, base: ([str(_study_with(tmp, base, **edits))], expected)


def _not_an_encoder(tmp: Path, base: dict):
    folder = tmp / "gpt2"
    AutoConfig.for_model("gpt2", n_layer=2).save_pretrained(folder)
    expected = ["model type 'gpt2' is not supported", "supported: bert, ", "modernbert"]
    return [str(_study_with(tmp, base, model=str(folder)))], expected


def _modernbert_head_outside(tmp: Path, base: dict):
    model = tiny_model_folder(tmp, "modernbert", layers=3)  # 4 heads, read from config.json
    study = _study_with(tmp, base, model=str(model), fixed__reinit_heads=[[0, 4]])
    return [str(study)], "fixed.reinit_heads[0][1]: 4 is not allowed: the model has 4 heads"


def _label_map_case(rules: dict, expected: str, at: str | None = None) -> Case:
    """An extra set with label `rules`; where `at` is given (a line of the written study file),
    the error starts at that line, `teststudy.yaml:N: `, though only the data, once read,
    shows the map wrong."""

    def case(tmp: Path, base: dict):
        extra = {"other": {"conll": base["data"]["dev"], **rules}}
        path = _study_with(tmp, base, data__extra=extra)
        if at is None:
            return [str(path)], expected
        line = [text.strip() for text in path.read_text().splitlines()].index(at) + 1
        return [str(path)], [f"teststudy.yaml:{line}: {expected}"]

    return case


def _offline_dataset(tmp: Path, base: dict):
    source = {"hf": "no-such-user/no-such-ner-dataset", "split": "train"}
    path = _study_with(tmp, base, data__train=source)
    return [str(path)], ["data.train.hf: cannot load dataset 'no-such-user/no-such-ner-dataset'"]


def _yaml_syntax(tmp: Path, base: dict):
    lines = yaml.safe_dump(base, sort_keys=False).splitlines()
    line = lines.index("max_failures: 0") + 1
    lines[line - 1] = "max_failures: 0: 1"  # a second colon: a mapping value where none may be
    path = _write_file(tmp, "teststudy.yaml", "\n".join(lines) + "\n")
    return [path], f"teststudy.yaml:{line}:16: YAML syntax error: mapping values are not allowed"


def _unreachable_address(tmp: Path, base: dict):
    address = f"127.0.0.1:{free_port()}"
    return [str(_study_with(tmp, base)), "--address", address], (
        f"cannot start or reach --address {address}: nothing answers there"
    )


def _tracking_server_down(tmp: Path, base: dict):
    url = f"http://127.0.0.1:{free_port()}"
    study = str(_study_with(tmp, base))
    return [study, "--tracking-uri", url], f"MLflow tracking server {url} is not reachable"


def _unwritable_storage(tmp: Path, base: dict):
    blocker = Path(_write_file(tmp, "a_file", "not a folder\n"))
    study = str(_study_with(tmp, base))
    return [study, "--storage", str(blocker / "results")], f"--storage {blocker}/results is not"


def _unknown_study(tmp: Path, base: dict):
    return ["no_such_study"], ["unknown study 'no_such_study'", "ner_depth"]


def _unknown_profile(tmp: Path, base: dict):
    study = _study_with(tmp, base, profiles={"smoke": {"seeds": 1}})
    return [
        str(study),
        "--profile",
        "huge",
    ], "profiles: no profile 'huge' in this file; profiles: smoke"


def _override_case(override: str, expected: str) -> Case:
    return lambda tmp, base: ([str(_study_with(tmp, base)), "--set", override], expected)


def _relative_data_path(tmp: Path, base: dict):
    """A path in a study file means the file's folder, wherever the command runs (here the
    repository); the error names the path it looked for."""
    study = _study_with(tmp, base, data__test="bad.txt")
    return [str(study)], f"error: {tmp}/bad.txt: file not found"


SPANS = {"name": "spans", "data": {"embedded": "wnut16", "untyped": True}}


def _stage_case(expected: str, **stage) -> Case:
    return _edit_case(expected, fixed__intermediate=[{**SPANS, **stage}])


def _stage_not_bio(tmp: Path, base: dict):
    bad = _write_file(tmp, "bad_stage.txt", "john\tB-PER\nsmith\tE-PER\n")
    stage = {"name": "bad", "data": {**base["data"], "train": bad}}
    expected = f"intermediate stage 'bad': {bad}:2: tag 'E-PER' is not in the BIO/IOB2 scheme"
    return [str(_study_with(tmp, base, fixed__intermediate=[stage]))], expected


def _unknown_surface_option(tmp: Path, base: dict):
    """Checked before the synthetic study's other refusals (it would read no model or data)."""
    study = _study_with(tmp, base, trainable={"synthetic": {"noize": 0.02}})
    line = study.read_text().splitlines().index("    noize: 0.02") + 1
    return [str(study)], (
        f"{study}:{line}: trainable.synthetic.noize: unknown key 'noize' for the synthetic "
        "surface (did you mean 'noise'?); known keys: layers, heads, best_lr"
    )


CASES: dict[str, Case] = {
    "malformed CoNLL line": _data_case(
        "train", "john\tB-PER\nlives\n", lambda p: f"{p}:2: expected at least 2 columns"
    ),
    "empty split": _data_case("dev", "\n\n", lambda p: f"{p}: no sentences found"),
    "tag unseen in training": _data_case(
        "dev", "john\tB-PER\n\nacme\tB-WEAPON\n", lambda p: f"{p}:3: tag 'B-WEAPON' in the dev"
    ),
    "tag scheme not BIO": _data_case(
        "test", "john\tB-PER\nsmith\tE-PER\n", lambda p: f"{p}:2: tag 'E-PER' is not in the BIO"
    ),
    "unknown study": _unknown_study,
    "unknown profile": _unknown_profile,
    "unknown factor": _edit_case(
        "grid.dpeth: unknown factor 'dpeth' (did you mean 'depth'?)", grid__dpeth=[1, 2]
    ),
    "depth above layers": _edit_case(
        "grid.depth[1]: 7 is not allowed: the model has 3 layers", grid__depth=["full", 7]
    ),
    "depth below one": _edit_case("grid.depth[0]: 0 is not allowed", grid__depth=[0, "full"]),
    "unknown primary metric": _edit_case(
        "analysis.primary: 'dev_lossy' is not allowed: one of test_f1",
        analysis__primary="dev_lossy",
    ),
    "negative margin": _edit_case(
        "analysis.margin: -0.5 is not allowed: a margin >= 0", analysis__margin=-0.5
    ),
    "max_seeds below seeds": _edit_case(
        "phases.confirm.max_seeds: 1 is not allowed: a count >= seeds (2)",
        phases__confirm__max_seeds=1,
    ),
    "overlapping seed lists": _edit_case(
        "phases.confirm.seeds: [1, 2] is not allowed: seeds [1] also ran in explore",
        phases__explore__seeds=[0, 1],
        phases__confirm__seeds=[1, 2],
    ),
    "tag_map target not in training": _label_map_case(
        {"tag_map": {"PER": "PERSON"}},
        "data.extra.other.tag_map.PER: 'PERSON' is not allowed: training has the types LOC, "
        "ORG, PER; did you mean 'PER'?",
        at="PER: PERSON",
    ),
    "tag_map type the set lacks": _label_map_case(
        {"tag_map": {"GPE": "LOC"}},
        "data.extra.other.tag_map.GPE: 'GPE' is not allowed: the set has no entities of that "
        "type (its types: LOC, ORG, PER)",
        at="GPE: LOC",
    ),
    "unseen another value": _label_map_case(
        {"unseen": "drop"}, "data.extra.other.unseen: 'drop' is not allowed: one of error, as_o"
    ),
    "reinit k out of range": _edit_case(
        "fixed.reinit_from: 4 is not allowed: the model has 3 layers", fixed__reinit_from=4
    ),
    "fingerprint cap not a size": _edit_case(
        "fixed.fingerprint_max_bytes: '20 parsecs' is not allowed: expected a size such as 20MB",
        fixed__fingerprint_max_bytes="20 parsecs",
    ),
    "fingerprint in the grid": _edit_case(
        "grid.fingerprint: 'fingerprint' is one per study: set it under fixed (it changes what "
        "a trial records, not what it learns)",
        grid__fingerprint=[True, False],
    ),
    "distribution low >= high": _edit_case(
        "search.lr.low: 0.5 is not allowed: low must be below high",
        search__lr={"type": "uniform", "low": 0.5, "high": 0.1},
    ),
    "loguniform low <= 0": _edit_case(
        "search.lr.low: 0.0 is not allowed: a loguniform low must be > 0",
        search__lr={"type": "loguniform", "low": 0.0, "high": 0.1},
    ),
    "model path missing": lambda tmp, base: (
        [str(_study_with(tmp, base, model=str(tmp / "no-such-model")))],
        ["model: ", "no-such-model", "does not exist"],
    ),
    "model not an encoder": _not_an_encoder,
    "ModernBERT head outside its heads": _modernbert_head_outside,
    "dataset name offline": _offline_dataset,
    "YAML syntax error": _yaml_syntax,
    "unreachable --address": _unreachable_address,
    "storage not writable": _unwritable_storage,
    "MLflow server down": _tracking_server_down,
    "tracking URI in a missing folder": lambda tmp, base: (
        [str(_study_with(tmp, base)), "--tracking-uri", f"sqlite:///{tmp}/no-such/m.db"],
        f"MLflow tracking URI sqlite:///{tmp}/no-such/m.db: {tmp}/no-such/m.db: {tmp}/no-such "
        "does not exist (make it first)",
    ),
    "override of an unknown top-level key": _override_case(
        "fixd.lr=1e-4", "--set fixd.lr=1e-4: fixd: unknown key 'fixd' (did you mean 'fixed'?)"
    ),
    "override of epochs beside a budget": lambda tmp, base: (
        [str(_study_with(tmp, base, fixed__budget={"steps": 40})), "--set", "fixed.epochs=5"],
        "--set fixed.epochs=5: fixed.epochs: 5 has no effect: the budget {'steps': 40} decides",
    ),
    "override of an unknown key": _override_case(
        "fixed.epohcs=5",
        "--set fixed.epohcs=5: fixed.epohcs: unknown factor 'epohcs' (did you mean 'epochs'?)",
    ),
    "override of the wrong type": _override_case(
        "fixed.epochs=abc",
        "--set fixed.epochs=abc: fixed.epochs: 'abc' is not allowed: epochs takes an integer",
    ),
    "override without a value": _override_case("fixed.epochs", "--set fixed.epochs: expected"),
    "data path relative to the study file": _relative_data_path,
    "stage without data": _edit_case(
        "fixed.intermediate[0]: data is missing: each stage trains on its own data",
        fixed__intermediate=[{"name": "spans", "epochs": 1}],
    ),
    "stage tags not BIO": _stage_not_bio,
    "probe on a stage": _stage_case(
        "fixed.intermediate[0].probe: not allowed in a stage: probe applies to the target stage "
        "only",
        probe=True,
    ),
    "unknown stage key": _stage_case(
        "fixed.intermediate[0].ephocs: unknown stage key 'ephocs' (did you mean 'epochs'?)",
        ephocs=1,
    ),
    "unknown synthetic surface option": _unknown_surface_option,
    "budget patience above max_epochs": _edit_case(
        "fixed.budget.until_plateau.patience: 5 is not allowed: dev is evaluated once per epoch, "
        "so patience may be at most max_epochs (3)",
        fixed__budget={"until_plateau": {"patience": 5, "max_epochs": 3}},
    ),
    "Optuna storage not a URL": lambda tmp, base: (
        [str(_study_with(tmp, base)), "--optuna-storage", "optuna.db"],
        "--optuna-storage optuna.db: not a database URL",
    ),
    # what a trial would refuse, refused before any trial runs
    "metric no evaluation reports": _edit_case(
        "metric.name: no evaluation reports 'dev_f1x' (did you mean 'dev_f1'?); every "
        "evaluation of the tagger reports dev_f1, dev_precision, dev_recall",
        metric={"name": "dev_f1x", "mode": "max"},
    ),
    "infinite lr, fixed": _edit_case(
        "fixed.lr: inf is not allowed: expected a finite number", search=None, fixed__lr=INF
    ),
    "infinite lr in a search range": _edit_case(
        "search.lr.high: inf is not allowed: a finite number",
        search__lr={"type": "loguniform", "low": 1.0e-5, "high": INF},
    ),
    "lr 1e400 in the search's choices": _override_case(
        "search.lr.choices=[1.0e-6, 1e400]",
        "--set search.lr.choices=[1.0e-6, 1e400]: search.lr.choices[1]: inf is not allowed: "
        "expected a finite number",
    ),
    "max_length beyond the model's positions": _edit_case(
        "fixed.max_length: 100000 is not allowed: the model reads at most 128 sub-words at once",
        fixed__max_length=100000,
    ),
    "seed beyond torch's": _edit_case(
        "seeds[0]: 99999999999999999999 is not allowed: a seed: an integer in "
        "0..9223372036854775807",
        seeds=[99999999999999999999, 1, 2, 3],
    ),
    "more CPUs than the local Ray has": _edit_case(
        "resources.cpu: 1e+308 is not allowed: one trial would hold more CPUs than the local Ray "
        "has (2, from --num-cpus 2), so none could ever start; at most 2",
        resources__cpu=1.0e308,
    ),
    "more GPUs than this machine has": _edit_case(
        "resources.gpu: 1000 is not allowed: one trial would hold more GPUs than the local Ray "
        "has (",
        resources__gpu=1000,
    ),
    "device cuda without a GPU": _edit_case(
        "fixed.device: 'cuda' is not allowed: device cuda trains on a GPU, and the local Ray "
        "finds none on this machine",
        fixed__device="cuda",
    ),
    "device cuda among a grid factor's values without a GPU": _edit_case(
        "grid.device: ['cpu', 'cuda'] is not allowed: device cuda trains on a GPU",
        grid__device=["cpu", "cuda"],
    ),
    "bf16 on a CPU without it": _edit_case(
        "precision=bf16 needs a CPU with native bf16 (AVX-512 BF16 or AMX), and this machine's "
        "CPU, where the trials of a local study run, has neither",
        fixed__precision="bf16",
    ),
}
# The machine a case stands in for: a CPU without native bf16 (trainables/settings/precision.py's
# forced answer), or no GPU (Ray, as torch, then finds none, also on a machine that has one)
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}
CASE_ENV = {
    "bf16 on a CPU without it": {FORCE_ENV: "0"},
    "device cuda without a GPU": NO_GPU,
    "device cuda among a grid factor's values without a GPU": NO_GPU,
}


@pytest.fixture(scope="module")
def base_study(tmp_path_factory, tiny_model, tiny_corpus) -> dict:
    folder = tmp_path_factory.mktemp("base")
    return yaml.safe_load(write_study(folder, str(tiny_model), tiny_corpus).read_text())


# The cases run as a process of their own: an offline hub must be offline from its import, a
# failed Ray join leaves a process's Ray state behind, and one case keeps the whole path honest.
IN_A_PROCESS = {"dataset name offline", "unreachable --address", "YAML syntax error"}


def _run_as_a_process(command: list[str], env_extra: dict[str, str]) -> tuple[int, str]:
    # offline, as on an air-gapped node: a dataset name must fail at once, not retry a hub
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **env_extra}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stderr


def _run_in_process(command: list[str], env_extra: dict[str, str], monkeypatch) -> tuple[int, str]:
    for key, value in env_extra.items():
        monkeypatch.setenv(key, value)
    code, _, stderr = run_in_process(command)
    return code, stderr


@pytest.mark.parametrize(
    "name",  # a case in a process of its own is in the slow tier (tests/conftest.py)
    [
        pytest.param(name, marks=[pytest.mark.study] if name in IN_A_PROCESS else [])
        for name in CASES
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(name, tmp_path, base_study, monkeypatch):
    args, expected = CASES[name](tmp_path, base_study)
    command = study_command(Path(args[0]), tmp_path, *args[1:])
    env_extra = CASE_ENV.get(name, {})
    if name in IN_A_PROCESS:
        code, stderr = _run_as_a_process(command, env_extra)
    else:
        code, stderr = _run_in_process(command, env_extra, monkeypatch)

    assert code == 2, (code, stderr[-2000:])
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[-2000:]
    for part in [expected] if isinstance(expected, str) else expected:
        assert part in lines[0], (part, lines[0])
    assert not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path / "mlartifacts").exists()
    assert not (tmp_path / "reports").exists()
    results = tmp_path / "ray_results"
    assert not results.exists() or not any(results.iterdir())


HUB_MODEL = "no-such-org/no-such-model"  # a hub id in no cache


@pytest.fixture
def hub_out_of_reach(monkeypatch):
    """The hub's host does not resolve, as on this machine and an air-gapped node (patched, so
    that a machine that reaches the hub reads the same)."""
    monkeypatch.setattr("trainables.hub.unreachable_host", lambda: "hub.invalid")


def test_a_hub_model_it_cannot_read_is_refused_before_ray_starts(
    tmp_path, base_study, hub_out_of_reach, monkeypatch
):
    """Reading the study file asks only the cache for a hub id; the run asks again before it
    writes anything, and refuses the model at its line, rather than failing every trial."""
    command = study_command(_study_with(tmp_path, base_study, model=HUB_MODEL), tmp_path)
    code, stderr = _run_in_process(command, {}, monkeypatch)
    assert code == 2, stderr[-2000:]
    (line,) = stderr.strip().splitlines()
    assert line.startswith("error: ") and f"model: cannot read the config of '{HUB_MODEL}'" in line
    assert "hub.invalid does not resolve here" in line, line
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray_results").exists()


def test_dry_run_says_a_hub_model_out_of_reach_is_unread(tmp_path, base_study, hub_out_of_reach):
    study = _study_with(tmp_path, base_study, model=HUB_MODEL)
    code, stdout, _ = run_in_process(study_command(study, tmp_path, "--dry-run"))
    assert code == 0
    assert f"model: {HUB_MODEL}, not read here (not in the Hugging Face cache" in stdout, stdout
    local = run_in_process(study_command(_study_with(tmp_path, base_study), tmp_path, "--dry-run"))
    assert "model: " in local[1] and "layers" in local[1], local[1]
