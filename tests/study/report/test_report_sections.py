"""The report's sections are found, not listed: a new statistic is one module in
study/report/sections/, and the page, the CSV files and the figures pick it up."""

from __future__ import annotations

import textwrap

import pandas as pd
import pytest

from study.report import build, section, sections
from tests.study.report.test_report_followups import record, trials

EXTRA = """
import pandas as pd
from study.report.section import Section

SECTION = Section(
    name="share_completed", slot="followups", order=15,
    tables=lambda record: {"share_completed": pd.DataFrame(
        {"share": [float((record.trials.status == "completed").mean())]})},
    markdown=lambda record, tables: "Share of completed runs: "
    + str(tables["share_completed"].share.iloc[0]),
)
"""


def test_the_shipped_sections_in_their_order():
    found = [(s.slot, s.name) for s in section.all_sections()]
    assert found == [("results", "label_maps"), ("results", "convergence"), ("results", "heads"),
                     ("results", "stages"), ("verdicts", "provenance"),
                     ("verdicts", "threats"), ("verdicts", "parity"),
                     ("followups", "expected_max"),
                     ("followups", "degenerate"), ("followups", "variance_split"),
                     ("followups", "layers_seeds"), ("followups", "layers_arms"),
                     ("followups", "layers_data"), ("followups", "reproducibility")]  # fmt: skip


@pytest.fixture
def extra_section(tmp_path, monkeypatch, forget_modules):
    folder = tmp_path / "more_sections"
    folder.mkdir()
    (folder / "share_completed.py").write_text(textwrap.dedent(EXTRA))
    monkeypatch.setattr(sections, "__path__", [*sections.__path__, str(folder)])
    forget_modules.append("study.report.sections.share_completed")


def test_a_new_module_is_a_new_section_of_the_page_and_a_csv(extra_section, tmp_path, monkeypatch):
    # the learning curves and layer dynamics are read from MLflow run histories, which a
    # hand-built record has none of
    monkeypatch.setattr(build, "learning_curves", lambda record, phase: pd.DataFrame())
    monkeypatch.setattr(build, "layer_dynamics", lambda record: pd.DataFrame())
    t = trials([
        ("A", "confirm", "completed", None, 2, 0.40, 0.30, 1e-4, 60.0),
        ("A", "confirm", "errored", "worker died", 3, None, None, 1e-4, 60.0),
        ("B", "confirm", "completed", None, 2, 0.41, 0.31, 1e-4, 60.0),
        ("B", "confirm", "completed", None, 3, 0.42, 0.33, 1e-4, 60.0),
    ])  # fmt: skip
    t["sample"], t["data_seed"] = 0, t.seed
    names = [s.name for s in section.all_sections()]
    assert names.index("share_completed") == names.index("expected_max") + 1
    out = tmp_path / "report"
    out.mkdir()
    build.build_report(record(t), out)
    page = (out / "README.md").read_text()
    assert "Share of completed runs: 0.75" in page
    assert page.index("Share of completed runs") < page.index("### Reproducibility")
    assert pd.read_csv(out / "share_completed.csv").share.tolist() == [0.75]


def test_a_module_without_a_section_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "not_a_section.py").write_text("X = 1\n")
    monkeypatch.setattr(sections, "__path__", [*sections.__path__, str(folder)])
    with pytest.raises(TypeError, match="not_a_section defines no SECTION"):
        section.all_sections()


def test_a_section_names_its_slot():
    with pytest.raises(ValueError, match="slot is one of"):
        section.Section("x", "appendix", 1, lambda r: {}, lambda r, t: "")


def test_the_dynamics_heatmap_draws_any_new_measure_but_not_the_per_matrix_distances():
    from study.report.plots import dynamics_measures

    measured = {"l2_sum", "l2_query", "l2_ffn_out", "cka", "attn_js", "svcca", "grad_norm"}
    assert dynamics_measures(measured) == ["l2_sum", "attn_js", "cka", "svcca", "grad_norm"]
