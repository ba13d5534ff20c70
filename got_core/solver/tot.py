"""The tree-of-thoughts arm (§3.2 of arXiv 2606.14470).

The outer loop: depth 1, branching 4. For a multiple-choice question the root's
children are the options and each child argues for its own (MCQ-aware expansion,
the paper's largest single accuracy lever); for a free-form question they are
four strategies. Each child runs the ReAct inner loop (≤ 3 tool steps) and is
scored s = 0.6·s_local + 0.4·s_cross (s_local: the model's self-rating; s_cross:
a one-shot comparison of the siblings, or their agreement). The best child is
validated without gold answers and tagged ``success`` (+ ``best``) or ``failed``;
a failure earns at most one re-expansion, given the typed failure as context.

:func:`got_core.solver.run.solve` runs this arm (and every other one of
:mod:`got_core.solver.arms`) under a budget, with memory, on a repository.
"""

from __future__ import annotations

from typing import Any

from got_core.errors import ConfigError
from got_core.solver import _prompts as P
from got_core.solver._answers import LETTERS
from got_core.solver._engine import ArmOutcome, NodeRun, SolveContext
from got_core.types import Node

__all__ = ["DEFAULT_TOOLS", "expand", "tot_arm"]

DEFAULT_TOOLS = ("calculator", "sympy", "lp")


# ----------------------------------------------------------------------------- the ToT arm


def expand(
    ctx: SolveContext,
    round_no: int = 1,
    branching: int = 4,
    *,
    failure: str | None = None,
    previous_answer: str | None = None,
    temperature: float | None = None,
) -> list[NodeRun]:
    """Run the root's children: one per option (MCQ) or one per strategy (free-form).

    Args:
        ctx: the solve context.
        round_no: 1, or 2 for the re-expansion (labels get an ``r2-`` prefix).
        branching: children of a free-form question (an MCQ has one per option).
        failure: the typed failure of the previous best child, given as context.
        previous_answer: that child's answer.
        temperature: sampling temperature (default: 0 for MCQ, 0.7 for free-form).
    """
    prefix = "" if round_no == 1 else f"r{round_no}-"
    suffix = P.failure_context(previous_answer, failure) if failure else ""
    base = 10 * (round_no - 1)
    if ctx.choices:
        temp = 0.0 if temperature is None else temperature
        jobs = [
            (
                f"{prefix}{LETTERS[i]}",
                f"argue for option {LETTERS[i]}",
                P.argue_prompt(ctx.question, ctx.choices, i) + suffix,
                temp,
                base + i,
            )
            for i in range(len(ctx.choices))
        ]
    else:
        temp = 0.7 if temperature is None else temperature
        jobs = [
            (
                f"{prefix}s{i + 1}",
                f"approach {i + 1}: {P.MATH_STRATEGIES[i % len(P.MATH_STRATEGIES)]}",
                P.approach_prompt(ctx.question, i) + suffix,
                temp,
                base + i,
            )
            for i in range(branching)
        ]
    return ctx.run_many(jobs)


def _score_and_record(
    ctx: SolveContext,
    runs: list[NodeRun],
    parent: Node,
    round_no: int,
    *,
    use_judge: bool,
    extra: dict[str, Any] | None = None,
) -> list[Node]:
    scores = ctx.score(runs, use_judge=use_judge)
    return [ctx.record_run(r, s, parent, 1, {"round": round_no, **(extra or {})}) for r, s in zip(runs, scores)]


def tot_arm(
    ctx: SolveContext, *, branching: int = 4, reexpand: bool = True, use_judge: bool = True, use_verifier: bool = True
) -> ArmOutcome:
    """The full solver: expand, score, validate the best child, re-expand at most once.

    Args:
        ctx: the solve context.
        branching: children of a free-form question (an MCQ has one per option).
        reexpand: allow the one re-expansion after a failed validation.
        use_judge: s_cross from a one-shot comparison call (else sibling agreement only).
        use_verifier: ask a verifier prompt during validation.
    """
    if branching < 1:
        raise ConfigError("branching must be at least 1")
    n = len(ctx.choices) if ctx.choices else branching
    root = ctx.record_root(
        f"tree of thoughts, depth 1, branching {n}"
        + ("; one child argues for each option" if ctx.choices else "; one strategy per child")
    )
    runs = expand(ctx, 1, branching, temperature=ctx.temperature)
    nodes = _score_and_record(ctx, runs, root, 1, use_judge=use_judge)
    pick = ctx.best(runs, nodes)
    if pick is None:
        return ArmOutcome(None, None, ctx.stopped or "error")
    run, node = pick
    check = ctx.validate(run, use_verifier=use_verifier)
    ctx.recorder.mark(node, "success" if check.ok else "failed", check.to_dict(), best=check.ok)
    if check.ok or not reexpand or ctx.stopped:
        return ArmOutcome(node, run, "success" if check.ok else "failed", check)
    # §3.2: at most one re-expansion, with the typed failure as context.
    runs2 = expand(ctx, 2, branching, failure=check.failure, previous_answer=run.answer, temperature=ctx.temperature)
    nodes2 = _score_and_record(
        ctx, runs2, root, 2, use_judge=use_judge, extra={"after_failure": node.oid, "failure": check.failure}
    )
    pick2 = ctx.best(runs2, nodes2)
    if pick2 is None:
        return ArmOutcome(node, run, "failed", check, rounds=2)
    run2, node2 = pick2
    check2 = ctx.validate(run2, use_verifier=use_verifier)
    ctx.recorder.mark(node2, "success" if check2.ok else "failed", check2.to_dict(), best=check2.ok)
    if not check2.ok and run2.answer is None and run.answer is not None:
        return ArmOutcome(node, run, "failed", check, rounds=2)
    return ArmOutcome(node2, run2, "success" if check2.ok else "failed", check2, rounds=2)
