"""No library progress bar in a command's output (issue 49, item 7): transformers draws
`Writing model shards` at every `save_pretrained`, which a study's trial that builds the
`tiny` model (and study.export, and every test's tiny folder) would print as ANSI bars, and a
Ray worker would forward to the driver's terminal."""

from __future__ import annotations

from transformers.utils import logging as hf_logging

from trainables.model.quiet import quiet_transformers
from trainables.model.tiny import tiny_model_folder


def test_saving_a_model_draws_no_progress_bar(tmp_path, capfd):
    before = hf_logging.is_progress_bar_enabled()
    tiny_model_folder(tmp_path)
    out, err = capfd.readouterr()
    assert "Writing model shards" not in out + err and "\r" not in out + err, err
    assert (tmp_path / "tiny-bert-4" / "config.json").is_file()
    assert hf_logging.is_progress_bar_enabled() == before  # the switch is as it was


def test_the_switch_is_put_back_after_the_block():
    before = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        with quiet_transformers():
            assert not hf_logging.is_progress_bar_enabled()
        assert hf_logging.is_progress_bar_enabled()
    finally:
        (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()
