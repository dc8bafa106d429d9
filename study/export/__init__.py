"""`python -m study.export`: a confirm trial's trained tagger out of MLflow as a Hugging Face
folder that `AutoModelForTokenClassification.from_pretrained` reloads.

- `choose`: which trial run an `--arm`/`--seed` or `--best` names, refused in one line when
  none or several do;
- `provenance`: `provenance.json` beside the weights, and the tokenizer's longest input;
- `register`: `--register`, the folder as a registered MLflow model of the trial run;
- `__main__`: the command line, which downloads that run's `model/` artifact.

Nothing is imported here, and torch only by `register`, when asked: the folder was written
by the trial (trainables/model/export.py) and logged by the driver
(study/tracking/artifacts.py).
"""
