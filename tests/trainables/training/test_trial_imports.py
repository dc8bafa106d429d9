"""What a trial worker imports before it trains: a fresh interpreter follows the trial path as a
Ray worker does (`trainables.tune_adapter`, which brings ray and Ray Tune, then the trial that
`new_trial` builds, trained to its first report: one step and one evaluation) and lists its
modules. Each module kept out here is seconds of every cold worker's start (docs/benchmarks.md,
bench/trial_startup.py).

scikit-learn came with `seqeval.metrics` (for one warning class) and brought SciPy's
statistics; the scores now read spans without it (trainables/training/metrics.py). SciPy itself
and torch._dynamo stay: the libraries import them on this path whatever the trainer does, as
the second test shows, and when one of them stops, that test fails so that this list can grow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from subprocess import PIPE

import pytest

# the modules a trial must not import, with why each would come
ABSENT = {
    "sklearn": "scikit-learn (seqeval.metrics imports it)",
    "seqeval.metrics": "seqeval's scoring module, which imports scikit-learn",
    "scipy.stats": "SciPy's statistics (scikit-learn imports them; the report's, not a trial's)",
    "mlflow": "the driver's tracking",
    "optuna": "the driver's search",
}

TRIAL_PATH = """
import json, sys
import trainables.tune_adapter  # what a Ray worker imports to unpickle the trainable
from trainables.settings.config import TrialConfig
from trainables.training.trials import new_trial

trial = new_trial(TrialConfig.from_dict(json.loads(sys.argv[1])))
first = next(iter(trial.run()))
assert first["step"] == 1 and "dev_f1_strict" in first, first
print(json.dumps(sorted(sys.modules)))
"""

# what the libraries import without the trainer: torch's optimizers import torch._dynamo as
# they take their parameters (torch._disable_dynamo), transformers' losses SciPy's optimize
LIBRARIES = """
import json, sys
import torch
torch.optim.AdamW([torch.zeros(1, requires_grad=True)])
optimizer = {"torch._dynamo"} & set(sys.modules)
import transformers.loss.loss_utils
print(json.dumps({"optimizer": sorted(optimizer), "losses": sorted(sys.modules)}))
"""


@pytest.fixture(scope="module")
def interpreters(tiny_model, tiny_corpus):
    """Both fresh interpreters, started at once (each is mostly imports, on one core)."""
    trial = {"model": str(tiny_model), "data": tiny_corpus, "batch_size": 8, "max_length": 32}
    settings = json.dumps(trial | {"epochs": 1, "eval_every": 1, "threads": 1, "seed": 3})
    started = {
        "trial": subprocess.Popen(
            [sys.executable, "-c", TRIAL_PATH, settings], stdout=PIPE, stderr=PIPE, text=True
        ),
        "libraries": subprocess.Popen(
            [sys.executable, "-c", LIBRARIES], stdout=PIPE, stderr=PIPE, text=True
        ),
    }
    yield started
    for process in started.values():
        process.kill()
        process.communicate()


def _modules(process: subprocess.Popen) -> object:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.splitlines()[-1])


def test_a_trial_imports_no_scikit_learn_before_its_first_report(interpreters):
    modules = set(_modules(interpreters["trial"]))
    assert {"torch", "transformers.modeling_utils", "seqeval.scheme"} <= modules  # the path ran
    imported = {
        name: why
        for name, why in ABSENT.items()
        if name in modules or any(m.startswith(name + ".") for m in modules)
    }
    assert not imported, f"the trial path imports {imported}"


def test_scipy_and_torch_dynamo_are_the_libraries_own_imports(interpreters):
    found = _modules(interpreters["libraries"])
    assert found["optimizer"] == ["torch._dynamo"], (
        "torch's optimizer no longer imports torch._dynamo: "
        "add it to ABSENT if transformers does not import it either"
    )
    assert "scipy.optimize" in found["losses"], (
        "transformers' losses no longer import SciPy: add scipy to ABSENT"
    )
