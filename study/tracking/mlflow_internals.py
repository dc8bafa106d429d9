"""Every use the study makes of MLflow beyond its public API.

Each is done here and nowhere else, so an MLflow upgrade that moves one breaks this module
only; tests/study/tracking/test_mlflow_contract.py pins each against the installed MLflow and
fails, naming it, when one no longer holds.

The assumptions:
- `mlflow.store.db.db_types` names the database engines MLflow's own store takes a tracking
  URI's scheme from (`DATABASE_ENGINES`: postgresql, mysql, sqlite, mssql; a driver may follow
  a '+'), and sqlite's among them (`SQLITE`); study/tracking/probe.py tells a database URI
  from a server's with them before MLflow is asked.
"""

from __future__ import annotations

from mlflow.store.db.db_types import DATABASE_ENGINES, SQLITE

__all__ = ["DATABASE_ENGINES", "SQLITE"]
