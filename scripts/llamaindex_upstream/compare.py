"""Compare a run of llama-index-core's tests with our classes swapped in against the stock run.

    python compare.py REFERENCE.xml OURS.xml KNOWN_FAILURES.txt

A test passing in the reference run must pass with our classes, unless it is listed in
``KNOWN_FAILURES.txt`` (``<test id>  # why``: tests that inspect SQL-store internals, or
that hand ``GitMemory`` an option it refuses on purpose). Prints the pass/fail counts of
both runs. Exit status 1 when a test regresses and is not listed, or when nothing ran.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def outcomes(path: Path) -> dict[str, str]:
    """Test id -> ``passed`` / ``failed`` / ``skipped`` from a ``pytest --junitxml`` file."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[name] = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
    return out


def known(path: Path) -> dict[str, str]:
    """Listed test ids (a prefix matches every test under it) -> why."""
    listed = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        entry, _, why = line.partition("#")
        if entry.strip():
            listed[entry.strip()] = why.strip()
    return listed


def _listed(name: str, listed: dict[str, str]) -> str | None:
    for prefix, why in listed.items():
        if name == prefix or name.startswith((prefix + "::", prefix + "[", prefix + ".")):
            return why
    return None


def main(reference: Path, ours: Path, known_failures: Path) -> int:
    ref, got = outcomes(reference), outcomes(ours)
    listed = known(known_failures)
    print(f"stock classes: {dict(Counter(ref.values()))}")
    print(f"our classes:   {dict(Counter(got.values()))}")
    if not got:
        print("no test ran with our classes", file=sys.stderr)
        return 1
    regressions, expected, fixed = [], [], []
    for name, outcome in sorted(got.items()):
        why = _listed(name, listed)
        if outcome == "failed" and ref.get(name) == "passed":
            (expected if why else regressions).append((name, why))
        elif outcome == "passed" and why:
            fixed.append(name)
    for name, why in expected:
        print(f"known failure: {name}  ({why})")
    for name in fixed:
        print(f"listed as failing but passed (remove it from the list): {name}")
    for name, _ in regressions:
        print(f"REGRESSION: {name} passes with the stock classes, fails with ours", file=sys.stderr)
    print(f"{len(regressions)} regressions, {len(expected)} known failures")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
