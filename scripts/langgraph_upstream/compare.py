"""Check a run of LangGraph's own tests: every test passing with a reference saver passes with ours.

    python compare.py fixtures THEIR_CONFTEST OUR_CONFTEST   # ours defines every fixture theirs does
    python compare.py results RESULTS.xml                      # compare outcomes (pytest --junitxml)

Our savers and the reference each stands in for (same test, same other parameters):
``git`` ~ ``sqlite``, ``git_aes`` ~ ``sqlite_aes``, ``git_aio`` ~ ``sqlite_aio``.
Exit status 1 when one of our tests fails while its reference passes (or, with no
reference in the run, when one fails at all), or when no test of ours ran.
"""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REFERENCE = {"git": "sqlite", "git_aes": "sqlite_aes", "git_aio": "sqlite_aio"}


def fixtures(path: Path) -> set[str]:
    """Names of the functions a conftest decorates with ``pytest.fixture``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Attribute) and target.attr == "fixture":
                    names.add(node.name)
    return names


def _outcomes(path: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[name] = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
    return out


def _reference_id(name: str) -> str | None:
    match = re.fullmatch(r"(.*)\[(.*)\]", name)
    if not match:
        return None
    tokens = match.group(2).split("-")
    if not any(t in REFERENCE for t in tokens):
        return None
    return f"{match.group(1)}[{'-'.join(REFERENCE.get(t, t) for t in tokens)}]"


def compare(path: Path) -> int:
    outcomes = _outcomes(path)
    ours = {n: o for n, o in outcomes.items() if _reference_id(n)}
    counts = Counter(ours.values())
    regressions, shared, unmatched = [], [], []
    for name, outcome in sorted(ours.items()):
        if outcome != "failed":
            continue
        reference = outcomes.get(_reference_id(name))
        if reference is None:
            unmatched.append(name)
        elif reference == "failed":
            shared.append(name)
        else:
            regressions.append(f"{name} (reference: {reference})")
    print(
        f"our savers: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped "
        f"of {len(ours)}; all tests in the run: {len(outcomes)}"
    )
    for title, rows in (
        ("FAIL where the reference saver passes", regressions),
        ("fail with no reference saver in the run", unmatched),
        ("fail for the reference saver too (not counted)", shared),
    ):
        if rows:
            print(f"{title}:")
            print("\n".join(f"  {r}" for r in rows))
    if not ours:
        print("no test of ours ran; is GOT_UPSTREAM_SAVERS right?")
        return 1
    return 1 if regressions or unmatched else 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "fixtures":
        missing = fixtures(Path(argv[1])) - fixtures(Path(argv[2]))
        if missing:
            print(
                f"LangGraph's conftest defines fixtures ours lacks: {sorted(missing)}; "
                "add them to scripts/langgraph_upstream/upstream_conftest.py"
            )
            return 1
        return 0
    if len(argv) == 2 and argv[0] == "results":
        return compare(Path(argv[1]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
