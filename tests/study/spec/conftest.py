"""Fixtures of the study-file tests: a valid study on the tiny model, and no network."""

from __future__ import annotations

import pytest

from tests.study.spec.study_files import base_study


@pytest.fixture
def offline(monkeypatch):
    """No test that asks for this may reach the network, as on an air-gapped cluster node."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def study(tiny_model) -> dict:
    return base_study(tiny_model)
