"""The Python API (`from study import run_study, load_trials, load_verdicts`): its page's code
run as it stands on a real smoke study, the tables read back against what MLflow and the report
hold, bad input raised rather than exited, and the caller's process left as it was."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
from mlflow import MlflowClient

from study import UserInputError, load_trials, load_verdicts, run_study
from study.names import RUN_KIND, STUDY_RUN_ID
from study.run import main
from tests.study_helpers import REPO, import_stages, runs_by_kind, tracking_uri

PAGE = REPO / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

# around each of the page's blocks that runs a study: what it left changed in the process's
# environment (another block's may: torch, which load_verdicts's ASO loads, sets variables of
# its own, and MLflow its telemetry session when imported, here before any block) and whether
# Ray still runs; at the end, what the page read
PROLOGUE = "import os as _os, mlflow as _mlflow, ray as _ray\n_left = []\n"
BEFORE_A_RUN = "_environ = dict(_os.environ)\n"
AFTER_A_RUN = (
    "_left += sorted(set(_os.environ.items()) ^ set(_environ.items()))\n"
    "_left += ['ray still running'] if _ray.is_initialized() else []\n"
)
EPILOGUE = """
import json as _json
print("API-CHECK " + _json.dumps({"rows": len(trials), "run_id": outcome.run_id,
      "uri": outcome.tracking_uri, "left_by_runs": _left, "verdicts": len(verdicts),
      "report": str(outcome.report)}))
"""


@pytest.mark.slow
@pytest.mark.study
def test_the_python_api_page_runs_a_smoke_study_and_reads_every_trial(tmp_path):
    blocks = BLOCK.findall(PAGE.read_text())
    assert len(blocks) >= 3, "the page's python blocks were not found"
    script = tmp_path / "page.py"
    checked = [
        BEFORE_A_RUN + block + AFTER_A_RUN if "run_study(" in block else block for block in blocks
    ]
    script.write_text(PROLOGUE + "\n".join(checked) + EPILOGUE)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    line = next(x for x in done.stdout.splitlines() if x.startswith("API-CHECK "))
    seen = json.loads(line.removeprefix("API-CHECK "))
    client = MlflowClient(seen["uri"])
    trial_runs = client.search_runs(
        [client.get_experiment_by_name("ner_depth").experiment_id],
        filter_string=f"tags.{STUDY_RUN_ID} = '{seen['run_id']}' and tags.{RUN_KIND} = 'trial'",
    )
    assert seen["rows"] == len(trial_runs) == 12  # the smoke plan: 8 explore + 4 confirm
    assert seen["verdicts"] > 0 and (tmp_path / "outputs" / "reports" / "ner_depth-smoke").is_dir()
    assert seen["report"] == str(tmp_path / "outputs" / "reports" / "ner_depth-smoke")
    assert seen["left_by_runs"] == []
    assert "unknown factor 'epochz'" in done.stdout  # the page's error block


@pytest.mark.study
def test_the_tables_are_the_trials_in_mlflow_and_the_reports_comparisons(finished_study):
    tmp, _ = finished_study
    trials = load_trials(tracking_uri(tmp), "teststudy")
    runs = runs_by_kind(tmp)
    assert sorted(trials.run_id) == sorted(r.info.run_id for r in runs["trial"])
    assert {"arm", "phase", "sample", "seed", "status", "lr", "depth", "dev_f1"} <= set(trials)
    verdicts = load_verdicts(tracking_uri(tmp), "teststudy", runs["study"][0].info.run_id)
    written = pd.read_csv(tmp / "reports" / "teststudy" / "comparisons.csv")
    assert len(verdicts) == len(written) > 0
    shown = ["metric", "arm_a", "arm_b", "primary", "outcome", "verdict"]
    assert verdicts[shown].astype(str).values.tolist() == written[shown].astype(str).values.tolist()
    assert verdicts["diff"].tolist() == pytest.approx(written["diff"].tolist(), nan_ok=True)


def test_bad_input_raises_and_leaves_the_process_as_it_was(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = dict(os.environ)
    with pytest.raises(UserInputError, match="did you mean 'epochs'"):
        run_study("ner_depth", "smoke", {"fixed.epochz": 2})
    with pytest.raises(UserInputError, match="drop --resume"):
        run_study("ner_depth", resume=True, dry_run=True)
    assert dict(os.environ) == before  # the driver's settings were put back
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_overrides_as_a_mapping_are_the_commands_set_options(capsys):
    sets = ["fixed.epochs=2", "grid.depth=[full, full-2]", "seeds=3"]
    main(["ner_depth", "--profile", "smoke", "--dry-run", *(f"--set={text}" for text in sets)])
    typed = capsys.readouterr().out
    overrides = {"fixed.epochs": 2, "grid.depth": ["full", "full-2"], "seeds": 3}
    outcome = run_study("ner_depth", "smoke", overrides, dry_run=True)
    assert capsys.readouterr().out == typed and "depth=2" in typed
    assert (outcome.study, outcome.run_id) == ("ner_depth", None)


def test_import_study_loads_nothing_and_the_readers_load_no_ray():
    """A notebook that only reads a study never pays for Ray (nor torch, until ASO runs)."""
    stages = import_stages()
    assert stages["import study"]["ours"] == ["study"], stages["import study"]
    readers = stages["readers"]["heavy"]
    assert [m for m in ("ray", "torch") if m in readers] == [], readers
