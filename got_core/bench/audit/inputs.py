"""Check: no model *input* recorded in any trace states the gold (the paper's "verbatim gold
letter in any trace?" row), and where a protocol injects it on purpose, say so separately.

What a node records that the model was given:

* the node's prompt (``metadata.json`` ``prompt``). The question block (which holds every
  option, the gold one included) and what the model itself wrote earlier in the same tree
  (a draft fed to a revision, the answer of a failed attempt in a re-expansion's note) are
  not the harness telling the answer, and are cut out before the prompt is scanned;
* the memory's lessons shown in the system prompt (the root's ``lessons``): retrieved
  lessons, or the sweep's injected worked example;
* what tools answered (``trace.jsonl`` observations) and every other string a trace step
  holds outside the model's own words (``thought``, ``action``, ``action_input``, a
  verifier's ``raw`` / ``reason``).

Rules (:mod:`~got_core.bench.audit.needles`): the prompt and the lessons must neither state
the expected answer nor carry a gold-letter marker; tool output and other trace fields must
carry no marker that names the gold as gold (``expected answer: 24``; a calculator that
prints the right number is the model's own work); and no JSON key anywhere in a node may
name the gold and hold it (``expected_answer``, ``gold_letter``).

By design: the copyability sweep injects a worked example *with its answer* (its identical
and paraphrase tiers are the problem itself). Lessons of a memory the protocol injects on
purpose (``protocol.answer_free_memory`` false, memory mode ``injected``), and inputs of the
arms listed in ``protocol.inputs_by_design``, are counted in their own row, per arm.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from got_core.bench.audit._core import Check, finding, listing
from got_core.bench.audit._view import NodeFiles, RunView, TaskView, final_text
from got_core.bench.audit.needles import MIN_ANSWER_CHARS, gold_keys, letter_markers, occurrences

__all__ = ["BY_DESIGN", "NAME", "check_inputs", "model_inputs"]

NAME = "no gold in model inputs"
BY_DESIGN = "gold in model inputs by design"

#: Trace-step fields that hold the model's own words (it may state its answer there).
_MODEL_WORDS = frozenset({"thought", "action", "action_input", "raw", "reason", "verdict"})
#: What a marker in tool output must say to count: that the value is *the gold*.
_GOLD_CUE = re.compile(
    r"\b(?:gold(?:en)?|expected|correct|reference|true)(?:[\s_-]*(?:answer|solution|value|result)s?)?"
    r"\**\s*(?:is|was|:|=)[\s$*({\[\"']*$",
    re.IGNORECASE,
)


def _failure_note() -> re.Pattern[str]:
    from got_core.solver import _prompts as P

    frame = P.failure_context("\x00A\x00", "\x00F\x00")
    pattern = re.escape(frame).replace(re.escape("\x00A\x00"), "(?P<a>.*?)").replace(re.escape("\x00F\x00"), ".*?")
    return re.compile(pattern, re.DOTALL)


def _own_words(nodes: list[NodeFiles], method: str) -> tuple[list[str], set[str]]:
    """What the model wrote in this tree: each node's final text, and its extracted answers."""
    texts, answers = [], {"no answer"}
    for n in nodes:
        if n.label == "root":
            continue
        text = final_text(n, method)
        if text:
            texts += [text, text[:4000]]  # a revision prompt quotes a draft's first 4000 characters
        if n.meta.get("answer") is not None:
            answers.add(str(n.meta["answer"]))
    return sorted(set(texts), key=len, reverse=True), answers


