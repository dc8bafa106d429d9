"""The end of a study that ran: its state set to finished in MLflow and its report written.
The study's data is safe in MLflow whatever the report does; a report that fails is one
line with the command that makes it. The report's imports (pandas, matplotlib, deepsig with
torch) are started in the background while the trials run (`preload_report`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import shlex
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from study.folder_names import report_folder
from study.names import default_tracking_uri
from study.outputs import DEFAULT_REPORTS, NO_REPORT, wants_report
from trainables.errors import first_line, joined

if TYPE_CHECKING:
    from study.execution import PhaseContext
    from study.tracking import StudyTracker
    from study.tracking.start import DriverTime

log = logging.getLogger("study")  # the driver's logger


def finish_and_report(
    context: PhaseContext,
    tracker: StudyTracker,
    driver_time: DriverTime,
    reports: str,
    profile: str,
) -> tuple[Path | None, str | None]:
    """The finished study's state in MLflow and its report: the report's folder (None
    without one), and the line that says the report failed (None when it did not)."""
    from study.tracking.store import patiently

    spec, study_run, uri = context.spec, context.study_run, context.tracking_uri
    finished = {"state": "finished", **driver_time.tags()}
    patiently(lambda: tracker.set_tags(study_run, finished), uri)
    report, problem = None, None
    again = report_command(uri, spec.name, study_run, reports, profile)
    if not wants_report(reports):
        print(f"no report made (--reports {NO_REPORT}); make it with: {again}")
    else:
        report, problem = _report(tracker, uri, spec.name, study_run, reports, again)
    patiently(lambda: tracker.end_study(study_run, context.arm_runs, "FINISHED"), uri)
    return report, problem


def report_command(uri: str, study: str, study_run: str, reports: str, profile: str) -> str:
    """The command that writes the study run's report where this one would have."""
    command = f"python -m study.report {shlex.quote(study)} --run-id {study_run}"
    if uri != default_tracking_uri():
        command += f" --tracking-uri {shlex.quote(uri)}"
    if wants_report(reports) and Path(reports) != Path(DEFAULT_REPORTS):
        command += f" --out {shlex.quote(str(report_folder(reports, study, profile)))}"
    return command


def preload_report() -> None:
    """Import the report's modules (pandas, matplotlib, deepsig with torch: seconds) in the
    background while the trials run, not on the way out when the user is waiting."""
    threading.Thread(target=_import_quietly, args=("study.report",), daemon=True).start()


def _import_quietly(module: str) -> None:
    """A driver that stops early (bad input, full disk) exits while this import runs, which
    then fails on the way out; `_report` imports again and says any real error."""
    with contextlib.suppress(BaseException):
        importlib.import_module(module)


def _report(
    tracker: StudyTracker, uri: str, study: str, study_run: str, reports: str, again: str
) -> tuple[Path | None, str | None]:
    """The study's data is safe in MLflow whatever happens here, and the study counts as
    finished there; a failed report is one line with the command (`again`) that makes it,
    and an exit code that says so (EXIT_FAILED). The report only reads: its summary and its
    folder are logged here, on the runs this driver owns. The report's folder, absolute, and
    None; or None and that line."""
    from study.report.build import run_metrics, write_report  # see preload_report
    from study.tracking.store import patiently

    try:
        report = write_report(uri, study, run_id=study_run, reports_root=reports)
        per_run, counts = run_metrics(report)
        patiently(lambda: tracker.log_report(study_run, per_run, counts, report.folder), uri)
    except Exception as err:  # noqa: BLE001 - any failure of the report, never of the study
        log.debug("the report failed", exc_info=err)  # its traceback, with --verbose
        return None, joined(
            f"the study finished but its report failed ({type(err).__name__}: "
            f"{first_line(err, 300)}); its data is in MLflow: make the report with: {again}"
        )
    print(report.summary_line())
    return report.folder.resolve(), None
