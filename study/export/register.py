"""`--register NAME`: the exported folder as an MLflow model of its trial run, registered.

The folder is saved in MLflow's transformers flavour (a token-classification pipeline), so
`mlflow.transformers.load_model("models:/NAME/V")` and `mlflow.pyfunc.load_model` load it,
and the model version names the trial run it came from. It is logged with the tracking
client into the finished trial run, as `mlflow_model/`, without reopening the run (which
would rewrite its status and end time).

Two settings the flavour would otherwise take from outside: the pip requirements are the
installed transformers and torch (MLflow's inference imports packages this project does not
install), and the hub is offline while saving (MLflow asks the hub for a licence of a model
that never came from it). The folder is read back as the flavour's own pipeline, by task and
path; torch and transformers are imported only when registering.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mlflow.exceptions import MlflowException

from study.export.choose import ChosenTrial
from trainables.errors import UserInputError, joined

REGISTERED_ARTIFACT = "mlflow_model"  # beside the trial's `model/` (study.names.MODEL_ARTIFACT)
TASK = "token-classification"


def register_folder(uri: str, chosen: ChosenTrial, folder: Path, name: str) -> str:
    """Log `folder` to the chosen trial's run as a transformers-flavour model and register it
    as `name`; returns the new version's number."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is first imported
    import mlflow
    import mlflow.transformers
    import torch
    import transformers
    from mlflow.tracking import MlflowClient

    tagger = transformers.pipeline(TASK, model=str(folder))  # the folder's model and tokenizer
    requirements = [f"transformers=={transformers.__version__}",
                    f"torch=={torch.__version__.split('+')[0]}"]  # fmt: skip
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        with tempfile.TemporaryDirectory() as staging:
            saved = Path(staging) / REGISTERED_ARTIFACT
            mlflow.transformers.save_model(
                transformers_model=tagger, path=str(saved),
                task=TASK, pip_requirements=requirements,
            )  # fmt: skip
            MlflowClient(uri).log_artifacts(chosen.run_id, str(saved), REGISTERED_ARTIFACT)
        version = mlflow.register_model(f"runs:/{chosen.run_id}/{REGISTERED_ARTIFACT}", name)
    except MlflowException as err:
        raise UserInputError(f"--register {name}: {joined(err)[:300]}") from err
    return str(version.version)
