"""The study driver (`python -m study.run`), its statistics and its report.

Importing the package imports nothing: the report must load without Ray or torch.
"""
