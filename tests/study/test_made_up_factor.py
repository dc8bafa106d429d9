"""A new factor is one field (issue 50, item 2): a made-up setting, `head_std`, added to a copy of
`TrialConfig` with its traits and nothing else, is known to the study file's checks, the dry
run, the trial-settings reference and the report's tuning table, and is part of the model's
`Architecture`, with no other file changed (docs/design.md, "Where a change lands today").

The copy is made in a fresh interpreter: an import hook compiles trainables/settings/config.py
with the field's line added before the class's first method, and every other module is read
from its file as it stands, so whatever still lists the settings by hand fails here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.study_helpers import REPO, study_command, write_synthetic_study

SURFACE = {"layers": 3, "steps_per_epoch": 4}

FIELD = (
    "    head_std: float = setting(0.02, NUMBER, \"standard deviation of the head's initial "
    'weights", bound="> 0", model=True, tunable=True)\n'
)

CHILD = """
import importlib.machinery, io, contextlib, json, sys, types
CONFIG = sys.argv[1]
FIELD = sys.argv[2]
ANCHOR = "    @classmethod\\n    def field_names"


class Copy(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):
        source = open(CONFIG).read()
        assert source.count(ANCHOR) == 1, "TrialConfig's first method moved"
        return compile(source.replace(ANCHOR, FIELD + "\\n" + ANCHOR), CONFIG, "exec")


class Finder:
    def find_spec(self, name, path, target=None):
        if name == "trainables.settings.config":
            return importlib.util.spec_from_file_location(name, CONFIG, loader=Copy(name, CONFIG))
        return None


import importlib.util
sys.meta_path.insert(0, Finder())

from trainables.settings import TUNABLE, TrialConfig
from trainables.settings.reference import reference_markdown
from study.report import tuning
from study.run import main

out = {}
arch = TrialConfig.from_dict({"head_std": 0.05}).architecture()
out["architecture"] = arch.head_std
try:
    TrialConfig.from_dict({"head_std": 0})
except Exception as err:
    out["refused"] = str(err)
out["row"] = [line for line in reference_markdown().splitlines() if "`head_std`" in line]
record = types.SimpleNamespace(plan={"fixed": {"head_std": 0.05, "seed": 1}}, searched=[])
out["tuning"] = tuning.settings(record)
for name, argv in json.loads(sys.argv[3]).items():
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    out[name] = [code, stdout.getvalue(), stderr.getvalue()]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def known(tmp_path_factory) -> dict:
    """What the copy of the settings with `head_std` makes of it, everywhere."""
    tmp = tmp_path_factory.mktemp("factor")
    runs = {}
    for name, study in {
        "grid": {"grid": {"depth": ["full", "full-1"], "head_std": [0.02, 0.05]}},
        "bad": {"fixed": {"epochs": 3, "lr": 5.0e-5, "head_std": "wide"}},
        "low": {"fixed": {"epochs": 3, "lr": 5.0e-5, "head_std": -1.0}},
    }.items():
        folder = tmp / name
        folder.mkdir()
        path = write_synthetic_study(folder, SURFACE, **study)
        command = study_command(path, folder, "--dry-run")
        runs[name] = command[command.index("study.run") + 1 :]
    config = REPO / "trainables" / "settings" / "config.py"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(config), FIELD, json.dumps(runs)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_trial_builds_its_model_from_it_and_checks_its_bound(known):
    assert known["architecture"] == 0.05
    assert "head_std=0 is not allowed: expected > 0" in known["refused"]


def test_the_study_file_takes_it_as_a_factor_and_the_dry_run_plans_its_arms(known):
    code, out, err = known["grid"]
    assert code == 0, err
    assert "head_std=0.02" in out and "head_std=0.05" in out


def test_the_study_file_refuses_a_bad_value_at_its_line(known):
    code, _, err = known["bad"]
    assert code == 2 and "fixed.head_std: 'wide' is not allowed" in err, err
    assert err.count("error:") == 1
    code, _, err = known["low"]
    assert code == 2 and "fixed.head_std: -1.0 is not allowed: expected > 0" in err, err


def test_the_reference_and_the_tuning_table_know_it(known):
    [row] = known["row"]
    assert row.startswith("| `head_std` | number > 0 | `0.02` | model; tunable |")
    assert known["tuning"] == ["head_std"]
