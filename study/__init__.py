"""The study driver (`python -m study.run`), its statistics and its report.

Importing the package imports nothing heavy: the report must load without Ray or torch. It
only lets the old module names of moved code be imported again, for studies saved before the
move (see `study._moved`).
"""

from study import _moved

_moved.install()
