"""`python -m study.export NAME --arm ARM --seed N`: a confirm trial's trained tagger as a
Hugging Face folder (config with id2label/label2id, weights, tokenizer).

    python -m study.export ner_depth --arm depth=full-1 --seed 3 --out models/full-1-s3
    python -m study.export ner_depth --best          # the best confirm trial by the study metric

The trial wrote the folder into its final checkpoint and the driver logged it to the trial's
MLflow run as `model/` (study/tracking/artifacts.py); this command finds the run
(study/export/choose.py) and downloads that folder, into a temporary folder beside `--out`
that is renamed into place whole, with `provenance.json` beside the weights (what the tagger
is and where it came from) and the tokenizer's `model_max_length` set to the trial's
`max_length` (study/export/provenance.py). `--register NAME` also makes it an MLflow model of
the trial run (study/export/register.py).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from study.folder_names import check_name, inside
from study.names import tracking_uri
from study.outputs import DEFAULT_TRACKING, stores_closed
from trainables.command_line import (
    EXIT_BAD_INPUT,
    OneLineParser,
    exit_codes,
    leaving_quickly,
    pipe_closed_quietly,
)
from trainables.errors import UserInputError, joined

if TYPE_CHECKING:  # MLflow and the trial readers: imported once the command line is read, so that
    # --help and a bad command line answer without them (tests/test_help_time.py)
    from study.export.choose import ChosenTrial
    from study.tracking.reading import StudyRecord

EXAMPLES = """examples:
  python -m study.export ner_depth --arm depth=full-1 --seed 3   # a confirm seed of its report
  python -m study.export ner_depth --best --out models/best
  python -m study.export ner_depth --best --arm depth=full   # the best seed of one arm
  python -m study.export ner_depth --best --register ner-tagger   # also an MLflow model

The folder reloads with AutoModelForTokenClassification.from_pretrained(FOLDER) and
AutoTokenizer.from_pretrained(FOLDER) (inputs truncated at the trial's max_length); its
provenance.json names the base model, study, arm, seed, trial run, code version and labels.
A registered one reloads with
mlflow.transformers.load_model("models:/NAME/VERSION"). The same command is installed as
`study-export`."""


def build_parser() -> OneLineParser:
    """The command line, with examples and exit codes in its help."""
    parser = OneLineParser(
        prog="python -m study.export",
        description="Write a confirm trial's trained tagger as a Hugging Face folder: its "
        "weights as the trial\nscored them (under until_plateau, the best evaluation's), its "
        "tokenizer and its label map.",
        epilog=EXAMPLES + "\n\n" + exit_codes({
            0: "the folder is written (and registered, with --register)",
            2: "bad input: no such store, study, run, arm or seed, a trial without a kept "
            "model, --out not empty, or a name the registry refuses; one line",
        }),
    )  # fmt: skip
    parser.add_argument("study", help="study name (the MLflow experiment)")
    parser.add_argument("--arm", metavar="ARM",
                        help="the arm: as the report names it (depth=5,data_fraction=1), "
                        "as the study file writes it (depth=full-1), or any of its factors "
                        "that name one arm alone (depth=5); ambiguous: lists them")  # fmt: skip
    parser.add_argument("--seed", type=int, metavar="N", help="the confirm seed")
    parser.add_argument("--best", action="store_true",
                        help="the completed confirm trial (of --arm, if given) with the best "
                        "study metric (its `metric:`, a dev metric, dev_f1 by default; never "
                        "test); ties to the lower seed")  # fmt: skip
    parser.add_argument("--out", metavar="FOLDER",
                        help="the folder to write, new or empty "
                        "(default models/<study>/<arm>-seed<N>)")  # fmt: skip
    parser.add_argument("--register", metavar="NAME",
                        help="also log the folder to the trial's run as an MLflow model "
                        "(transformers flavour) and register it as NAME, a new version "
                        "each time")  # fmt: skip
    parser.add_argument("--tracking-uri", metavar="URI",
                        help=f"MLflow tracking URI (default {DEFAULT_TRACKING})")  # fmt: skip
    parser.add_argument("--run-id", metavar="RUN",
                        help="the study run (default: the newest finished one)")  # fmt: skip
    return parser


def default_folder(study: str, chosen: ChosenTrial) -> Path:
    """`models/<study>/<arm>-seed<N>`, checked to stay inside `models/`."""
    arm = chosen.arm.replace("/", "_")
    out = Path("models") / check_name("study name", study) / f"{arm}-seed{chosen.seed}"
    inside("models", out, "the export folder")
    return out


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserInputError(f"--out {out} exists and is not an empty folder")


def download_model(uri: str, record: StudyRecord, chosen: ChosenTrial, out: Path) -> None:
    """The run's `model/` artifact into `out`, whole or not at all, with its provenance
    (study/export/provenance.py)."""
    from mlflow.exceptions import MlflowException

    from study.export.provenance import folder_labels, provenance, write_provenance
    from study.tracking.artifacts import download_model as download_model_artifact
    from study.tracking.reading import params_and_tags

    _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        try:
            local = download_model_artifact(uri, chosen.run_id, staging)
        except (MlflowException, OSError) as err:
            raise UserInputError(
                f"trial run {chosen.run_id} (arm {chosen.arm}, seed {chosen.seed}) kept no "
                f"model: its study ran before confirm trials kept theirs, or its upload was "
                f"lost ({joined(err)[:200]})"
            ) from err
        if not (Path(local) / "config.json").is_file():
            raise UserInputError(f"trial run {chosen.run_id} kept no model (no config.json)")
        params, tags = params_and_tags(uri, chosen.run_id)
        facts = provenance(record, chosen, params, tags, folder_labels(Path(local)))
        write_provenance(Path(local), facts)
        if out.exists():
            out.rmdir()
        Path(local).rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from study.export.choose import choose_trial  # MLflow and pandas: after --help
    from study.export.register import register_folder
    from study.tracking.reading import load_study_record

    uri = tracking_uri(args.tracking_uri)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        print(f"error: no MLflow store at {uri}; run the study first", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.best == (args.seed is not None):
        print("error: name the trial with --arm ARM --seed N, or use --best (optionally with "
              "--arm)", file=sys.stderr)  # fmt: skip
        return EXIT_BAD_INPUT
    try:
        record = load_study_record(uri, args.study, args.run_id)
        chosen = choose_trial(record, args.arm, args.seed, args.best)
        out = Path(args.out) if args.out else default_folder(args.study, chosen)
        download_model(uri, record, chosen, out)
        print(f"exported arm {chosen.arm} seed {chosen.seed} ({chosen.metric} "
              f"{chosen.value:.4f}, trial run {chosen.run_id}) to {out}")  # fmt: skip
        if args.register:
            version = register_folder(uri, chosen, out, args.register)
            print(f"registered as models:/{args.register}/{version}")
    except UserInputError as err:
        print(f"error: {joined(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def command() -> int:
    """`python -m study.export` and the installed `study-export`: `main`, then an exit that skips
    the interpreter's last garbage collection, its sqlite stores closed first."""
    return leaving_quickly(stores_closed(pipe_closed_quietly(main)))


if __name__ == "__main__":
    sys.exit(command())