def _clean_prompt(prompt: str, block: str, texts: list[str], answers: set[str], note: re.Pattern[str]) -> str:
    cleaned = prompt.replace(block, "\n")
    for text in texts:
        cleaned = cleaned.replace(text, "\n")
    # A re-expansion tells the model the answer of its own failed attempt: not an injection.
    return note.sub(lambda m: "\n" if m.group("a") in answers else m.group(0), cleaned)


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in _MODEL_WORDS for s in _strings(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{path}[{i}]")]
    return []


def model_inputs(view: RunView, tv: TaskView) -> list[tuple[str, str, str]]:
    """``(kind, where, text)`` for every model input recorded in ``tv``'s tree.

    ``kind`` is ``prompt`` (a node's prompt, cleaned as the module docstring says),
    ``lesson`` (a lesson shown in the system prompt) or ``trace`` (tool output and other
    non-model fields of a trace step).

    Raises:
        ValueError: the root does not hold the recorded question (see :meth:`RunView.question`).
    """
    from got_core.solver import _prompts as P

    question, choices = view.question(tv)
    block = P.question_block(question, choices or None)
    nodes = view.nodes(tv)
    texts, answers = _own_words(nodes, str((tv.record or {}).get("method", "")))
    note = _failure_note()
    out: list[tuple[str, str, str]] = []
    for n in nodes:
        where = f"node {n.oid[:10]} ({n.label})"
        if isinstance(n.meta.get("prompt"), str):
            out.append(("prompt", f"{where} prompt", _clean_prompt(n.meta["prompt"], block, texts, answers, note)))
        for i, lesson in enumerate(n.meta.get("lessons") or []):
            out.append(("lesson", f"{where} lesson {i + 1}", str(lesson)))
        for i, step in enumerate(n.trace):
            out += [("trace", f"{where} trace step {i + 1} {path}", s) for path, s in _strings(step, "")]
    return out


def _gold_stated(text: str, answer: str | None, min_chars: int) -> list[str]:
    """Occurrences of the answer that a marker names as the gold (for tool output)."""
    return [
        o.context
        for o in occurrences(text, answer, min_chars)
        if _GOLD_CUE.search(text[max(0, o.start - 48) : o.start])
    ][:1]


def _scan(view: RunView, tv: TaskView, min_chars: int) -> tuple[list[str], int]:
    """Every place the gold stands in ``tv``'s model inputs (one line each), and how many inputs there were."""
    rec = tv.record or {}
    entry = view.problems.get(str(rec.get("problem_id")), {})
    answer, letter = entry.get("answer"), entry.get("gold_letter")
    letters = letter or ""
    hits: list[str] = []
    inputs = model_inputs(view, tv)
    for kind, where, text in inputs:
        if kind == "trace":
            found = _gold_stated(text, answer, min_chars) + [
                c for lt, c in letter_markers(text, letters) if lt == letter
            ]
        else:
            found = [o.context for o in occurrences(text, answer, min_chars) if o.stated]
            found += [c for lt, c in letter_markers(text, letters) if lt == letter]
        hits += [f"{kind} {where}: {c!r}" for c in found[:1]]
    for n in view.nodes(tv):
        for label, value in (("metadata.json", n.meta), ("scores.json", n.scores), ("trace.jsonl", n.trace)):
            hits += [
                f"key in node {n.oid[:10]} ({n.label}) {label}: {k}"
                for k in gold_keys(value, answer, letter, min_chars)
            ]
    return hits, len(inputs)


def _by_design(view: RunView, tv: TaskView) -> bool:
    proto = view.config.get("protocol") or {}
    rec = tv.record or {}
    if rec.get("arm") in (proto.get("inputs_by_design") or {}):
        return True
    return proto.get("answer_free_memory") is False and (rec.get("memory") or {}).get("mode") == "injected"


def check_inputs(view: RunView, min_chars: int = MIN_ANSWER_CHARS) -> tuple[Check, Check]:
    """The two rows: gold in inputs outside the protocol's design (FAIL), and by design (counted).

    Returns:
        ``(no gold in model inputs, gold in model inputs by design)``.
    """
    leaks: list[str] = []
    by_design: Counter[str] = Counter()
    questions: Counter[str] = Counter()
    designed_hits: list[str] = []
    n_inputs = 0
    for tv in view.finished():
        hits: list[str] = []
        with finding(leaks, tv.key):
            hits, n = _scan(view, tv, min_chars)
            n_inputs += n
        arm = str((tv.record or {}).get("arm"))
        if _by_design(view, tv):
            questions[arm] += 1
            # Only what the memory injected is by design; a gold in a prompt or a key still fails.
            designed = [h for h in hits if h.startswith("lesson ")]
            by_design[arm] += bool(designed)
            designed_hits += designed
            hits = [h for h in hits if not h.startswith("lesson ")]
        leaks += [f"{tv.key}: {h}" for h in hits]
    rule = (
        f"{n_inputs} recorded inputs of {len(view.finished())} trees (prompts less the question and the "
        f"model's own words, lessons shown, tool output, trace fields, JSON keys); answers of {min_chars}+ "
        "characters anywhere, shorter ones as whole tokens stated as answers, gold-letter markers"
    )
    if leaks:
        first = Check(NAME, "FAIL", f"{len(leaks)} findings: {listing(leaks)}. Rule: {rule}")
    else:
        first = Check(NAME, "PASS", f"0 outside the protocol's design. Rule: {rule}")
    if not questions:
        second = Check(BY_DESIGN, "SKIP", "no protocol of this run injects the answer on purpose")
    else:
        arms = ", ".join(f"{arm} {by_design[arm]}/{n}" for arm, n in questions.items())
        second = Check(
            BY_DESIGN,
            "PASS",
            f"questions whose injected memory shows the gold, by arm: {arms} (the protocol injects a "
            f"worked example with its answer: {(view.config.get('protocol') or {}).get('answer_free_reason', '')})",
        )
    return first, second
