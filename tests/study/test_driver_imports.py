"""The study driver checks a study file and starts Ray without importing torch: seconds saved
on every run, and a driver that does not hold torch's memory while trials run."""

from __future__ import annotations

import json
import subprocess
import sys

from study.spec import model_config
from tests.study_helpers import REPO, import_stages

HEAVY = ("torch", "transformers", "seqeval", "sklearn")


def test_driver_start_up_imports_no_torch():
    loaded = import_stages()["driver"]["heavy"]
    assert [m for m in HEAVY if m in loaded] == [], loaded


# every shipped study at every profile (None: the file without a profile), checked and planned
# in one fresh interpreter; prints the first that loads a heavy module, and what it loaded
_EVERY_STUDY = f"""
import sys, yaml
from study.plan import make_plan
from study.spec import SEARCH_SPACES, load_study
for path in sorted(SEARCH_SPACES.glob("*.yaml")):
    for profile in [None, *(yaml.safe_load(path.read_text()).get("profiles") or {{}})]:
        make_plan(load_study(path.stem, profile)).describe()
        loaded = [m for m in {HEAVY!r} if m in sys.modules]
        if loaded:
            print(path.stem, profile, loaded)
            sys.exit()
print("none")
"""


def test_checking_and_planning_every_shipped_study_imports_no_torch():
    """`model: tiny` included: the trial builds the tiny model, the driver knows its shape."""
    done = subprocess.run(
        [sys.executable, "-c", _EVERY_STUDY], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "none", done.stdout


def test_making_a_report_imports_neither_ray_nor_torch():
    """A report is made from MLflow alone, on any machine that sees the store."""
    loaded = import_stages()["report"]["heavy"]
    assert [m for m in ("ray", "torch") if m in loaded] == [], loaded


def test_layer_count_read_from_config_json(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "distilbert", "n_layers": 5, "n_heads": 4})
    )
    config = model_config(str(tmp_path), hub_only=False)
    assert (config["n_layers"], config["n_heads"]) == (5, 4)


def test_layer_count_falls_back_to_transformers_defaults(tmp_path):
    """A config.json may leave a count at its family default, which only transformers knows."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    config = model_config(str(tmp_path), hub_only=False)
    assert (config["num_hidden_layers"], config["num_attention_heads"]) == (12, 12)
