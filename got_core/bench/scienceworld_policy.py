"""A scripted ScienceWorld policy: the stand-in for a model in tests and ``--standin`` runs (not an LLM).

It reads the prompts of :mod:`got_core.bench.scienceworld` the way a model would
see them and answers in the same ``Thought: / Action:`` format, so the whole path
(prompts, matching, the simulator, commits, memory, the table) runs without weights.
What it does, deterministically:

* with lessons in the system prompt that say which action kinds raised the score
  ("the score rose after: go to … (+17); focus on … (+50)"), it follows the plan of
  the best-scoring lesson: the next kind of the plan not yet done, on the shown
  action of that kind sharing most words with the task;
* otherwise (or when the plan has no action left to take) it explores: an untried
  shown action picked by a hash of the task, the step and the seed, avoiding the kinds
  a lesson says ended an episode at -100.

So a memory that returns a useful lesson changes what it does, and one that returns
nothing leaves it exploring: a caricature of learning across episodes that makes
the learning curve non-trivial. Results of runs with it are labelled "scripted
policy"; they say nothing about any model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from got_core.bench.scienceworld import KINDS, action_kind

__all__ = ["SCRIPTED_LESSON", "plan_from_lessons", "scripted_model", "scripted_policy", "standin_responder"]

#: What the policy answers to the lesson request: generic advice, no objects.
SCRIPTED_LESSON = "Lesson: Read the task description first and go to the room it names before acting on objects there."

_PLAN = re.compile(r"score (-?\d+)/100[^)]*\) the score rose after: ([^\n]+?)\.(?:\s|$)")
_FATAL = re.compile(r"ended at -\d+ right after ([^:]+):")
_STEP = re.compile(r"^Step (\d+) of (\d+)\.", re.M)


def _kind_of_label(label: str) -> str:
    words = label.split("…")[0].strip().lower()
    return words if words in KINDS else action_kind(words)


def plan_from_lessons(system: str) -> list[str]:
    """The action-kind plan of the best-scoring lesson in a system prompt (``[]`` when none has one)."""
    best: tuple[int, list[str]] = (-1, [])
    for m in _PLAN.finditer(system):
        score = int(m.group(1))
        kinds = [_kind_of_label(re.sub(r"\s*\([+-]\d+\)\s*$", "", part)) for part in m.group(2).split(";")]
        kinds = [k for k in kinds if k]
        if kinds and score > best[0]:
            best = (score, kinds)
    return best[1]


def _section(user: str, start: str, end: str) -> list[str]:
    lines = user.splitlines()
    out, inside = [], False
    for line in lines:
        if line.startswith(start):
            inside = True
            continue
        if inside and line.startswith(end):
            break
        if inside and line.startswith("- "):
            out.append(line[2:].strip())
    return out


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower())) - {"the", "a", "an", "to", "in", "on", "of", "it", "then", "first"}


def _hash(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big")


def scripted_policy(messages: list[dict[str, Any]], seed: int = 0) -> str:
    """Answer one ScienceWorld prompt (a step, or the lesson request) as described in the module."""
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    user = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    if "Write ONE general lesson" in user:
        return SCRIPTED_LESSON
    shown = _section(user, "Valid actions (", "What do you do next?")
    if not shown:
        return "Thought: I see no actions listed.\nAction: look around"
    task = next((line[6:] for line in user.splitlines() if line.startswith("Task: ")), "")
    done_line = next(
        (line[len("Actions so far: ") :] for line in user.splitlines() if line.startswith("Actions so far: ")), ""
    )
    done = [] if done_line in ("", "none") else [a.strip() for a in done_line.split(";")]
    m = _STEP.search(user)
    step = int(m.group(1)) if m else len(done) + 1
    plan = plan_from_lessons(system)
    done_kinds = [action_kind(a) for a in done]
    task_words = _words(task)
    for i, kind in enumerate(plan):
        if plan[: i + 1].count(kind) <= done_kinds.count(kind):
            continue  # this step of the plan is done already
        options = [a for a in shown if action_kind(a) == kind and a not in done]
        if options:
            best = max(options, key=lambda a: (len(_words(a) & task_words), -_hash(seed, task, step, a) % 997))
            return f"Thought: a lesson says '{kind}' raised the score here; I do that next.\nAction: {best}"
        break  # the plan's next kind is not available here: explore
    # Exploring, it avoids the kinds a lesson says ended an episode (unless the plan needs them).
    fatal = {_kind_of_label(k) for k in _FATAL.findall(system)} - set(plan)
    untried = [a for a in shown if a not in done]
    safe = [a for a in untried if action_kind(a) not in fatal]
    pool = safe or untried or shown
    pick = pool[_hash(seed, task, step) % len(pool)]
    return f"Thought: I have no plan for this; I try something new.\nAction: {pick}"


def scripted_model(seed: int = 0) -> Any:
    """A :class:`~got_core.solver.scripted.ScriptedChatModel` playing :func:`scripted_policy`."""
    from got_core.solver.scripted import ScriptedChatModel

    return ScriptedChatModel(default=lambda messages: scripted_policy(messages, seed), model_name="scripted-policy")


def standin_responder(seed: int = 0) -> Callable[[dict[str, Any]], str]:
    """A responder for :class:`~got_core.bench.standin.StandInOpenAIServer` playing the policy over HTTP."""

    def respond(request: dict[str, Any]) -> str:
        return scripted_policy(list(request.get("messages") or []), seed)

    return respond
