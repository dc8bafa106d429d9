"""What the study relies on in MLflow beyond its public API, checked against the installed
MLflow: each assumption listed in study/tracking/mlflow_internals.py has a test here, so an
upgrade that moves one fails by name instead of refusing a good tracking URI."""

from __future__ import annotations

import importlib

import pytest
from mlflow.utils.uri import extract_db_type_from_uri

from study.tracking import mlflow_internals
from study.tracking.probe import database_kind


def test_mlflow_still_names_its_database_engines_where_the_probe_reads_them():
    module = importlib.import_module("mlflow.store.db.db_types")
    assert module.DATABASE_ENGINES is mlflow_internals.DATABASE_ENGINES
    assert module.SQLITE == mlflow_internals.SQLITE == "sqlite"
    assert {"postgresql", "mysql", "sqlite", "mssql"} <= set(mlflow_internals.DATABASE_ENGINES)


@pytest.mark.parametrize(
    "uri",
    ["sqlite:///mlflow.db", "postgresql://u@host/db", "postgresql+psycopg2://u@host/db",
     "mysql+pymysql://u@host/db", "mssql+pyodbc://u@host/db"],
)  # fmt: skip
def test_the_probe_tells_a_database_as_mlflows_own_store_does(uri):
    assert database_kind(uri) == extract_db_type_from_uri(uri)
