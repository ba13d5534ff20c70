"""One setting for every wait in the test suite: ``GOT_TEST_TIMEOUT`` (seconds, default 600).

A test that waits (a subprocess, ``communicate``, ``wait``, a polling loop, a thread join)
waits at most :data:`TEST_TIMEOUT`, and each test as a whole gets the same limit from
pytest-timeout (``tests/conftest.py``). These limits only stop a test that hangs: a busy
machine (another suite running beside this one, several developers on two cores) can slow a
step that takes 30 s when idle to several minutes, so nothing here is short, and no test
asserts how long something took.

    GOT_TEST_TIMEOUT=1200 python -m pytest -q     # an even slower machine
"""

from __future__ import annotations

import math
import os
import time

__all__ = ["TEST_TIMEOUT", "deadline"]


def _setting() -> float:
    raw = os.environ.get("GOT_TEST_TIMEOUT", "").strip()
    if not raw:
        return 600.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"GOT_TEST_TIMEOUT must be a number of seconds, not {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"GOT_TEST_TIMEOUT must be a positive number of seconds, not {raw!r}")
    return value


#: The most seconds any one test, or any one wait inside a test, may take.
TEST_TIMEOUT: float = _setting()


def deadline() -> float:
    """A ``time.monotonic()`` value :data:`TEST_TIMEOUT` seconds from now, for polling loops."""
    return time.monotonic() + TEST_TIMEOUT
