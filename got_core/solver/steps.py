"""Durable steps: the seam through which an execution engine records each node of a solve.

§6.4 of arXiv 2606.14470 runs every reasoning node as a durable task: after a crash the
run resumes from the engine's record and no finished node runs (or calls the model)
again. Here a :class:`StepRunner` is that engine, seen from the solver: it runs a
function as one named step and returns its JSON result — or, when the solve is being
re-run after a kill, returns the result it recorded without running the function.
:mod:`got_core.bench.executors` provides one over DBOS (``--executor dbos``).

The solver routes through it (see :meth:`SolveContext.run_node` and ``ask`` in
:mod:`got_core.solver._engine`):

* each node run (one ReAct inner loop) is one step named ``node <label>``;
* each plain call (judge, verifier, lesson) is one step named ``ask <offset>``.

Sibling nodes then run one after another: a workflow's steps are ordered, and that
order is what a re-run replays. Node commits are not steps: they are re-derived from
the recorded runs on a deterministic clock, so a resumed solve writes the same commits.

A step records its value *and* the model calls it made (tokens, counts); a replayed step
charges them again (:meth:`~got_core.solver.budget.BudgetedModel.replay_calls`), so the
result record of a resumed solve — calls, tokens, outcome — equals an uninterrupted one's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from got_core.errors import CorruptRepositoryError
from got_core.solver.budget import BudgetedModel
from got_core.solver.models import CallRecord, Usage

__all__ = ["StepRunner", "durable_step"]

T = TypeVar("T")


@runtime_checkable
class StepRunner(Protocol):
    """Runs ``body`` as one durable step called ``name`` and returns its (JSON-able) result.

    A durable implementation records the result; when the enclosing workflow runs again
    after a crash, it returns the recorded result for a step that finished and does not
    call ``body``. Names are checked in order by the engine, so they must be deterministic.
    """

    def __call__(self, name: str, body: Callable[[], Any]) -> Any:
        """Run (or replay) one step."""
        ...


def _json(value: Any) -> Any:
    # What a replay returns has been through JSON; the first run must see the same value.
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


def durable_step(
    steps: StepRunner | None,
    model: BudgetedModel,
    name: str,
    body: Callable[[], T],
    dump: Callable[[T], Any] = lambda v: v,
    load: Callable[[Any], T] = lambda v: v,
) -> T:
    """Run ``body`` through ``steps`` (or directly when ``steps`` is None).

    Args:
        steps: the engine's step runner, or None for a plain call.
        model: the question's budgeted model; the step's calls are recorded from it and
            charged to it again when the step is replayed.
        name: the step's name (deterministic: ``node <label>``, ``ask <offset>``).
        body: the work; it runs in the calling thread.
        dump: turns the value into JSON data; ``load`` turns it back.

    Returns:
        ``body()``'s value, or the recorded one on a replay (in both cases as ``load``
        rebuilt it from JSON, so a first run and a replay see equal values).

    Raises:
        CorruptRepositoryError: the engine returned a record this step did not write.
    """
    if steps is None:
        return body()
    ran = False

    def step() -> dict[str, Any]:
        nonlocal ran
        ran = True
        n0, usage0 = model.n_calls, model.usage
        value = body()
        made = model.n_calls - n0
        calls = list(model.calls)[-made:] if made > 0 else []
        usage = model.usage
        return _json(
            {
                "value": dump(value),
                "calls": [c.to_dict() for c in calls],
                "usage": {
                    "prompt_tokens": usage.prompt_tokens - usage0.prompt_tokens,
                    "completion_tokens": usage.completion_tokens - usage0.completion_tokens,
                    "estimated": usage.estimated and not usage0.estimated,
                },
                "exceeded": model.tracker.exceeded,
            }
        )

    out = steps(name, step)
    try:
        if not ran:  # replayed: the calls were made before the crash; account for them again
            model.replay_calls(
                [CallRecord(**c) for c in out["calls"]], Usage(**out["usage"]), exceeded=out.get("exceeded")
            )
        return load(out["value"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptRepositoryError(
            f"the durable record of step {name!r} is not one this solver wrote ({type(exc).__name__}: {exc}); "
            "delete the engine's system database of this run and run it again"
        ) from None
