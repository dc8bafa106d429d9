"""The driver's log line, `HH:MM:SS logger.name: message`: one definition for `study.run` and
`study.report`, and for bench/study_overhead.py, which reads a study's timeline from the
timestamps and logger names of those lines (its test formats lines with these)."""

LOG_FORMAT = "%(asctime)s %(name)s: %(message)s"
LOG_DATE_FORMAT = "%H:%M:%S"
