"""The parts of a failed study's ending that need no Ray: the reason said for an error Tune
raised, the report that fails after a finished study (its line and the command that makes
it again), and the local Ray's resources that `resources` is checked against."""

from __future__ import annotations

import pytest

import study.report.build
from study import closing
from study.execution import failure_reason, local_resources, too_large


class _TuneStyleError(Exception):
    """An error whose text is a traceback, as Tune's TuneError wraps a trial's."""


def test_the_reason_is_the_innermost_error_of_the_chain():
    inner = ValueError("Trial returned a result which did not include the metric\nResult: {}")
    outer = _TuneStyleError("Traceback (most recent call last):\n  File x\nValueError: last")
    outer.__context__ = inner
    assert failure_reason(outer) == (
        "ValueError: Trial returned a result which did not include the metric"
    )
    alone = _TuneStyleError("Traceback (most recent call last):\n  File x\nValueError: last")
    assert failure_reason(alone) == "ValueError: last"
    assert failure_reason(RuntimeError("x" * 1000)) == "RuntimeError: " + "x" * 300


def test_a_failed_report_is_one_line_with_the_command_that_makes_it(monkeypatch, tmp_path):
    def fails(*args, **kwargs):
        raise IndexError("index 0 is out of bounds for axis 0 with size 0")

    monkeypatch.setattr(study.report.build, "write_report", fails)
    uri = f"sqlite:///{tmp_path / 'other.db'}"
    again = closing.report_command(uri, "teststudy", "RUN", str(tmp_path / "out"), "smoke")
    assert again == (
        f"python -m study.report teststudy --run-id RUN --tracking-uri {uri} "
        f"--out {tmp_path / 'out' / 'teststudy-smoke'}"
    )
    # the tracker logs a written report only: a failed one never reaches it
    folder, line = closing._report(None, uri, "teststudy", "RUN", str(tmp_path / "out"), again)
    assert folder is None
    assert line == (
        "the study finished but its report failed (IndexError: index 0 is out of bounds for "
        f"axis 0 with size 0); its data is in MLflow: make the report with: {again}"
    )
    default = closing.report_command(
        closing.default_tracking_uri(), "s", "R", "outputs/reports", "x"
    )
    assert default == "python -m study.report s --run-id R"


@pytest.mark.parametrize("cpus", [1, 3])
def test_a_local_ray_has_the_cpus_it_is_given(cpus):
    have = local_resources(cpus)
    assert have is not None and have["cpu"] == cpus and have["gpu"] >= 0
    assert too_large({"cpu": cpus, "gpu": 0}, have) is None
    assert too_large({"cpu": cpus + 0.5, "gpu": 0}, have) == "cpu"
    assert too_large({"cpu": 1, "gpu": have["gpu"] + 1}, have) == "gpu"
