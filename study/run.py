"""`python -m study.run NAME`: run a study.

Interim (until the Ray Tune orchestration lands): runs one trial of the trainable on the
embedded default (MiniLM + WNUT-16) so the README's main command works end to end.
"""

from __future__ import annotations

import argparse
import sys

from trainables import train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m study.run", description=__doc__)
    parser.add_argument("study", help="study name (a file in search_spaces/)")
    args, rest = parser.parse_known_args(argv)
    if args.study != "ner_depth":
        print(f"error: unknown study {args.study!r}; known: ner_depth", file=sys.stderr)
        return 2
    return train.main(rest)


if __name__ == "__main__":
    sys.exit(main())
