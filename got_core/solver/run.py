"""``solve``: one question, one arm, one budget, every step a commit (§3.2, §6 of arXiv 2606.14470).

:func:`solve` wraps any arm of :mod:`got_core.solver.arms` (the tree of thoughts of
:mod:`got_core.solver.tot` among them): it opens the problem's repository, retrieves
lessons from the memory backend into the node prompts, runs the arm under its budget,
puts the winning path on the session branch and distils one answer-free lesson back
into the memory (unless the memory is read-only).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from got_core.errors import ConfigError, InvalidInputError
from got_core.memory.base import Lesson, MemoryBackend, validate_text
from got_core.names import encode_component
from got_core.repo import ReasoningRepo
from got_core.solver import _prompts as P
from got_core.solver._answers import LETTERS, answer_free
from got_core.solver._engine import NodeRun, SolveContext
from got_core.solver.arms import ARMS
from got_core.solver.budget import Budget, BudgetedModel, BudgetTracker
from got_core.solver.hook import NodeRecorder
from got_core.solver.models import ChatModel, Usage
from got_core.solver.steps import StepRunner
from got_core.solver.tools import get_tools
from got_core.solver.tot import DEFAULT_TOOLS
from got_core.types import Node

__all__ = ["SolveResult", "TreeEntry", "problem_id_for", "run_arm", "solve"]


# ----------------------------------------------------------------------------- results


@dataclass
class TreeEntry:
    """One node of the recorded tree, for printing (``got solve``) and reports."""

    label: str
    role: str
    oid: str
    parent: str | None
    depth: int
    round: int
    answer: str | None
    scores: dict[str, float]
    outcome: str
    tags: list[str]


@dataclass
class SolveResult:
    """What :func:`solve` returns.

    Attributes:
        answer: the extracted answer (the option letter for multiple choice), or ``None``.
        letter: the option letter (multiple choice only).
        final_text: the winning node's last model message (give it to an answer checker).
        outcome: ``success`` (validated), ``failed``, ``timeout``, ``budget`` or ``error``.
        arm: the test-time arm that ran.
        problem_id: the problem's id.
        repo_path: the git directory holding the tree.
        session_ref: the branch the winning path ends on.
        winner: the winning node (``None`` when no node finished).
        nodes: every recorded node, in order.
        tree: the tree summary.
        usage: tokens of every model call of this question.
        n_calls: model calls made.
        elapsed_s: wall-clock seconds.
        lessons_used: lessons retrieved and injected into the prompts.
        lesson: the lesson written to memory (``None`` when none was written).
        lesson_source: ``model``, ``template``, ``read-only``, ``no memory`` or ``refused``.
        validation: the winner's validation checks.
        rounds: 1, or 2 after a re-expansion.
    """

    answer: str | None
    letter: str | None
    final_text: str
    outcome: str
    arm: str
    problem_id: str
    repo_path: Path
    session_ref: str
    winner: Node | None
    nodes: list[Node]
    tree: list[TreeEntry]
    usage: Usage
    n_calls: int
    elapsed_s: float
    lessons_used: list[Lesson] = field(default_factory=list)
    lesson: str | None = None
    lesson_source: str = "no memory"
    validation: dict[str, Any] | None = None
    rounds: int = 1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary (no node bodies)."""
        return {
            "answer": self.answer,
            "letter": self.letter,
            "outcome": self.outcome,
            "arm": self.arm,
            "problem_id": self.problem_id,
            "repo_path": str(self.repo_path),
            "session_ref": self.session_ref,
            "winner": self.winner.oid if self.winner else None,
            "usage": self.usage.to_dict(),
            "n_calls": self.n_calls,
            "elapsed_s": round(self.elapsed_s, 4),
            "rounds": self.rounds,
            "lesson": self.lesson,
            "lesson_source": self.lesson_source,
            "validation": self.validation,
            "tree": [vars(e) for e in self.tree],
        }


def _tree(nodes: Sequence[Node]) -> list[TreeEntry]:
    return [
        TreeEntry(
            label=str(n.metadata.get("label", "")),
            role=str(n.metadata.get("role", "")),
            oid=n.oid or "",
            parent=n.parents[0] if n.parents else None,
            depth=n.depth,
            round=int(n.metadata.get("round", 0) or 0),
            answer=n.metadata.get("answer"),
            scores=dict(n.scores),
            outcome=n.outcome,
            tags=sorted(n.tags),
        )
        for n in nodes
    ]


# ----------------------------------------------------------------------------- solve


