"""What a study file may cost (issue 30): an alias bomb, deep nesting, a long text and a plan of
more than MAX_TRIALS trials are each refused in one line, quickly and in little memory, before
the data they stand for is built.

The cost is the reading process's own (issue 48): each refusal runs in a process of its own
(tests/study/spec/limits_probe.py, forked after its imports by tests/command_server.py), whose
peak RSS and CPU time come from wait4 once it has ended, so what libyaml allocates in C counts
too (tracemalloc, which measured this before, sees Python's allocations alone)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from study.plan import make_plan
from study.spec import SEARCH_SPACES, load_study
from study.spec.limits import MAX_TRIALS, planned_trials
from tests.command_server import CommandServer
from trainables.yaml_reading import MAX_DEPTH, MAX_NODES, MAX_TEXT, YamlLimitError, load_yaml

SMOKE = (SEARCH_SPACES / "smoke.yaml").read_text()
REFUSALS = ("SpecError", "YamlLimitError")
PROBE = "tests.study.spec.limits_probe"


def billion_laughs(levels: int = 9) -> str:
    """`a` is 9 values, `b` nine `a`s, ...: 9^levels values from a dozen short lines."""
    names = "abcdefghijklmnop"
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for previous, name in zip(names, names[1:levels], strict=False):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """The probe's server: `study.spec` and the YAML reader imported once."""
    server = CommandServer((PROBE,), tmp_path_factory.mktemp("limits") / "root")
    try:
        yield server
    finally:
        server.close()


@dataclass(frozen=True)
class Refusal:
    classes: list[str]
    message: str

    def __str__(self) -> str:
        return self.message


def probed(probe: CommandServer, *args: str):
    """`limits_probe ARGS` in a process of its own: what it raised, and its outcome."""
    outcome = probe.command(PROBE, {}, list(args), fork=True)
    assert outcome.code == 0 and outcome.err == b"", outcome
    raised = json.loads(outcome.out)
    return (Refusal(**raised) if raised else None), outcome


def refused_cheaply(
    probe: CommandServer, *args: str, max_s: float = 3.0, max_mb: float = 20.0
) -> Refusal:
    """`limits_probe ARGS`, which must be refused (SpecError or YamlLimitError) within `max_s`
    of CPU time and adding less than `max_mb` to the RSS its process had after its imports
    (its peak RSS, C's allocations included). Its error."""
    refusal, outcome = probed(probe, *args)
    assert refusal is not None, f"{args} was not refused"
    assert set(refusal.classes) & set(REFUSALS), refusal
    assert outcome.cpu_s < max_s, f"took {outcome.cpu_s:.1f} s of CPU"
    assert outcome.added_mib < max_mb, f"peak {outcome.added_mib:.1f} MiB above the imports'"
    return refusal


def test_the_meter_sees_memory_allocated_in_c(probe):
    """What the limits are measured with: 64 MiB from malloc, which tracemalloc does not see,
    counts as 64 MiB; reading nothing counts as next to nothing."""
    assert probed(probe, "c_alloc", "64")[1].added_mib >= 60
    assert probed(probe, "c_alloc", "0")[1].added_mib < 4


def study_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return str(path)


def test_an_alias_bomb_in_a_study_file_is_one_line(probe, tmp_path):
    path = study_file(
        tmp_path, SMOKE.replace("max_failures: 0", "max_failures: 0\n" + billion_laughs())
    )
    err = refused_cheaply(probe, "study", path, "smoke")
    assert "SpecError" in err.classes
    assert str(err).startswith(f"{path}:")
    assert f"more than {MAX_NODES} values once its aliases are expanded" in str(err)
    assert "\n" not in str(err)


def test_an_alias_bomb_in_a_trial_config_is_refused(probe, tmp_path):
    path = tmp_path / "trial.yaml"
    path.write_text(billion_laughs())
    err = refused_cheaply(probe, "yaml", str(path))
    assert "YamlLimitError" in err.classes


def test_aliases_within_the_limit_still_read():
    assert load_yaml("a: &a {b: 1}\nc: *a\n") == {"a": {"b": 1}, "c": {"b": 1}}


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n"])
def test_a_recursive_alias_is_refused(text):
    with pytest.raises(YamlLimitError, match="recursive alias"):
        load_yaml(text)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 10_000])
def test_deep_nesting_is_one_line(probe, tmp_path, depth):
    """10,000 levels would exhaust Python's recursion in the composer; refused at level 33."""
    nested = "[" * depth + "]" * depth
    path = study_file(tmp_path, SMOKE.replace("max_failures: 0", f"max_failures: {nested}"))
    err = refused_cheaply(probe, "study", path, "smoke")
    line = SMOKE.splitlines().index("max_failures: 0") + 1
    assert str(err).startswith(f"{path}:{line}:")
    assert f"nested more than {MAX_DEPTH} levels deep" in str(err)


def test_nesting_up_to_the_limit_reads():
    depth = MAX_DEPTH - 1
    assert load_yaml("[" * depth + "]" * depth) is not None


def test_a_long_text_is_one_line(probe, tmp_path):
    path = study_file(tmp_path, SMOKE.replace("description: ", f"description: {'x' * MAX_TEXT}", 1))
    err = refused_cheaply(probe, "study", path, "smoke")
    assert "s.yaml:4:" in str(err) and f"at most {MAX_TEXT}" in str(err)
    assert len(load_yaml("a: " + "x" * MAX_TEXT)["a"]) == MAX_TEXT


def test_a_plan_over_the_limit_is_refused_before_it_is_planned(probe, tmp_path):
    """1,000 x 1,000 arms of a valid grid: refused by arithmetic, the arms never listed."""
    fractions = [round((i + 1) / 1000, 3) for i in range(1000)]
    rates = [round(1e-5 * (i + 1), 8) for i in range(1000)]
    study = load_yaml(SMOKE)
    study["grid"] = {"data_fraction": fractions, "lr": rates}
    study.pop("search")
    study["phases"] = {"confirm": {"select": [{}], "seeds": 2}}
    path = study_file(tmp_path, yaml.safe_dump(study, width=10_000))
    err = refused_cheaply(probe, "study", path, "smoke")
    assert "the study would plan 2,000,000 trials" in str(err)
    assert f"at most {MAX_TRIALS:,}" in str(err) and str(err).startswith(f"{path}:")


@pytest.mark.parametrize("field", ["phases.explore.seeds", "phases.confirm.data_seeds"])
def test_a_count_over_the_limit_is_refused_at_its_field(probe, field):
    err = refused_cheaply(probe, "study", "smoke", "smoke", f"{field}={10**12}")
    assert f"--set {field}={10**12}: {field}: {10**12} is not allowed: a count of at most" in str(
        err
    )


@pytest.mark.parametrize("name", sorted(path.stem for path in SEARCH_SPACES.glob("*.yaml")))
def test_the_arithmetic_counts_what_the_plan_holds(name):
    spec = load_study(name, "smoke")
    total, _ = planned_trials(spec.grid, spec.explore, spec.confirm)
    assert total == make_plan(spec).trials
