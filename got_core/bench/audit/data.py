"""Checks on what was asked: a disjoint split, the problems and split re-derived from the data
files, one gold letter per problem across arms."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from got_core.bench.audit._core import Check, listing
from got_core.bench.audit._view import RunView
from got_core.types import canonical_json

__all__ = ["check_data", "check_gold", "check_split"]

#: Experiments whose problems are ``stratified_split(pool, k_study, m_test, seed)`` of the data files.
_DRAWN = ("five_substrates", "copyability_sweep", "test_time_arms", "system_comparison")


def check_split(view: RunView) -> Check:
    """Study and test share no problem id and no normalised question."""
    split = view.config.get("split")
    if not split:
        return Check("split disjoint", "SKIP", "no study/test split in this experiment")
    by_id = view.problems
    ids = set(split["study"]) & set(split["test"])
    texts = {by_id[i]["question_sha"] for i in split["study"]} & {by_id[i]["question_sha"] for i in split["test"]}
    if ids or texts:
        return Check("split disjoint", "FAIL", f"{len(ids)} shared ids, {len(texts)} shared normalised questions")
    strata = ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted((split.get("strata") or {}).items()))
    return Check(
        "split disjoint",
        "PASS",
        f"study {len(split['study'])}, test {len(split['test'])}: 0 shared ids, "
        f"0 shared normalised questions; strata (study/test by {split.get('key')}): {strata}",
    )


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _entry(p: Any) -> dict[str, Any]:
    from got_core.bench.datasets import normalize_question

    return {
        "kind": p.kind,
        "answer": p.answer,
        "gold_letter": p.gold_letter,
        "choices_sha": _sha(canonical_json(p.choices)),
        "question_sha": _sha(normalize_question(p.question)),
    }


def _load(config: dict[str, Any]) -> tuple[list[Any] | None, list[str], list[str]]:
    """``(pool or None, problems, notes)``: the data files re-read when every one is as recorded."""
    from got_core.bench.datasets import load_gpqa, load_math500

    data = config.get("data") or {}
    pool: list[Any] = []
    bad, absent = [], []
    for name in ("math", "gpqa"):
        entry = data.get(name)
        if not entry:
            continue
        path = Path(entry["path"])
        if not path.is_file():
            absent.append(f"{name}: {path} is not there")
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != entry["sha256"]:
            bad.append(
                f"{path.name} changed since the run (sha256 {digest[:12]}…, the run read {entry['sha256'][:12]}…)"
            )
            continue
        if name == "math":
            pool += load_math500(path, limit=entry.get("limit"))
        else:
            pool += load_gpqa(path, seed=int(data.get("shuffle_seed", 0)), limit=entry.get("limit"))
    return (None if bad or absent else pool), bad, absent


def check_data(view: RunView) -> Check:
    """The recorded problems (gold answers, letters, option orders, questions) and the split
    are what the data files give, re-read and re-split with the recorded seed.

    A data file that changed since the run FAILs; one that is no longer there makes the
    check SKIP (nothing to compare with; ``same gold letters across arms`` still runs).
    """
    name = "problems match the data files"
    config = view.config
    if not any((config.get("data") or {}).get(k) for k in ("math", "gpqa")):
        return Check(name, "SKIP", "config.json records no data files")
    pool, bad, absent = _load(config)
    if bad:
        return Check(name, "FAIL", listing(bad))
    if pool is None:
        return Check(name, "SKIP", f"cannot re-derive the problems: {listing(absent)}")
    fresh = {p.id: p for p in pool}
    for pid, entry in view.problems.items():
        p = fresh.get(pid)
        if p is None:
            bad.append(f"{pid} is not in the data files")
            continue
        mine = _entry(p)
        diff = [k for k, v in mine.items() if entry.get(k) != v]
        if diff:
            bad.append(f"{pid}: {', '.join(diff)} differ from the data")
    detail = (
        f"{len(view.problems)} problems equal to the data re-read (answers, gold letters, option orders, questions)"
    )
    identity, seed = config.get("identity") or {}, int((config.get("data") or {}).get("shuffle_seed", 0))
    # The four experiments of the paper draw their problems this way; others say how in their own config.
    if config.get("experiment") in _DRAWN and isinstance(identity.get("m_test"), int):
        from got_core.bench.datasets import stratified_split

        split = config.get("split")
        k = int(identity.get("k_study") or 0) if split else 0
        again = stratified_split(pool, k, int(identity["m_test"]), seed)
        if split:
            if [p.id for p in again.study] != list(split["study"]) or [p.id for p in again.test] != list(split["test"]):
                bad.append(f"the recorded split is not the one the data and seed {seed} give")
        elif [p.id for p in again.test] != list(view.problems):
            bad.append(f"the recorded test problems are not the ones the data and seed {seed} give")
        detail += f"; the {'split' if split else 'test set'} re-drawn with seed {seed} is the recorded one"
    if bad:
        return Check(name, "FAIL", f"{len(bad)} differences: {listing(bad)}")
    return Check(name, "PASS", detail)


def check_gold(view: RunView) -> Check:
    """Every arm's record of a multiple-choice problem has the config's gold letter and option order."""
    mcq = {pid: p for pid, p in view.problems.items() if p["kind"] == "mcq"}
    if not mcq:
        return Check("same gold letters across arms", "SKIP", "no multiple-choice problems in this run")
    bad, arms_seen = [], set()
    for rec in filter(None, view.records.values()):
        p = mcq.get(rec["problem_id"])
        if p is None:
            continue
        arms_seen.add(rec["arm"])
        if rec.get("gold_letter") != p["gold_letter"] or rec.get("choices_sha") != p["choices_sha"]:
            bad.append(f"{rec['arm']}/{rec['problem_id']}: {rec.get('gold_letter')} vs {p['gold_letter']}")
    if bad:
        return Check("same gold letters across arms", "FAIL", f"{len(bad)} mismatches: {listing(bad)}")
    return Check(
        "same gold letters across arms",
        "PASS",
        f"{len(mcq)} multiple-choice problems × {len(arms_seen)} arms: one gold letter and option order each",
    )
