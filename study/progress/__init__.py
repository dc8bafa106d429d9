"""What a running study shows: its own progress instead of Ray's.

- `line`: `StudyProgress`, one line with trials finished/running/planned per phase, the best
  arm so far, elapsed time and an ETA from measured trial times; rewritten in place on a
  terminal, logged once a minute (and at the end of each phase) otherwise;
- `callback`: the Tune callback that feeds it from the driver's loop;
- `log_format`: the driver's `HH:MM:SS logger: message` line;
- `quiet`: what keeps Ray's own output (trial tables, a checkpoint line per evaluation) out
  of the terminal unless `--verbose`.

Nothing is imported here: Ray workers import `study.progress.quiet` at start-up, and it must
not pull in the driver's modules.
"""
