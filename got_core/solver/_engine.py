"""What every test-time arm shares: the solve context, node runs, scoring, validation, lessons.

An arm (:mod:`got_core.solver.arms`, :mod:`got_core.solver.tot`) is a function of a
:class:`SolveContext`. It runs nodes with :meth:`SolveContext.run_node` (one ReAct
inner loop each, §3.2), scores them (s = 0.6·s_local + 0.4·s_cross), records them
through the context's :class:`~got_core.solver.hook.NodeRecorder`, and returns an
:class:`ArmOutcome`. A spent budget never raises out of here: a node run that hits
it comes back with ``stopped`` set and is recorded with that outcome.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from got_core.errors import ModelError
from got_core.memory.base import Lesson
from got_core.solver import _prompts as P
from got_core.solver._answers import (
    LETTERS,
    extract_answer,
    normalize_math,
    parse_candidate_scores,
    parse_confidence,
    parse_verdict,
)
from got_core.solver.budget import BudgetedModel, BudgetExceededError, BudgetTracker
from got_core.solver.hook import NodeRecorder
from got_core.solver.react import format_tool_instructions, run_react
from got_core.solver.steps import StepRunner, durable_step
from got_core.solver.tools import TOOLS, Tool
from got_core.types import Node

__all__ = ["W_CROSS", "W_LOCAL", "ArmOutcome", "NodeRun", "SolveContext", "Validation", "combine"]

#: §3.2 combined score weights.
W_LOCAL, W_CROSS = 0.6, 0.4


def combine(s_local: float, s_cross: float) -> float:
    """s = 0.6·s_local + 0.4·s_cross, rounded for stable JSON."""
    return round(W_LOCAL * s_local + W_CROSS * s_cross, 6)


@dataclass
class NodeRun:
    """One ReAct node before it is recorded (its s_cross needs its siblings).

    Attributes:
        label: the child's name (its branch).
        role: what the node was asked to do (``argue B``, ``approach 2``, ``sample 3``…).
        prompt: the user prompt it was given.
        text: the model's last message; ``answer`` / ``letter`` extracted from it.
        s_local: the self-rating (``Confidence:``), or the heuristic when none was given.
        s_local_source: ``"model"`` or ``"heuristic"``.
        steps: the ReAct trace; ``usage`` its tokens (a dict).
        stopped: ``"timeout"`` / ``"budget"`` when the budget ran out mid-node, ``"error"``
            when the model failed; ``error`` says how.
    """

    label: str
    role: str
    prompt: str
    text: str = ""
    answer: str | None = None
    letter: str | None = None
    s_local: float = 0.0
    s_local_source: str = "heuristic"
    steps: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = ""
    stopped: str | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str | None:
        """The answer in comparable form (the letter, or the normalised math answer)."""
        return self.letter or normalize_math(self.answer)

    def thought(self, arm: str) -> str:
        """``thought.md``: the role, the reasoning of each step, the final text, the answer."""
        lines = [f"{arm}: {self.role}", ""]
        for step in self.steps[:-1] if self.steps else []:
            if step.get("thought"):
                lines.append(str(step["thought"]).strip())
            if step.get("action"):
                lines += [
                    f"Action: {step['action']}",
                    f"Action Input: {step.get('action_input')}",
                    f"Observation: {step.get('observation')}",
                    "",
                ]
        if self.stopped:
            lines.append(f"(stopped: {self.stopped}; {self.error})")
        else:
            lines.append(self.text.strip() or "(empty answer)")
        lines += ["", f"Extracted answer: {self.answer if self.answer is not None else '(none)'}"]
        return "\n".join(lines).strip() + "\n"


@dataclass
class Validation:
    """The gold-free checks of one node; ``failure`` is the typed reason when ``ok`` is false."""

    ok: bool
    failure: str = ""
    checks: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (stored in the node's note)."""
        return {"ok": self.ok, "failure": self.failure, "checks": self.checks}


@dataclass
class ArmOutcome:
    """What an arm returns: the winning node and its run, the outcome, the validation."""

    winner: Node | None
    run: NodeRun | None
    outcome: str
    validation: Validation | None = None
    rounds: int = 1