def problem_id_for(question: str, choices: Sequence[str] | None = None) -> str:
    """A stable id from the content: ``q-<12 hex>`` (the same question, the same repository)."""
    h = hashlib.sha256(question.strip().encode("utf-8"))
    for c in choices or []:
        h.update(b"\x00" + c.strip().encode("utf-8"))
    return "q-" + h.hexdigest()[:12]


def _check_choices(choices: Sequence[str] | None) -> list[str] | None:
    if choices is None:
        return None
    if isinstance(choices, str) or not 2 <= len(choices) <= len(LETTERS):
        raise InvalidInputError(f"choices must be a list of 2 to {len(LETTERS)} option texts")
    return [validate_text(c, f"choice {LETTERS[i]}", limit=16_384).strip() for i, c in enumerate(choices)]


_LESSON_TEMPLATES = {
    ("mcq", True): "For multiple-choice questions, argue for each option separately and keep the option whose "
    "case survives an independent check of every calculation.",
    ("mcq", False): "For multiple-choice questions, a confident argument for one option is not enough: check "
    "each option against the question's exact conditions before committing.",
    ("math", True): "For free-form math, solve by two different methods and confirm the computations with a "
    "tool before giving the final value.",
    ("math", False): "For free-form math, verify each computation with a tool and re-read what the question "
    "asks for before giving the final value.",
}


def _lesson(
    ctx: SolveContext,
    memory: MemoryBackend | None,
    result_run: NodeRun | None,
    outcome: str,
    problem_id: str,
    score: float,
) -> tuple[str | None, str]:
    """Distil one answer-free lesson and write it (§3.4); returns ``(text, source)``."""
    if memory is None:
        return None, "no memory"
    if getattr(memory, "read_only", False):
        return None, "read-only"
    answers = [a for a in (result_run.answer, result_run.letter) if a] if result_run else []
    if result_run and result_run.letter and ctx.choices:
        answers.append(ctx.choices[LETTERS.index(result_run.letter)])
    text, source = None, "model"
    raw = ctx.ask(
        P.lesson_prompt(ctx.question, ctx.choices, outcome, result_run.text if result_run else ""), seed_offset=300
    )
    if raw:
        body = re.split(r"(?im)^\s*lesson\s*:\s*", raw)[-1].strip()
        text = answer_free(body[:1200], answers, ctx.choices, ctx.n_choices) if body else None
    if text is None:  # refused (it named the answer) or no model call left: a generic, answer-free lesson
        source = "template" if not raw else "template (model lesson refused)"
        text = answer_free(
            _LESSON_TEMPLATES[("mcq" if ctx.choices else "math", outcome == "success")],
            answers,
            ctx.choices,
            ctx.n_choices,
        )
        if text is None:
            return None, "refused"
    meta = {"arm": ctx.arm, "outcome": outcome, "kind": "mcq" if ctx.choices else "math", "source": source}
    add = memory.add_success if outcome == "success" else memory.add_failure
    add(text, source_problem=problem_id, score=max(0.0, min(1.0, score)), meta=meta)
    return text, source


