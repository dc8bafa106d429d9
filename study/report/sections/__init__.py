"""The report's optional sections, one module each (see `study.report.section`)."""
