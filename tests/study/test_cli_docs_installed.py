"""The docs generators run from an installed package, which has no docs/ beside it: one line
and exit 2, never a FileNotFoundError traceback nor "not current" for a page that is not
there (tests/test_install.py runs the command itself from a non-editable install)."""

from __future__ import annotations

import pytest

from study import cli_docs
from study.spec import reference as key_reference
from trainables.settings import reference as setting_reference


@pytest.mark.parametrize("module", [cli_docs, key_reference, setting_reference])
@pytest.mark.parametrize("argv", [["--check"], []])
def test_no_docs_folder_is_one_line(module, argv, tmp_path, monkeypatch, capsys):
    page = tmp_path / "site-packages" / "docs" / module.DOC.name
    monkeypatch.setattr(module, "DOC", page)
    assert module.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "installed package" in err and str(page.parent) in err
    assert not page.parent.exists()


def test_a_checkout_page_is_still_checked(tmp_path, monkeypatch, capsys):
    page = tmp_path / "docs" / "cli.md"
    page.parent.mkdir()
    page.write_text("stale\n")
    monkeypatch.setattr(cli_docs, "DOC", page)
    assert cli_docs.main(["--check"]) == 1
    assert "is not current" in capsys.readouterr().err
    assert cli_docs.main([]) == 0
    assert cli_docs.main(["--check"]) == 0