def solve(
    question: str,
    choices: Sequence[str] | None = None,
    *,
    model: ChatModel,
    memory: MemoryBackend | None = None,
    repo_root: str | Path | None = None,
    repo: ReasoningRepo | None = None,
    session_ref: str | None = None,
    problem_id: str | None = None,
    tools: Sequence[str] = DEFAULT_TOOLS,
    budget: Budget | None = None,
    arm: str = "tot",
    seed: int | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    k_lessons: int = 3,
    max_steps: int = 3,
    parallel: bool = False,
    steps: StepRunner | None = None,
    native_tools: bool = False,
    arm_options: dict[str, Any] | None = None,
    record_timings: bool = True,
) -> SolveResult:
    """Solve one question with a test-time arm, every node a commit (§3.2, §6.2).

    Args:
        question: the problem statement (for multiple choice, without the options).
        choices: the option texts (multiple choice), or ``None`` (free-form).
        model: any chat model (``OpenAICompatibleModel`` for vLLM, a scripted model for tests).
        memory: a memory backend; its lessons are injected into the prompts and one
            answer-free lesson is written back unless it is read-only.
        repo_root: give each problem its own repository ``<repo_root>/<problem id>.git``
            (winning path on ``master``).
        repo: or record into this shared repository, on the session branch ``session_ref``
            (default ``sessions/<problem id>``).
        session_ref: the session branch in ``repo``.
        problem_id: defaults to a content hash of the question and options.
        tools: tool names the ReAct loop may call (``()`` for none).
        budget: wall-clock and token limits (:class:`Budget` defaults).
        arm: ``tot`` or another name in :data:`got_core.solver.arms.ARMS`.
        seed: base seed (node ``i`` uses ``seed + i``).
        temperature: overrides each arm's default sampling temperature.
        max_tokens: per-call completion limit.
        k_lessons: lessons retrieved from memory.
        max_steps: ReAct steps per node (§3.2: 3).
        parallel: run sibling nodes concurrently (real servers; scripted replies in a
            fixed order need ``False``).
        steps: a durable-execution engine's step runner (:mod:`got_core.solver.steps`):
            each node and each plain call is a recorded step; siblings run in order.
        native_tools: offer tools as OpenAI function specs too.
        arm_options: extra keyword arguments for the arm (``n`` samples, ``branching``…).
        record_timings: keep measured latencies in ``trace.jsonl``; pass ``False`` (with a
            :class:`~got_core.types.DeterministicClock` repository) for seeded re-runs that
            write bit-identical commits.

    Returns:
        A :class:`SolveResult`; a spent budget is its ``outcome``, not an exception.

    Raises:
        InvalidInputError: an empty question or bad choices.
        ConfigError: no repository given, an unknown arm or tool, bad arm options.
    """
    t0 = time.perf_counter()
    question = validate_text(question, "question", limit=256 * 1024).strip()
    opts = _check_choices(choices)
    if arm not in ARMS:
        raise ConfigError(f"unknown arm {arm!r}; choose one of {', '.join(ARMS)}")
    try:
        inspect.signature(ARMS[arm]).bind(None, **(arm_options or {}))
    except TypeError as exc:
        raise ConfigError(f"bad options for arm {arm!r}: {exc}") from None
    pid = problem_id or problem_id_for(question, opts)
    own = repo is None
    if repo is None:
        if repo_root is None:
            raise ConfigError("pass repo_root= (one repository per problem) or repo= (a shared repository)")
        repo = ReasoningRepo.open(Path(repo_root) / f"{encode_component(pid, 'problem id')}.git")
        session = None
    else:
        session = session_ref or f"sessions/{encode_component(pid, 'problem id')}"
    tracker = BudgetTracker(budget or Budget())
    bmodel = BudgetedModel(model, tracker)
    try:
        recorder = NodeRecorder(repo, pid, session, arm=arm, timings=record_timings)
        lessons = memory.get_relevant(question, k_lessons) if memory is not None and k_lessons > 0 else []
        ctx = SolveContext(
            question,
            opts,
            bmodel,
            get_tools(list(tools)) if tools else [],
            recorder,
            tracker,
            list(lessons),
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            max_steps=max_steps,
            parallel=parallel,
            steps=steps,
            native_tools=native_tools,
            arm=arm,
        )
        with recorder.batch():  # one notes commit for the whole question
            result = ARMS[arm](ctx, **(arm_options or {}))
        outcome = ctx.stopped or result.outcome
        recorder.finish(result.winner)
        score = result.winner.scores.get("s_comb", 0.0) if result.winner else 0.0
        lesson, source = _lesson(ctx, memory, result.run, outcome, pid, score)
        run = result.run
        return SolveResult(
            answer=run.answer if run else None,
            letter=run.letter if run else None,
            final_text=run.text if run else "",
            outcome=outcome,
            arm=arm,
            problem_id=pid,
            repo_path=Path(repo.path),
            session_ref=recorder.session_ref,
            winner=result.winner,
            nodes=list(recorder.nodes),
            tree=_tree(recorder.nodes),
            usage=bmodel.usage,
            n_calls=bmodel.n_calls,
            elapsed_s=time.perf_counter() - t0,
            lessons_used=list(lessons),
            lesson=lesson,
            lesson_source=source,
            validation=result.validation.to_dict() if result.validation else None,
            rounds=result.rounds,
        )
    finally:
        if own:
            repo.close()


def run_arm(name: str, question: str, choices: Sequence[str] | None = None, **kwargs: Any) -> SolveResult:
    """Run the arm called ``name``: :func:`solve` with ``arm=name``.

    Raises:
        ConfigError: an unknown arm (the message lists them); see ``solve`` for the rest.
    """
    if name not in ARMS:
        raise ConfigError(f"unknown arm {name!r}; choose one of {', '.join(ARMS)}")
    return solve(question, choices, arm=name, **kwargs)
