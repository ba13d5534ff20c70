"""Checks that a result record says what its tree says: the answer is the winning node's, and
the verdict is re-derived from that node's final text and the gold with the run's own checker."""

from __future__ import annotations

import os
from typing import Any

from got_core.bench.audit._core import Check, finding, listing
from got_core.bench.audit._view import RunView, TaskView, final_text

__all__ = ["check_answers", "check_verdicts", "rederive"]

#: Seconds a second, patient math check may take before a disagreement is reported (the run
#: checks with 5 s; a busy machine can time out where the run did not).
_PATIENT_S = float(os.environ.get("GOT_AUDIT_CHECK_TIMEOUT", "30"))


def _answer_problems(view: RunView, tv: TaskView) -> list[str]:
    rec = tv.record or {}
    if rec.get("problem_id") != tv.entry.get("problem_id") or rec.get("arm") != tv.entry.get("arm"):
        return [f"{tv.key}: the record is of {rec.get('arm')}/{rec.get('problem_id')}"]
    view.question(tv)  # the tree answers the recorded question (ValueError otherwise)
    sha = rec.get("winner_sha")
    if not sha:
        if rec.get("answer") is not None or rec.get("correct"):
            return [f"{tv.key}: no winning node, yet the record holds answer {rec.get('answer')!r}"]
        return []
    node = view.winner(tv)
    if node is None:
        return [f"{tv.key}: the winner {str(sha)[:12]} is not a node of its tree"]
    out = []
    for field, value in (
        ("label", node.label),
        ("answer", node.meta.get("answer")),
        ("letter", node.meta.get("letter")),
    ):
        mine = rec.get("winner_label" if field == "label" else field)
        if mine != value:
            out.append(f"{tv.key}: record {field} {mine!r}, winning node {node.oid[:10]} {value!r}")
    return out


def check_answers(view: RunView) -> Check:
    """Each record belongs to its task, and its answer, letter and winner are the winning node's."""
    bad: list[str] = []
    for tv in view.finished():
        with finding(bad, tv.key):
            bad += _answer_problems(view, tv)
    if bad:
        return Check("answers match the winning nodes", "FAIL", f"{len(bad)} records: {listing(bad)}")
    return Check(
        "answers match the winning nodes",
        "PASS",
        f"{len(view.finished())} records: answer, letter and winner label equal their winning node's "
        "metadata; every tree holds the question of config.json",
    )


def _problem(view: RunView, tv: TaskView) -> Any:
    from got_core.bench.datasets import Problem

    rec = tv.record or {}
    entry = view.problems[str(rec.get("problem_id"))]
    question, choices = view.question(tv)
    return Problem(
        id=str(entry["id"]),
        question=question,
        answer=str(entry["answer"]),
        kind=entry["kind"],
        choices=choices,
        gold_letter=entry.get("gold_letter"),
    )


def rederive(problem: Any, text: str) -> bool:
    """The run's verdict rule: ``bool(text) and check_answer(problem, text)``.

    A math check that comes back false is tried once more with a patient timeout
    (``GOT_AUDIT_CHECK_TIMEOUT``, default 30 s): only a timeout makes math-verify say false
    where it would say true, and a busy machine must not turn into a FAIL.
    """
    import logging

    from got_core.bench.checking import check_answer, check_math

    # math-verify warns on every check when its own (signal) timeouts are off, as checking keeps them.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    if not text:
        return False
    if check_answer(problem, text):
        return True
    return problem.kind == "math" and check_math(text, problem.answer, timeout_s=_PATIENT_S)


def _verdict(view: RunView, tv: TaskView) -> tuple[bool | None, bool]:
    """(verdict from the winner's final text, or None when it cannot be cut out; verdict from the extracted answer)."""
    from got_core.bench.checking import check_math

    rec = tv.record or {}
    problem = _problem(view, tv)
    node = view.winner(tv)
    text = final_text(node, str(rec.get("method", ""))) if node is not None else ""
    verdict = None if text is None else rederive(problem, text)
    answer = rec.get("letter") if problem.kind == "mcq" else rec.get("answer")
    if answer is None:
        by_answer = False
    elif problem.kind == "mcq":
        by_answer = answer == problem.gold_letter
    else:
        by_answer = check_math("\\boxed{" + str(answer) + "}", problem.answer)
    return verdict, by_answer


def check_verdicts(view: RunView) -> Check:
    """``correct`` of every record equals the verdict re-derived from the stored answer and the gold.

    The stored answer is the winning node's final text, cut back out of its ``thought.md``
    (the checker reads the whole text, as the run did); the record's extracted answer is
    checked too, and where the two readings differ the detail says how often (a response
    whose last stated letter differs from its ``Final Answer:`` line), without failing.
    """
    bad: list[str] = []
    differ: list[str] = []
    for tv in view.finished():
        with finding(bad, tv.key):
            verdict, by_answer = _verdict(view, tv)
            if verdict is None:
                node = view.winner(tv)
                bad.append(
                    f"{tv.key}: thought.md of the winner {node.oid[:10] if node else '?'} is not as the solver writes it"
                )
                continue
            rec = tv.record or {}
            if bool(rec.get("correct")) != verdict or not isinstance(rec.get("correct"), bool):
                bad.append(f"{tv.key}: recorded correct={rec.get('correct')!r}, re-derived {verdict}")
            if by_answer != verdict:
                differ.append(tv.key)
    n = len(view.finished())
    if bad:
        return Check("verdicts re-derived", "FAIL", f"{len(bad)} of {n} records: {listing(bad)}")
    note = (
        f"; {len(differ)} records whose extracted answer alone reads otherwise ({listing(differ, 2)})"
        if differ
        else "; the extracted answers agree"
    )
    return Check(
        "verdicts re-derived",
        "PASS",
        f"{n} verdicts re-derived with the run's checker (got_core.bench.checking.check_answer: option letters, "
        f"math-verify) from each winning node's final text and the gold: all equal the records{note}",
    )
