"""Test-time arms (§6.2 of arXiv 2606.14470), chosen by name, every node through the same hook.

==================  ==========================================================  ============
arm                 what it does                                                 model calls
==================  ==========================================================  ============
``greedy``          one chain of thought at temperature 0                        1 node
``self_consistency`` ``n`` samples at a temperature, majority vote (§6.2: the   ``n`` nodes
                    one general lever, +3.4 pp at n=500)
``argue``           argue-each-option (MCQ) / four strategies, best by score     4 nodes
``revision``        a draft, then one self-revision (root → draft → revised)     2 nodes
``verifier_bon``    ``n`` samples, a verifier prompt scores each, best kept      2·``n``
``tot``             the full solver: MCQ-aware expansion, judge, validation,     4–8 nodes + 2–4
                    one re-expansion (:func:`got_core.solver.tot.tot_arm`)
==================  ==========================================================  ============

Every arm records a root on the session branch and its nodes on exploration
branches through :class:`~got_core.solver.hook.NodeRecorder`, tags its winner
after gold-free validation, and returns an :class:`ArmOutcome`; :func:`run_arm`
(= :func:`~got_core.solver.run.solve` with ``arm=name``) runs them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from got_core.errors import ConfigError
from got_core.solver import _prompts as P
from got_core.solver._answers import parse_confidence
from got_core.solver._engine import ArmOutcome, NodeRun, SolveContext, Validation, combine
from got_core.solver.tot import _score_and_record, expand, tot_arm
from got_core.types import Node

__all__ = [
    "ARMS",
    "argue_arm",
    "greedy_arm",
    "majority_vote",
    "revision_arm",
    "self_consistency_arm",
    "tot_arm",
    "verifier_bon_arm",
]


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def _scores(run: NodeRun, s_cross: float) -> dict[str, float]:
    return {
        "s_local": round(run.s_local, 6),
        "s_cross": round(s_cross, 6),
        "s_comb": combine(run.s_local, s_cross) if not run.stopped else 0.0,
    }


def _settle(
    ctx: SolveContext, run: NodeRun | None, node: Node | None, *, verdict: Validation | None = None
) -> ArmOutcome:
    """Validate the winner (cheap gold-free checks, or a verdict already reached), tag it."""
    if run is None or node is None or run.stopped:
        return ArmOutcome(None, None, ctx.stopped or "error")
    check = verdict or ctx.validate(run, use_verifier=False)
    ctx.recorder.mark(node, "success" if check.ok else "failed", check.to_dict(), best=check.ok)
    return ArmOutcome(node, run, "success" if check.ok else "failed", check)


def _samples(ctx: SolveContext, n: int, temperature: float) -> list[NodeRun]:
    prompt = P.solve_prompt(ctx.question, ctx.choices)
    return ctx.run_many([(f"sample{i + 1}", f"sample {i + 1} of {n}", prompt, temperature, i) for i in range(n)])


def greedy_arm(ctx: SolveContext) -> ArmOutcome:
    """A single chain of thought at temperature 0 (s_cross = s_local: no sibling to compare)."""
    root = ctx.record_root("greedy: a single chain of thought")
    temp = 0.0 if ctx.temperature is None else ctx.temperature
    run = ctx.run_node("chain", "single chain of thought", P.solve_prompt(ctx.question, ctx.choices), temperature=temp)
    node = ctx.record_run(run, _scores(run, run.s_local), root)
    return _settle(ctx, run, node)


def majority_vote(runs: Sequence[NodeRun]) -> tuple[str | None, Counter[str]]:
    """The most common answer among finished runs; ties go to the higher summed self-rating, then the earlier."""
    votes: Counter[str] = Counter()
    weight: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, run in enumerate(runs):
        if run.stopped or run.key is None:
            continue
        votes[run.key] += 1
        weight[run.key] = weight.get(run.key, 0.0) + run.s_local
        first.setdefault(run.key, i)
    if not votes:
        return None, votes
    winner = max(votes, key=lambda k: (votes[k], weight[k], -first[k]))
    return winner, votes


def self_consistency_arm(ctx: SolveContext, n: int = 5, temperature: float = 0.7) -> ArmOutcome:
    """``n`` samples, majority vote; s_cross is the share of votes for a sample's answer."""
    n = _positive("n", n)
    temp = temperature if ctx.temperature is None else ctx.temperature
    root = ctx.record_root(f"self-consistency: {n} samples at temperature {temp:g}, majority vote")
    runs = _samples(ctx, n, temp)
    winner_key, votes = majority_vote(runs)
    total = sum(votes.values()) or 1
    tally = dict(votes.most_common())
    nodes = [
        ctx.record_run(
            r,
            _scores(r, votes.get(r.key, 0) / total if r.key else 0.0),
            root,
            extra={"votes": tally, "majority": winner_key},
        )
        for r in runs
    ]
    pool = [(r, n_) for r, n_ in zip(runs, nodes) if r.key == winner_key and winner_key is not None]
    if not pool:  # nobody answered: keep the best-scored sample as the (failed) winner
        pick = ctx.best(runs, nodes)
        return _settle(ctx, *(pick or (None, None)))
    run, node = max(pool, key=lambda pair: pair[0].s_local)
    return _settle(ctx, run, node)