@dataclass
class SolveContext:
    """Everything an arm needs for one question.

    Attributes:
        question, choices: the problem (``choices`` is ``None`` for free-form).
        model: the budgeted model (its ``usage`` is the question's).
        tools: tools the ReAct loop may call.
        recorder: the commit-on-score hook.
        tracker: the budget.
        lessons: retrieved from memory, injected into every node prompt.
        temperature: ``None`` lets each arm pick its own default.
        max_tokens: per call (``None``: the model's default).
        seed: base seed; node ``i`` uses ``seed + i``.
        max_steps: ReAct steps per node (§3.2: 3).
        parallel: run sibling nodes concurrently (for real servers).
        steps: a durable-execution engine's step runner (:mod:`got_core.solver.steps`): each
            node run and each plain call becomes one recorded step; siblings then run in order.
        native_tools: offer tools as OpenAI function specs too.
    """

    question: str
    choices: list[str] | None
    model: BudgetedModel
    tools: list[Tool]
    recorder: NodeRecorder
    tracker: BudgetTracker
    lessons: list[Lesson] = field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    max_steps: int = 3
    parallel: bool = False
    steps: StepRunner | None = None
    native_tools: bool = False
    arm: str = "tot"
    _system: str = ""

    def __post_init__(self) -> None:
        tool_text = format_tool_instructions(self.tools, self.max_steps) if self.tools else ""
        self._system = P.system_prompt(tool_text, self.lessons)

    # ------------------------------------------------------------------ basics
    @property
    def n_choices(self) -> int | None:
        """The number of options, or ``None`` for a free-form question."""
        return len(self.choices) if self.choices else None

    @property
    def stopped(self) -> str | None:
        """``timeout`` / ``budget`` once the question's budget is spent."""
        return self.tracker.exceeded

    def _seed(self, offset: int) -> int | None:
        return None if self.seed is None else self.seed + offset

    def ask(self, prompt: str, *, temperature: float | None = 0.0, seed_offset: int = 0) -> str | None:
        """One plain model call (judge, verifier, lesson); ``None`` when the budget or model failed."""
        if self.stopped:
            return None

        def call() -> str | None:
            try:
                return self.model.complete(
                    [{"role": "system", "content": P.SYSTEM}, {"role": "user", "content": prompt}],
                    temperature=temperature,
                    max_tokens=self.max_tokens,
                    seed=self._seed(seed_offset),
                ).text
            except (BudgetExceededError, ModelError):
                return None

        return durable_step(self.steps, self.model, f"ask {seed_offset}", call)

    # ------------------------------------------------------------------ nodes
    def run_node(
        self, label: str, role: str, prompt: str, *, temperature: float | None = None, seed_offset: int = 0
    ) -> NodeRun:
        """Run one ReAct inner loop (≤ ``max_steps`` tool steps) and read its answer and self-rating."""
        run = NodeRun(label=label, role=role, prompt=prompt)
        if self.stopped:
            run.stopped, run.error = self.stopped, "the budget was spent before this node started"
            return run
        messages = [{"role": "system", "content": self._system}, {"role": "user", "content": prompt}]
        try:
            result = run_react(
                self.model,
                messages,
                self.tools,
                self.max_steps,
                native_tools=self.native_tools,
                temperature=temperature,
                max_tokens=self.max_tokens,
                seed=self._seed(seed_offset),
            )
        except BudgetExceededError as exc:
            run.stopped, run.error = exc.reason, str(exc)
            return run
        except ModelError as exc:  # recorded as an "error" node; the siblings carry on
            run.stopped, run.error = "error", f"{type(exc).__name__}: {exc}"
            return run
        run.text, run.steps, run.stop_reason = result.final_text, result.steps, result.stop_reason
        run.usage = result.usage.to_dict()
        run.answer, run.letter = extract_answer(result.final_text, result.answer, self.n_choices)
        conf = parse_confidence(result.final_text)
        if conf is not None:
            run.s_local, run.s_local_source = conf, "model"
        else:  # no self-rating: an answer is worth something, a tool-checked one a little more
            tool_ok = any(s.get("ok") for s in result.steps)
            run.s_local = (0.5 + (0.1 if tool_ok else 0.0)) if run.answer is not None else 0.1
        return run

    def run_many(self, jobs: Sequence[tuple[str, str, str, float | None, int]]) -> list[NodeRun]:
        """Run sibling nodes ``(label, role, prompt, temperature, seed_offset)``, in order or in parallel.

        Sequentially, siblings after the one that spent the budget are not started (and
        not returned); the returned runs are recorded by the caller.
        """

        def one(job: tuple[str, str, str, float | None, int]) -> NodeRun:
            label, role, prompt, temp, offset = job
            return durable_step(
                self.steps,
                self.model,
                f"node {label}",
                lambda: self.run_node(label, role, prompt, temperature=temp, seed_offset=offset),
                asdict,
                lambda d: NodeRun(**d),
            )

        if self.parallel and len(jobs) > 1 and self.steps is None:  # durable steps are ordered
            with ThreadPoolExecutor(len(jobs), thread_name_prefix="got-node") as pool:
                return list(pool.map(one, jobs))
        runs: list[NodeRun] = []
        for job in jobs:
            if self.stopped and runs:
                break  # the node that hit the budget is recorded; siblings never started are not
            runs.append(one(job))
        return runs

    def record_root(self, plan: str) -> Node:
        """The root node: the problem and the arm's plan, on the session branch."""
        thought = f"{self.arm}: problem\n\n{P.question_block(self.question, self.choices)}\n\nPlan: {plan}\n"
        meta = {
            "kind": "mcq" if self.choices else "math",
            "role": "root",
            "choices": list(self.choices or []),
            "lessons": [lesson.text[:500] for lesson in self.lessons],
        }
        return self.recorder.record(thought, {"s_comb": 0.0}, [], meta, [], 0, label="root")

    def record_run(
        self, run: NodeRun, scores: dict[str, float], parent: Node, depth: int = 1, extra: dict[str, Any] | None = None
    ) -> Node:
        """Commit one node run through the hook (a stopped run gets its budget outcome)."""
        trace = list(run.steps)
        if run.stopped:
            trace.append(
                {
                    "type": "stopped",
                    "reason": run.stopped,
                    "error": run.error,
                    "elapsed_s": round(self.tracker.elapsed_s, 3),
                    "tokens": self.tracker.tokens,
                }
            )
        meta = {
            "role": run.role,
            "prompt": run.prompt,
            "answer": run.answer,
            "letter": run.letter,
            "stop_reason": run.stop_reason,
            "usage": run.usage,
            "s_local_source": run.s_local_source,
            **run.extra,
            **(extra or {}),
        }
        return self.recorder.record(
            run.thought(self.arm), scores, trace, meta, [parent], depth, outcome=run.stopped, label=run.label
        )

    # ------------------------------------------------------------------ scoring
    def agreement(self, runs: Sequence[NodeRun]) -> list[float]:
        """s_cross by agreement: the fraction of siblings reaching the same answer."""
        keys = [r.key for r in runs]
        counts = Counter(k for k in keys if k is not None)
        n = len(runs)
        return [0.0 if k is None or n < 2 else (counts[k] - 1) / (n - 1) for k in keys]

    def judge(self, runs: Sequence[NodeRun]) -> tuple[dict[str, float], str | None]:
        """s_cross by a one-shot comparison of the siblings; ``({label: score}, raw text)``."""
        labels = [str(i + 1) for i in range(len(runs))]
        prompt = P.judge_prompt(
            self.question, self.choices, [(lab, r.answer or "", r.text) for lab, r in zip(labels, runs)]
        )
        raw = self.ask(prompt, seed_offset=100)
        parsed = parse_candidate_scores(raw, labels)
        return {runs[int(k) - 1].label: v for k, v in parsed.items()}, raw

    def score(self, runs: Sequence[NodeRun], *, use_judge: bool) -> list[dict[str, float]]:
        """scores.json of each sibling: s_local, s_cross (judge where it answered, else agreement), s_comb."""
        agree = self.agreement(runs)
        judged: dict[str, float] = {}
        raw = None
        live = [r for r in runs if not r.stopped]
        if use_judge and len(live) > 1:
            judged, raw = self.judge(live)
        out = []
        for run, a in zip(runs, agree):
            s_cross = judged.get(run.label, a)
            scores = {
                "s_local": round(run.s_local, 6),
                "s_agree": round(a, 6),
                "s_cross": round(s_cross, 6),
                "s_comb": combine(run.s_local, s_cross) if not run.stopped else 0.0,
            }
            if run.label in judged:
                scores["s_judge"] = round(judged[run.label], 6)
            out.append(scores)
        if raw is not None:
            for run in runs:
                run.extra["cross_check"] = {"method": "judge", "parsed": sorted(judged), "raw": raw[:2000]}
        return out

    # ------------------------------------------------------------------ validation
    def verify(self, run: NodeRun) -> tuple[bool | None, str, str | None]:
        """Ask the verifier prompt about ``run``'s answer: ``(agrees, reason, raw)``."""
        raw = self.ask(P.verify_prompt(self.question, self.choices, run.answer or "", run.text), seed_offset=200)
        agrees, reason = parse_verdict(raw)
        return agrees, reason, raw

    def validate(self, run: NodeRun, *, use_verifier: bool = True) -> Validation:
        """Gold-free validation: an answer, the right format, a tool re-check, a verifier that agrees."""
        checks: dict[str, Any] = {"answer_extracted": run.answer is not None}
        if run.stopped:
            return Validation(False, f"stopped: {run.stopped}", checks)
        if run.answer is None:
            return Validation(False, "no answer extracted", checks)
        fmt = _format_problem(run, self.n_choices)
        checks["format_ok"] = fmt is None
        if fmt:
            return Validation(False, f"malformed answer: {fmt}", checks)
        if not self.choices:
            checks["recheck"] = _tool_recheck(run.answer)
        if use_verifier:
            agrees, reason, raw = self.verify(run)
            checks["verifier"] = {"agrees": agrees, "reason": reason, "raw": (raw or "")[:1000]}
            if raw is None and self.stopped:  # unverified is not validated
                return Validation(False, f"not verified: the {self.stopped} limit was reached", checks)
            if agrees is False:
                return Validation(False, f"verifier rejected: {reason or 'no reason given'}", checks)
        return Validation(True, "", checks)

    # ------------------------------------------------------------------ helpers for arms
    def best(
        self, runs: Sequence[NodeRun], nodes: Sequence[Node], key: Callable[[NodeRun, Node], Any] | None = None
    ) -> tuple[NodeRun, Node] | None:
        """The highest-scoring finished sibling (ties: the first), or ``None`` when none finished."""
        pairs = [(r, n) for r, n in zip(runs, nodes) if not r.stopped]
        if not pairs:
            return None
        rank = key or (lambda r, n: (n.scores.get("s_comb", 0.0), r.answer is not None))
        best_pair = pairs[0]
        for pair in pairs[1:]:
            if rank(*pair) > rank(*best_pair):
                best_pair = pair
        return best_pair


def _format_problem(run: NodeRun, n_choices: int | None) -> str | None:
    answer = run.answer or ""
    if n_choices:
        return None if run.letter and run.letter in LETTERS[:n_choices] else f"{answer!r} is not an option letter"
    if len(answer) > 200:
        return f"the answer is {len(answer)} characters long; give the final value only"
    for open_, close in ("()", "[]", "{}"):
        if answer.count(open_) != answer.count(close):
            return f"unbalanced {open_}{close} in {answer[:40]!r}"
    return None


def _tool_recheck(answer: str) -> dict[str, Any]:
    """Re-evaluate a numeric answer with the calculator tool (informational, gold-free)."""
    text = answer.replace("\\cdot", "*").replace("\\times", "*").replace("\\pi", "pi")
    text = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"(\1)/(\2)", text)
    text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"sqrt(\1)", text).replace("{", "(").replace("}", ")")
    result = TOOLS["calculator"].run(text)
    return {
        "tool": "calculator",
        "input": text[:200],
        "ok": result.ok,
        "value": result.output if result.ok else None,
        "note": None if result.ok else "not a closed numeric form; symbolic answers are not re-checked",
    }
