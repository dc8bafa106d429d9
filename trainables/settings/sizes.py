"""Sizes written by people (`20MB`, `512kB`, `1.5 GiB`, `20000000`) as a number of bytes."""

from __future__ import annotations

import math
import re
from typing import Any

UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)")
EXAMPLES = "a size such as 20MB, 512kB, 1.5GiB or a whole number of bytes"


def parse_size(value: Any) -> int:
    """Bytes, at least 1. kB/MB/GB are powers of 1000, KiB/MiB/GiB powers of 1024; the unit's
    case does not matter. Anything else raises ValueError naming what is allowed."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected {EXAMPLES}")
    if isinstance(value, str):
        match = _SIZE.fullmatch(value.strip().lower())
        if not match or match.group(2) not in UNITS:
            raise ValueError(f"expected {EXAMPLES}")
        number, unit = float(match.group(1)), UNITS[match.group(2)]
    else:
        number, unit = float(value), 1
    size = number * unit
    if not math.isfinite(size) or size < 1 or (unit == 1 and not size.is_integer()):
        raise ValueError(f"expected {EXAMPLES}, at least 1 byte")
    return int(size)
