"""Nothing a user hands the project is executed: study files load with YAML's safe loader,
checkpoints load as safetensors or `torch.load(weights_only=True)`, and the code has no
`eval`/`exec` and no unpickling outside Ray's own experiment folders."""

from __future__ import annotations

import ast
import os
import pickle
from pathlib import Path

import pytest

from study.spec import SpecError, load_study
from trainables.settings.config import TrialConfig
from trainables.training.checkpoint import STATE_FILE
from trainables.training.train import Trial

REPO = Path(__file__).resolve().parent.parent
OURS = [p for part in ("study", "trainables", "bench") for p in (REPO / part).rglob("*.py")]


class _Payload:
    """Unpickling this runs a shell command: what a malicious checkpoint would carry."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_study_file_with_a_python_tag_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(f'description: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(SpecError) as err:
        load_study(str(path))
    assert "evil.yaml:1:" in str(err.value) and "\n" not in str(err.value)
    assert not marker.exists()


def test_checkpoint_with_code_in_it_is_refused_without_running_it(trial_settings, tmp_path):
    trial = Trial(TrialConfig.from_dict(trial_settings | {"epochs": 1}))
    trial.save(tmp_path / "ckpt")
    marker = tmp_path / "pwned"
    with open(tmp_path / "ckpt" / STATE_FILE, "wb") as out:
        pickle.dump({"optimizer": _Payload(marker)}, out)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        trial.restore(tmp_path / "ckpt")
    assert not marker.exists()


def _calls(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    """(`name` or `module.name` or `.method`, call) for every call in the tree."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            out.append((func.id, node))
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else ""
            out.append((f"{owner}.{func.attr}", node))
    return out


@pytest.mark.parametrize("path", OURS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_unsafe_loading_in_the_code(path):
    for name, call in _calls(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(REPO)}:{call.lineno}"
        assert name not in {"eval", "exec", "yaml.load", "yaml.unsafe_load", "yaml.full_load"}, (
            where
        )
        if name == "torch.load":
            flags = {k.arg: getattr(k.value, "value", None) for k in call.keywords}
            assert flags.get("weights_only") is True, where
        if name in {"pickle.load", "pickle.loads"}:  # the searcher state Ray keeps beside its
            assert path.name == "saved.py", where  # own pickled experiment, nothing else


def test_readme_mlflow_ui_binds_to_loopback():
    commands = [ln for ln in (REPO / "README.md").read_text().splitlines() if "mlflow ui" in ln]
    assert commands and all("--host 127.0.0.1" in ln for ln in commands), commands