def argue_arm(ctx: SolveContext, branching: int = 4) -> ArmOutcome:
    """Argue-each-option (four strategies for free-form), best by s = 0.6·s_local + 0.4·agreement."""
    n = len(ctx.choices) if ctx.choices else _positive("branching", branching)
    root = ctx.record_root(
        f"argue: one child per {'option' if ctx.choices else 'strategy'} ({n}), no judge, no re-expansion"
    )
    runs = expand(ctx, 1, n, temperature=ctx.temperature)
    nodes = _score_and_record(ctx, runs, root, 1, use_judge=False)
    return _settle(ctx, *(ctx.best(runs, nodes) or (None, None)))


def revision_arm(ctx: SolveContext) -> ArmOutcome:
    """A draft, then one revision of it (the winning path is root → draft → revised)."""
    root = ctx.record_root("single revision: draft, then one critical revision")
    temp = 0.0 if ctx.temperature is None else ctx.temperature
    draft = ctx.run_node("draft", "draft", P.solve_prompt(ctx.question, ctx.choices), temperature=temp)
    draft_node = ctx.record_run(draft, _scores(draft, draft.s_local), root)
    if draft.stopped:
        return _settle(ctx, None, None)
    revised = ctx.run_node(
        "revised",
        "single revision of the draft",
        P.revision_prompt(ctx.question, ctx.choices, draft.text),
        temperature=temp,
        seed_offset=1,
    )
    kept = 1.0 if revised.key is not None and revised.key == draft.key else 0.0  # agreement with the draft
    revised_node = ctx.record_run(
        revised,
        _scores(revised, kept),
        draft_node,
        depth=2,
        extra={"draft_answer": draft.answer, "changed": kept == 0.0},
    )
    if revised.stopped or revised.answer is None:
        return _settle(ctx, draft, draft_node)
    return _settle(ctx, revised, revised_node)


def verifier_bon_arm(ctx: SolveContext, n: int = 4, temperature: float = 0.7) -> ArmOutcome:
    """Verifier best-of-N: ``n`` samples, each checked by the verifier prompt; the best-verified wins."""
    n = _positive("n", n)
    temp = temperature if ctx.temperature is None else ctx.temperature
    root = ctx.record_root(f"verifier best-of-{n}: {n} samples at temperature {temp:g}, each verified")
    runs = _samples(ctx, n, temp)
    verdicts: list[tuple[bool | None, str]] = []
    scores = []
    for run in runs:
        agrees, reason, raw = (None, "", None)
        if not run.stopped and run.answer is not None:
            agrees, reason, raw = ctx.verify(run)
            run.steps.append({"type": "verify", "verdict": agrees, "reason": reason, "raw": (raw or "")[:1000]})
        rated = parse_confidence(raw)
        s_ver = rated if rated is not None else {True: 1.0, False: 0.0, None: 0.5}[agrees]
        if run.answer is None:
            s_ver = 0.0
        verdicts.append((agrees, reason))
        scores.append({**_scores(run, s_ver), "s_verifier": round(s_ver, 6)})
    nodes = [ctx.record_run(r, s, root) for r, s in zip(runs, scores)]
    pick = ctx.best(
        runs, nodes, key=lambda r, node: (node.scores.get("s_verifier", 0.0), node.scores.get("s_comb", 0.0))
    )
    if pick is None:
        return _settle(ctx, None, None)
    run, node = pick
    agrees, reason = verdicts[runs.index(run)]
    cheap = ctx.validate(run, use_verifier=False)
    cheap.checks["verifier"] = {"agrees": agrees, "reason": reason}
    if cheap.ok and agrees is False:
        cheap = Validation(False, f"verifier rejected: {reason or 'no reason given'}", cheap.checks)
    return _settle(ctx, run, node, verdict=cheap)


#: name -> arm function ``f(ctx, **options) -> ArmOutcome``.
ARMS: dict[str, Callable[..., ArmOutcome]] = {
    "greedy": greedy_arm,
    "self_consistency": self_consistency_arm,
    "argue": argue_arm,
    "revision": revision_arm,
    "verifier_bon": verifier_bon_arm,
    "tot": tot_arm,
}
