"""Check: the files a reader quotes (``results.jsonl``, ``results.csv``, ``timings.jsonl``,
``arms.jsonl``, ``table.md``) say what git says.

The per-record files are written again from the records in ``central.git`` (in task order,
by the run's own writer) and compared byte for byte: an edited value, a dropped line or a
reordered file is named with its first differing line. Per arm, ``arms.jsonl`` and every row
of ``table.md`` must carry the counts, accuracy and Δ recomputed from the git records; the
bootstrap intervals are recomputed too when ``config.json`` records how many resamples the
run drew (``report.n_resamples``), and otherwise must at least agree between the two files
(the ``*`` with the interval's sign).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from got_core.bench.audit._core import Check, listing
from got_core.bench.audit._view import RunView

__all__ = ["check_files", "n_resamples", "table_rows"]

_PER_RECORD = ("results.jsonl", "results.csv", "timings.jsonl")


def n_resamples(config: dict[str, Any]) -> int | None:
    """The bootstrap resamples the run's table drew, when ``config.json`` records them."""
    for holder in (config.get("report") or {}, config.get("identity") or {}, config):
        for key in ("n_resamples", "bootstrap"):
            if isinstance(holder.get(key), int) and not isinstance(holder.get(key), bool):
                return int(holder[key])
    return None


def _first_difference(name: str, mine: bytes, theirs: bytes) -> str:
    a, b = mine.decode("utf-8", "replace").splitlines(), theirs.decode("utf-8", "replace").splitlines()
    if sorted(a) == sorted(b):
        return f"{name} holds git's lines in another order"
    for i, (x, y) in enumerate(zip(a, b), 1):
        if x != y:
            return f"{name} line {i} differs from git ({y[:80]!r})"
    return f"{name} has {len(b)} lines, git's records give {len(a)}"


def table_rows(text: str) -> dict[str, list[str]]:
    """The rows of the first markdown table in ``table.md``: arm -> its cells."""
    rows: dict[str, list[str]] = {}
    started = False
    for line in text.splitlines():
        if line.startswith("| arm |"):
            started = True
            continue
        if started and line.startswith("|---"):
            continue
        if started and line.startswith("| "):
            cells = [c.strip().replace("\\|", "|") for c in line.strip().strip("|").split(" | ")]
            rows[cells[0]] = cells
        elif started:
            break
    return rows


def _arm_rows(view: RunView, records: list[dict[str, Any]], path: Path, bad: list[str]) -> int:
    """Compare ``arms.jsonl`` and ``table.md`` with the summary recomputed from git; returns arms checked."""
    from got_core.bench.report import summarize
    from got_core.bench.stats import format_accuracy, format_delta_row

    lines = [json.loads(x) for x in (path / "arms.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    arms = [str(d["arm"]) for d in lines]
    nr = n_resamples(view.config)
    seed = int((view.config.get("identity") or {}).get("seed", 0))
    rows = summarize(records, str(view.config.get("baseline")), arms=arms, seed=seed, n_resamples=nr or 200)
    fresh = {r.arm: r for r in rows}
    table = table_rows((path / "table.md").read_text(encoding="utf-8"))
    if list(table) != arms:
        bad.append(f"table.md lists arms {list(table)}, arms.jsonl {arms}")
    for d in lines:
        arm, r = str(d["arm"]), fresh.get(str(d["arm"]))
        if r is None:
            bad.append(f"arms.jsonl: git holds no test records of arm {arm!r}")
            continue
        want: dict[str, Any] = {"n": r.n, "correct": r.correct, "accuracy": r.accuracy.acc}
        want["delta"] = r.delta.delta if r.delta else None
        if nr is not None:
            want.update({k: v for k, v in r.to_dict().items() if k not in want})
        for key, value in want.items():
            if d.get(key) != value and not (isinstance(value, float) and abs((d.get(key) or 0) - value) < 1e-9):
                bad.append(f"arms.jsonl {arm}: {key} {d.get(key)!r}, git gives {value!r}")
        if d.get("significant") is not None and d["significant"] != (d["delta_low"] > 0 or d["delta_high"] < 0):
            bad.append(
                f"arms.jsonl {arm}: significant={d['significant']} but the interval is [{d['delta_low']}, {d['delta_high']}]"
            )
        cells = table.get(arm)
        if cells is None:
            continue
        acc = format_accuracy(r.accuracy) if nr is not None else d.get("accuracy_cell")
        delta = (
            (format_delta_row(r.delta, marker="") if r.delta else "— (baseline)")
            if nr is not None
            else (d.get("delta_cell") or "— (baseline)")
        )
        star = "*" if (r.delta.significant if (nr is not None and r.delta) else d.get("significant")) else ""
        got = cells[1:5] if len(cells) >= 5 else cells[1:]
        if got != [str(r.n), acc, delta, star] or not str(acc).startswith(f"{100 * r.accuracy.acc:.1f}%"):
            bad.append(
                f"table.md {arm}: {' | '.join(got)!r}, git gives {' | '.join([str(r.n), str(acc), str(delta), star])!r}"
            )
    return len(lines)


def check_files(view: RunView) -> Check:
    """The result files in the run directory equal what the git records give (see the module docstring)."""
    from got_core.bench.report import write_results

    name = "result files match git"
    if any(tv.record is None for tv in view.tasks):
        return Check(name, "SKIP", "the results are incomplete (see 'results complete'): the files were never final")
    records = [tv.record for tv in view.tasks if tv.record is not None]
    bad: list[str] = []
    with tempfile.TemporaryDirectory(prefix="got-audit-") as tmp:
        write_results(tmp, records)
        for fname in _PER_RECORD:
            mine, there = (Path(tmp) / fname).read_bytes(), view.run_dir / fname
            if not there.is_file():
                bad.append(f"{fname} is missing")
            elif there.read_bytes() != mine:
                bad.append(_first_difference(fname, mine, there.read_bytes()))
    missing = [f for f in ("arms.jsonl", "table.md") if not (view.run_dir / f).is_file()]
    bad += [f"{f} is missing" for f in missing]
    n_arms = 0 if missing else _arm_rows(view, records, view.run_dir, bad)
    if bad:
        return Check(name, "FAIL", f"{len(bad)} differences: {listing(bad)}")
    cis = (
        f"intervals recomputed with {n_resamples(view.config)} resamples"
        if n_resamples(view.config)
        else "intervals agree between arms.jsonl and table.md (config.json does not record the bootstrap resamples)"
    )
    return Check(
        name,
        "PASS",
        f"{', '.join(_PER_RECORD)} rewritten from {len(records)} git records: byte-identical; "
        f"{n_arms} arms of arms.jsonl and table.md carry git's counts, accuracy and Δ; {cis}",
    )
