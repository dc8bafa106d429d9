"""Every command the docs show runs as written: each example of a command's `--help`, each line of
a shell block in README.md and docs/*.md, and the README's inline `./with-venv ...` commands.

`WAYS` says, for each documented command, how it is exercised and what exit code it must give.
A command found in the docs and missing from `WAYS` fails the first test, and so does an entry
of `WAYS` the docs no longer show: nothing is skipped unsaid. The ways:

- as written: run in-process through the command's own `main` (a process would spend seconds
  on imports), in an empty folder with `HOME` there, or in the folder of the default tier's
  smoke study (tests/background_study.py: `ner_depth --profile smoke`, a `ner_depth` store)
  for commands that read a study's results; `./with-venv` is left off (these tests run in
  its environment), and placeholders (`RUN`, `URI`, `[--out DIR]`) are the smoke store's (a
  server in the slow tier answers on a copy of the shared finished study's store instead);
- dry run: `--dry-run` appended, where the command would train for minutes or hours, or join
  a cluster (the plan is made and the data read, nothing trained);
- tiny: overrides that make one trial train a few steps (`--set model=tiny ...`);
- help: `--help` of a benchmark, which measures for minutes (docs/benchmarks.md);
- collect: `pytest --collect-only` of a documented test selection, which then runs in its tier;
- elsewhere: a command of another program (ray, psql, mlflow server, pip) that a named test
  exercises as the docs mean it (checked to exist), or that needs a network.

The slow tier (`-m slow`) runs the tiny trials and the ways that need a process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import background_study
from tests.study_helpers import in_process

REPO = Path(__file__).resolve().parents[1]

SHELL_BLOCKS = {"bash", "sh", "shell", "console"}
IN_PROCESS = {
    "study.run": "study.run",
    "study.report": "study.report.__main__",
    "study.export": "study.export.__main__",
    "trainables": "trainables.__main__",
}
TINY = "--set model=tiny --set data_fraction=0.02 --set max_steps=4"


@dataclass(frozen=True)
class Way:
    """How one documented command is exercised: `run` is the command line run (None: see
    `test`), `expect` its exit code, `where` the folder it runs in ("empty": a fresh folder
    with HOME in it and a small CoNLL corpus at ~/ner and ~/conll; "store": the smoke
    study's folder), `slow` whether it runs in the slow tier."""

    how: str
    run: str | None
    why: str = ""
    expect: int = 0
    where: str = "empty"
    slow: bool = False
    test: str | None = None

    def __post_init__(self) -> None:
        if self.how == "tiny":  # a few steps of the tiny model take a minute or two under load
            object.__setattr__(self, "slow", True)


def written(command: str, **options) -> Way:
    return Way("as written", command.removeprefix("./with-venv "), **options)


THIRD_RUN = (
    "./with-venv python -m study.run ner_depth --set "
    "'seeds=[400,401,402,403,404,405,406,407,408,409]'"
)
CHECKPOINT_RUN = (
    "./with-venv python -m study.run ner_depth --set fixed.eval_test_each_time=true --set "
    "'seeds=[1000,1001,1002,1003,1004,1005]' --set phases.confirm.seeds=6 --set "
    "phases.confirm.max_seeds=6"
)


def dry(command: str, why: str, **options) -> Way:
    return Way("dry run", command.removeprefix("./with-venv ") + " --dry-run", why, **options)


def bench_help(command: str) -> Way:
    script = shlex.split(command.removeprefix("./with-venv "))[:2]
    return Way("help", " ".join(script) + " --help", "a benchmark measures for minutes to hours",
               slow=True)  # fmt: skip


def collect(command: str, why: str = "the selection runs in its own tier") -> Way:
    line = command.replace("./with-venv pytest", "python -m pytest --collect-only -q")
    return Way("collect", line, why, slow=True)


def elsewhere(test: str, why: str) -> Way:
    return Way("elsewhere", None, why, test=test)


STUDY_RUN = "tests/study/test_study_run.py"
CLUSTER = "tests/study/test_study_cluster.py"
SERVER = "tests/study/tracking/test_tracking_server.py"
S3 = "tests/study/execution/test_object_storage.py"
INSTALL = "tests/test_install.py::test_the_api_page_runs_the_smoke_study_from_an_empty_folder"
TIER = ".ci/run"
REGISTRY = (
    "tests/study/test_export.py::test_an_exported_confirm_trial_tags_the_test_set_as_the_trial_did"
)
LAYERS = "tests/study/report/test_report_layers.py::test_layer_sections_from_the_store_equal_comparing_in_memory"  # noqa: E501

WAYS: dict[str, Way] = {
    # --- python -m study.run --help
    "python -m study.run --list": written("python -m study.run --list"),
    "python -m study.run ner_depth --dry-run": written("python -m study.run ner_depth --dry-run"),
    "python -m study.run ner_depth --profile smoke": Way(
        "as written",
        None,
        "the default tier's smoke study is this command",
        test="tests/study/test_smoke_study.py::test_the_smoke_profile_runs_end_to_end",
    ),  # fmt: skip
    "python -m study.run ner_depth": dry(
        "python -m study.run ner_depth", "120 trial-epochs of MiniLM, an hour on a laptop"
    ),
    "python -m study.run ner_depth --resume": written(
        "python -m study.run ner_depth --resume",
        why="nothing to resume in an empty folder: one line, exit 2; a resume itself: " + STUDY_RUN,
        expect=2,
    ),
    "python -m study.run ner_depth --profile cluster --address auto --storage s3://bucket/x": dry(
        "python -m study.run ner_depth --profile cluster --address auto --storage s3://bucket/x",
        "needs a Ray cluster, GPUs and a bucket",
    ),
    "python -m study.run ~/ner/s.yaml --set fixed.epochs=5 --set data.train=~/ner/train.txt": dry(
        "python -m study.run ~/ner/s.yaml --set fixed.epochs=5 --set data.train=~/ner/train.txt",
        "trains MiniLM; ~/ner/s.yaml is README's study file",
    ),
    # --- python -m study.report --help
    "python -m study.report ner_depth --run-id RUN --out reports/x --tracking-uri URI": written(
        "python -m study.report ner_depth --run-id {RUN} --out reports/x --tracking-uri {URI}",
        where="store",
    ),
    "python -m study.report ner_depth": written("python -m study.report ner_depth", where="store"),
    "python -m study.report ner_reinit --layers": elsewhere(
        LAYERS, "a ner_reinit study keeping layer fingerprints is an hour; a store of them there"
    ),
    # --- python -m study.export --help
    "python -m study.export ner_depth --arm depth=full-1 --seed 3": written(
        "python -m study.export ner_depth --arm depth=full-1 --seed 3", where="store"
    ),
    "python -m study.export ner_depth --best --out models/best": written(
        "python -m study.export ner_depth --best --out models/best", where="store"
    ),
    "python -m study.export ner_depth --best --arm depth=full": written(
        "python -m study.export ner_depth --best --arm depth=full", where="store"
    ),
    "python -m study.export ner_depth --best --register ner-tagger": Way(
        "as written",
        None,
        "registering loads the tagger as a pipeline and saves it again",
        test=REGISTRY,
    ),  # fmt: skip
    # --- python -m trainables --help
    'python -m trainables --set lr=1.78e-4 --set "budget={steps: 630}" --set eval_every=53': Way(
        "tiny",
        'python -m trainables --set lr=1.78e-4 --set "budget={steps: 630}" --set eval_every=53 '
        + TINY,
        "630 steps of MiniLM are most of an hour",
    ),
    "python -m trainables --config trial.yaml --set seed=3 --metrics-out m.jsonl": Way(
        "tiny",
        "python -m trainables --config trial.yaml --set seed=3 --metrics-out m.jsonl",
        "trial.yaml holds the tiny settings",
    ),  # fmt: skip
    "python -m trainables --config trial.yaml --checkpoint-dir ckpt": Way(
        "tiny",
        "python -m trainables --config trial.yaml --checkpoint-dir ckpt",
        "trial.yaml holds the tiny settings",
    ),  # fmt: skip
    "python -m trainables --config trial.yaml --checkpoint-dir ckpt --resume": Way(
        "tiny",
        "python -m trainables --config trial.yaml --checkpoint-dir ckpt --resume",
        "after the line before it",
    ),  # fmt: skip
    # --- docs/benchmarks.md: the checkpoint run of bench/checkpoint_choice.py
    CHECKPOINT_RUN: dry(CHECKPOINT_RUN, "72 trial-epochs of MiniLM"),
    THIRD_RUN: dry(THIRD_RUN, "120 trial-epochs of MiniLM"),
    # --- README.md
    "./with-venv python -m study.run ner_depth": dry(
        "./with-venv python -m study.run ner_depth", "120 trial-epochs of MiniLM"
    ),
    "./with-venv pytest": elsewhere(TIER, "the default tier, which this test is part of"),
    "./with-venv pytest -m slow -n 2": elsewhere(TIER, "the slow tier, which this test is part of"),
    "./with-venv mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db --host 127.0.0.1 "
    "--port 5000 --workers 1": elsewhere(
        "tests/study/tracking/test_mlflow_ui.py::test_the_readme_command_serves_the_study",
        "a server: the UI tests run this line (a free port for 5000) on a finished study's store",
    ),  # fmt: skip
    "./with-venv python -m study.run ~/ner/s.yaml --dry-run": written(
        "python -m study.run ~/ner/s.yaml --dry-run"
    ),
    # --- docs/running.md
    "./with-venv python -m study.run ner_depth --profile smoke": Way(
        "as written",
        None,
        "the default tier's smoke study is this command",
        test="tests/study/test_smoke_study.py::test_the_smoke_profile_runs_end_to_end",
    ),  # fmt: skip
    "./with-venv python -m study.run ner_depth --dry-run": written(
        "python -m study.run ner_depth --dry-run"
    ),
    "./with-venv python -m study.run ner_heads --profile smoke": dry(
        "./with-venv python -m study.run ner_heads --profile smoke", "a few minutes of Ray"
    ),
    "pip install optuna-dashboard && optuna-dashboard sqlite:///outputs/optuna.db --host "
    "127.0.0.1": elsewhere(
        "tests/study/search/test_optuna_storage.py",
        "a package this project does not install; the storage it reads is the next line's",
    ),
    "python -c \"import optuna; print(optuna.get_all_study_names('sqlite:///outputs/optuna.db'))\"": Way(  # noqa: E501
        "as written",
        "python -c \"import optuna; print(optuna.get_all_study_names('sqlite:///outputs/optuna.db'))\"",  # noqa: E501
        where="store",
    ),
    # --- docs/statistics.md
    "./with-venv python -m study.report ner_depth [--run-id RUN] [--out DIR] [--tracking-uri URI]": written(  # noqa: E501
        "python -m study.report ner_depth --run-id {RUN} --out DIR --tracking-uri {URI}",
        where="store",
    ),
    # --- docs/study-files.md
    './with-venv python -m trainables --set depth=5 --set lr=1.78e-4 --set "budget={steps: 630}"': Way(  # noqa: E501
        "tiny",
        'python -m trainables --set depth=3 --set lr=1.78e-4 --set "budget={steps: 630}" ' + TINY,
        "630 steps of MiniLM are most of an hour; the tiny model has 4 blocks: depth 3",
    ),
    "./with-venv python -m trainables --config trial.yaml --checkpoint-dir ckpt/": Way(
        "tiny",
        "python -m trainables --config trial.yaml --checkpoint-dir ckpt/",
        "trial.yaml holds the tiny settings",
    ),  # fmt: skip
    "./with-venv python -m trainables --config trial.yaml --checkpoint-dir ckpt/ --resume": Way(
        "tiny",
        "python -m trainables --config trial.yaml --checkpoint-dir ckpt/ --resume",
        "after the line before it",
    ),  # fmt: skip
    "./with-venv python -m trainables --set model=models/ModernBERT-base --set depth=full-1 "
    '--set "reinit_heads=[[20, 3]]" --set freeze=embeddings': elsewhere(
        "tests/trainables/model/test_modernbert.py",
        "needs a ModernBERT-base folder; the same settings on the tiny ModernBERT there",
    ),
    "./with-venv python -m study.run ner_intermediate --set 'grid.intermediate=[[], [{name: "
    "conll, data: {train: ~/conll/train.txt, dev: ~/conll/dev.txt, test: ~/conll/test.txt}, "
    "epochs: 1}]]' --set 'compare.baseline.intermediate=[]'": dry(
        "./with-venv python -m study.run ner_intermediate --set 'grid.intermediate=[[], [{name: "
        "conll, data: {train: ~/conll/train.txt, dev: ~/conll/dev.txt, test: ~/conll/test.txt}, "
        "epochs: 1}]]' --set 'compare.baseline.intermediate=[]'",
        "trains MiniLM for an hour; ~/conll holds a small CoNLL corpus",
    ),
    './with-venv python -m trainables --set "intermediate=[{name: spans, data: {embedded: '
    'wnut16, untyped: true}, epochs: 1}]"': Way(
        "tiny",
        'python -m trainables --set "intermediate=[{name: spans, data: {embedded: '
        f'wnut16, untyped: true}}, epochs: 1}}]" {TINY}',
        "MiniLM on two stages is minutes",
    ),  # fmt: skip
    # --- docs/testing.md
    "./with-venv ruff check . && ./with-venv ruff format --check .": Way(
        "as written",
        "ruff check . && ruff format --check .",
        "in the checkout",
        where="checkout",
        slow=True,
    ),  # fmt: skip
    # --- docs/reliability.md
    "./with-venv pytest tests/study/fuzz tests/study/spec/test_limits.py": collect(
        "./with-venv pytest tests/study/fuzz tests/study/spec/test_limits.py"
    ),
    "FUZZ_RANDOM=1 FUZZ_EXAMPLES=20000 ./with-venv pytest tests/study/fuzz -p no:cacheprovider": (
        collect(
            "FUZZ_RANDOM=1 FUZZ_EXAMPLES=20000 ./with-venv pytest tests/study/fuzz "
            "-p no:cacheprovider",
            "20,000 examples take an hour",
        )  # fmt: skip
    ),
    "./with-venv pytest tests/study/test_input_costs.py -s": collect(
        "./with-venv pytest tests/study/test_input_costs.py -s"
    ),
    './with-venv pytest -m slow "tests/study/tracking/test_tracking_server.py::test_two_studies_'
    'outlive_two_crashes_of_their_server"': collect(
        './with-venv pytest -m slow "tests/study/tracking/test_tracking_server.py::test_two_'
        'studies_outlive_two_crashes_of_their_server"'
    ),
    "./with-venv pytest tests/study/execution/test_kill_soak.py": collect(
        "./with-venv pytest tests/study/execution/test_kill_soak.py"
    ),
    "./with-venv python bench/kill_soak.py --trials 2000 --arms 10 --kills 8 --seed 0 --nodes 2 "
    "--epochs 1 --step-s 0": bench_help("./with-venv python bench/kill_soak.py"),
    # --- docs/install.md
    "python3 -m venv .venv && . .venv/bin/activate": elsewhere(
        INSTALL, "a fresh venv and a non-editable install of the checkout, offline"
    ),
    "TORCH_CPU_INDEX=$(grep -o 'https://[^ ]*/whl/cpu' with-venv)": Way(
        "as written",
        "TORCH_CPU_INDEX=$(grep -o 'https://[^ ]*/whl/cpu' with-venv)",
        where="checkout",
        slow=True,
    ),  # fmt: skip
    'pip install -c constraints.txt --extra-index-url "$TORCH_CPU_INDEX" torch': elsewhere(
        "tests/test_lock.py", "a package index: the lock pins the torch it installs"
    ),
    "pip install -c constraints.txt .": elsewhere(
        INSTALL, "a non-editable install of the checkout, offline, against the lock's versions"
    ),
    # --- docs/cluster.md
    "export RAY_AUTH_MODE=token": elsewhere(CLUSTER, "a two-node Ray cluster with a token"),
    "export RAY_AUTH_TOKEN=$(ray get-auth-token --generate)": elsewhere(
        CLUSTER, "a two-node Ray cluster with a token"
    ),
    "ray start --head --port 6379": elsewhere(CLUSTER, "tests/ray_nodes.py starts the nodes"),
    "ray start --address HEAD_HOST:6379": elsewhere(CLUSTER, "tests/ray_nodes.py"),
    "python -m study.run ner_depth --profile cluster --address auto --storage "
    "s3://bucket/ner-depth --tracking-uri http://MLFLOW_HOST:5000": dry(
        "python -m study.run ner_depth --profile cluster --address auto --storage "
        "s3://bucket/ner-depth --tracking-uri http://MLFLOW_HOST:5000",
        "needs the cluster, the bucket and the server (" + CLUSTER + ")",
    ),
    'psql -c "CREATE ROLE mlflow LOGIN PASSWORD \'secret\'" -c "CREATE DATABASE mlflow OWNER '
    'mlflow"': elsewhere(SERVER, "tests/servers.py makes the role and database"),
    "mlflow server --backend-store-uri postgresql://mlflow:secret@DB_HOST:5432/mlflow "
    "--artifacts-destination ./mlartifacts --host 0.0.0.0 --port 5000": elsewhere(
        SERVER, "tests/mlflow_server.py starts it on PostgreSQL, on 127.0.0.1"
    ),
    "python -m study.run ner_depth ... --tracking-uri http://MLFLOW_HOST:5000": dry(
        "python -m study.run ner_depth --tracking-uri http://MLFLOW_HOST:5000",
        "'...' left out; the server itself: " + SERVER,
    ),
    "export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... AWS_DEFAULT_REGION=us-east-1": (
        elsewhere(S3, "moto's S3 server with its keys")
    ),
    "AWS_ENDPOINT_URL=http://S3_HOST:9000 python -m study.run ner_depth ... --storage "
    "s3://bucket/ner-depth": dry(
        "python -m study.run ner_depth --storage s3://bucket/ner-depth",
        "'...' left out; the bucket itself: " + S3,
    ),
    "python -m study.run ner_depth ... --storage "
    "'s3://bucket/ner-depth?endpoint_override=S3_HOST:9000&scheme=http'": dry(
        "python -m study.run ner_depth --storage "
        "'s3://bucket/ner-depth?endpoint_override=S3_HOST:9000&scheme=http'",
        "'...' left out; the bucket itself: " + S3,
    ),
}
BENCHES = [
    "trainable", "cpu_utilisation", "gradient_clipping", "dropout_masks", "bf16_matmul_modes",
    "onednn_isa_cap", "eval_batches", "concurrency", "study_overhead", "dynamics_overhead",
    "fingerprint_overhead", "layer_report", "scale", "kill_soak", "search_efficiency",
    "search_noise", "search_tabular", "trial_startup", "gpu_check", "checkpoint_choice",
]  # fmt: skip
for _name in BENCHES:
    WAYS[f"./with-venv python bench/{_name}.py"] = bench_help(f"python bench/{_name}.py")
for _line in (
    "./with-venv python bench/same_findings.py --a URI --b URI",
    "./with-venv python bench/search_efficiency.py --set search.lr.low=3e-05",
    "./with-venv python bench/search_efficiency.py --trainable synthetic",
    "./with-venv python bench/search_efficiency.py --grid-only --estimate --test-curves --set "
    "'fixed.budget={steps: 840}' --set fixed.precision=fp32",
    "./with-venv python bench/search_efficiency.py --grid-only --test-curves --set "
    "'fixed.budget={steps: 840}' --set fixed.precision=fp32",
    "./with-venv python bench/search_tabular.py --kept-only --range 1e-4 3e-4 --samples 3 "
    "--repetitions 1000",
    "./with-venv python bench/search_tabular.py --kept-only --range 1e-4 3e-4 --samples 6 "
    "--repetitions 1000",
    "./with-venv python bench/scale.py --sizes 100x10,1000x10 --stores sqlite,postgres",
    "./with-venv python bench/scale.py --sizes 10000x10 --stores sqlite",
):
    WAYS[_line] = bench_help(_line)


# --- what the docs show ----------------------------------------------------------------------


def _shell_lines(block: str) -> list[str]:
    """A shell block's commands: continuation lines joined (a trailing backslash, or a quote
    still open), whole-line comments and trailing `# ...` comments dropped."""
    commands, pending = [], ""
    for raw in block.splitlines():
        line = raw.strip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip() if pending else line
        try:
            shlex.split(line, comments=True)
        except ValueError:  # a quote open across lines
            pending = line + " "
            continue
        pending = ""
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


def doc_commands() -> set[str]:
    """Every command in a shell block of README.md and docs/*.md, and README's inline
    `./with-venv ...` ones."""
    found: set[str] = set()
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for block in re.finditer(r"^([ \t]*)```(\w*)\n(.*?)^[ \t]*```", text, re.S | re.M):
            if block.group(2) in SHELL_BLOCKS:
                found.update(_shell_lines(block.group(3)))
    readme = re.sub(r"```.*?```", "", (REPO / "README.md").read_text(), flags=re.S)
    found.update(re.findall(r"`(\./with-venv [^`]+)`", " ".join(readme.split())))
    return found


def help_commands() -> set[str]:
    """The examples of every command's --help (docs/cli.md is those help texts)."""
    from study.cli_docs import _parsers

    found: set[str] = set()
    for _module, _script, parser in _parsers():
        text = parser().format_help()
        examples = text.split("examples:\n", 1)[1].split("\n\n", 1)[0]
        found.update(re.sub(r"\s+#\s.*$", "", line).strip() for line in examples.splitlines())
    return found - {""}


def test_every_documented_command_has_a_way():
    documented = doc_commands() | help_commands()
    assert len(documented) > 60, sorted(documented)
    missing = sorted(documented - set(WAYS))
    assert not missing, "documented but not exercised (add a line to WAYS):\n" + "\n".join(missing)
    stale = sorted(set(WAYS) - documented)
    assert not stale, "in WAYS but no longer documented:\n" + "\n".join(stale)
    for command, way in WAYS.items():
        assert way.run or way.test, command
        if way.test:
            path, _, name = way.test.partition("::")
            assert (REPO / path).exists(), way.test
            assert not name or f"def {name}(" in (REPO / path).read_text(), way.test
        if way.how != "as written":
            assert way.why, f"{command}: say why it is not run as written"


def test_the_smoke_study_is_the_documented_command():
    assert ("python", *background_study.SMOKE_COMMAND[:5]) == (
        "python", "-m", "study.run", "ner_depth", "--profile", "smoke"
    )  # fmt: skip


# --- running them ----------------------------------------------------------------------------

CONLL = "John B-PER\nlives O\nin O\nParis B-LOC\n.\tO\n\nMary B-PER\nvisits O\nBerlin B-LOC\n"


@pytest.fixture
def empty_home(tmp_path, monkeypatch, hub_offline):
    """An empty working folder with HOME in it: ~/ner/s.yaml is README's study file beside a
    small CoNLL corpus, ~/conll another corpus, and trial.yaml the tiny trial's settings."""
    home = tmp_path / "home"
    for folder in (home / "ner", home / "conll"):
        folder.mkdir(parents=True)
        for split in ("train", "dev", "test"):
            (folder / f"{split}.txt").write_text(CONLL.replace("\t", " "))
    readme = (REPO / "README.md").read_text()
    study = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert study.startswith("# ~/ner/s.yaml")
    (home / "ner" / "s.yaml").write_text(study)
    work = tmp_path / "work"
    work.mkdir()
    (work / "trial.yaml").write_text(
        "model: tiny\ndata: {embedded: wnut16}\ndata_fraction: 0.02\nmax_steps: 4\neval_every: 2\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)  # offline (hub_offline): the cluster profile's hub data is unread
    return work


def _in_process(line: str) -> tuple[int, str, str]:
    """A `python -m MODULE ...` or `python -c CODE` line run in this process."""
    argv = shlex.split(line)
    if argv[:2] == ["python", "-c"]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(argv[2], "<documented>", "exec"), {"__name__": "__main__"})  # noqa: S102
        return 0, out.getvalue(), err.getvalue()
    assert argv[:2] == ["python", "-m"] and argv[2] in IN_PROCESS, line
    module = __import__(IN_PROCESS[argv[2]], fromlist=["main"])
    done = in_process(module.main, argv[3:])
    return done.returncode, done.stdout, done.stderr


def _default_tier(where: str) -> list[tuple[str, Way]]:
    return [
        (command, way)
        for command, way in WAYS.items()
        if way.run and not way.slow and way.where == where
    ]


def test_commands_that_need_no_study(empty_home):
    """Every default-tier way that runs in an empty folder, in the order of WAYS (a resume
    after its checkpoint)."""
    failed = []
    for command, way in _default_tier("empty"):
        started = time.monotonic()
        code, out, err = _in_process(way.run)
        print(f"{time.monotonic() - started:5.1f} s  exit {code}  {way.run}")  # with -s
        if code != way.expect:
            failed.append(f"{command}\n  ran: {way.run}\n  exit {code}: {err.strip()[-500:]}")
    assert not failed, "\n".join(failed)
    assert not (empty_home / "outputs" / "mlflow.db").exists()  # dry runs and refusals


@pytest.fixture(scope="module")
def smoke_store(request) -> Path:
    """The folder of the smoke study that the default tier runs in the background (started
    here when this runs without it), once it has finished."""
    study = background_study.started(request.config)
    done = study.wait(timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return study.folder


def _store_values(folder: Path) -> dict[str, str]:
    from mlflow import MlflowClient

    uri = f"sqlite:///{folder / 'outputs' / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("ner_depth")
    [run] = client.search_runs([experiment.experiment_id], "tags.run_kind = 'study'")
    return {"URI": uri, "RUN": run.info.run_id}


def test_commands_against_the_smoke_store(smoke_store, monkeypatch):
    """The commands that read a study's results, on a `ner_depth` store: the issue's
    `study-export ner_depth --arm depth=full-1 --seed 2` among them, with its provenance."""
    monkeypatch.chdir(smoke_store)
    values = _store_values(smoke_store)
    failed = []
    for command, way in _default_tier("store"):
        line = way.run.format(**values)
        code, out, err = _in_process(line)
        if code != way.expect:
            failed.append(f"{command}\n  ran: {line}\n  exit {code}: {err.strip()[-500:]}")
    assert not failed, "\n".join(failed)
    code, out, err = _in_process("python -m study.export ner_depth --arm depth=full-1 --seed 2")
    assert code == 0, err
    exported = smoke_store / "models" / "ner_depth" / "depth=3,data_fraction=0.05-seed2"
    facts = json.loads((exported / "provenance.json").read_text())
    assert (facts["study"], facts["seed"], facts["arm"]) == ("ner_depth", 2, exported.name[:-6])
    assert (smoke_store / "reports" / "x" / "README.md").is_file()
    assert (smoke_store / "DIR" / "README.md").is_file()


# --- the slow tier: what needs a process ------------------------------------------------------


@pytest.mark.slow
def test_tiny_trials(empty_home):
    """The documented single trials, each a few steps of the tiny model, in the order of WAYS
    (a resume after its checkpoint)."""
    failed = []
    for command, way in WAYS.items():
        if way.how == "tiny":
            code, _out, err = _in_process(way.run)
            if code != way.expect:
                failed.append(f"{command}\n  ran: {way.run}\n  exit {code}: {err.strip()[-500:]}")
    assert not failed, "\n".join(failed)
    assert (empty_home / "m.jsonl").is_file() and (empty_home / "ckpt").is_dir()


def _slow_process_ways() -> list[str]:
    """The documented commands of the ways that need a process, one for each distinct line run
    there: several documented commands of one benchmark run as the same `--help` (five of
    bench/search_efficiency.py, two each of bench/scale.py and bench/kill_soak.py), which one
    process checks."""
    first: dict[tuple, str] = {}
    for command, way in WAYS.items():
        if way.run and way.slow and way.how != "tiny":
            first.setdefault((way.how, way.run, way.where, way.expect), command)
    return list(first.values())


@pytest.mark.slow
@pytest.mark.parametrize("command", _slow_process_ways())
def test_commands_that_need_a_process(command, tmp_path):
    way = WAYS[command]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cwd = {"checkout": REPO, "empty": tmp_path}.get(way.where)
    line = way.run.replace("python ", f"{sys.executable} ", 1)
    assert way.where != "store", "the slow tier has no smoke store: read the finished study's"
    if way.how == "collect":
        assignments = re.match(r"((?:\w+=\S+ )*)(.*)", way.run)  # the line as documented
        env.update(dict(a.split("=", 1) for a in assignments.group(1).split()))
        line = assignments.group(2).replace("python -m pytest", f"{sys.executable} -m pytest")
    cwd = REPO if way.how in ("collect", "help") else cwd
    done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == way.expect, (line, done.stdout[-2000:], done.stderr[-2000:])
