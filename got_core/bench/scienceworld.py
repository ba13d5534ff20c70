"""ScienceWorld for the cross-episode regime (Table 5 of arXiv 2606.14470): environment, actions, prompts.

`ScienceWorld <https://sciworld.apps.allenai.org>`_ is a text simulator of elementary
science tasks (boil water, find an animal, test conductivity…), each with many
variations. The PyPI package ``scienceworld`` ships the simulator as a Java program
(``scienceworld.jar``, run through py4j on 127.0.0.1); nothing is downloaded.

This module holds what an agent needs to act in it, nothing about memory or git:

* :class:`ScienceWorldEnv` — one simulator process: load a task variation, reset, step,
  the valid actions; the score is the simulator's own (0–100, −100 on a fatal error);
* :func:`action_kind`, :func:`shortlist`, :func:`match_action` — the valid-action list of
  a state is ~100–1,500 strings, so the prompt shows a ranked shortlist and the model's
  reply is matched back to a valid action (exactly, else the closest one);
* :func:`system_prompt`, :func:`step_prompt`, :func:`parse_reply`, :func:`lesson_prompt` —
  the ReAct format (``Thought:`` / ``Action:``) and the answer-free lesson request.

The episode loop with memory and commits is :mod:`got_core.bench.scienceworld_episodes`, the
Table 5 protocol :mod:`got_core.bench.scienceworld_run`.
"""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from got_core.errors import ConfigError, GotRuntimeError, InvalidInputError, MissingExtraError

__all__ = [
    "DEFAULT_TASKS",
    "DEMO_TURN",
    "KINDS",
    "ScienceWorldEnv",
    "ScienceWorldError",
    "StepResult",
    "action_kind",
    "kind_label",
    "lesson_prompt",
    "match_action",
    "parse_reply",
    "shortlist",
    "step_messages",
    "step_prompt",
    "system_prompt",
]

#: Short tasks (a gold path of 5–12 steps under the ``easy`` simplification): small defaults.
DEFAULT_TASKS = ("find-non-living-thing", "lifespan-longest-lived", "find-animal")

#: Action kinds: the verb phrase of an action with its objects left out, longest first
#: where one is a prefix of another ("look around" before "look").
KINDS = (
    "reset task",
    "look around",
    "look at",
    "look in",
    "focus on",
    "pick up",
    "put down",
    "teleport to",
    "go to",
    "open",
    "close",
    "activate",
    "deactivate",
    "connect",
    "disconnect",
    "dunk",
    "eat",
    "flush",
    "mix",
    "move",
    "pour",
    "read",
    "use",
    "wait1",
    "wait",
    "inventory",
    "task",
)
#: Kinds that take no object.
_BARE = {"look around", "inventory", "task", "wait", "wait1", "reset task"}
#: Never offered in the shortlist: they end or reset the episode, or are almost never useful.
_HIDDEN = {"reset task", "eat", "flush", "mix", "close", "dunk"}
_ELECTRICAL = ("power-component", "conductivity")
#: Observation text kept per step (the simulator's are short; a hostile jar's might not be).
MAX_OBSERVATION_CHARS = 4000
_WORD = re.compile(r"[a-z0-9]+")
# fmt: off
_STOP = {
    "a", "an", "the", "to", "in", "on", "of", "and", "or", "it", "its", "is", "are", "be", "your", "you",
    "then", "first", "this", "that", "with", "for", "thing", "things", "task", "focus", "move", "find",
}
# fmt: on


class ScienceWorldError(GotRuntimeError):
    """The simulator failed or could not start (the message says what to install or check)."""


def action_kind(action: str) -> str:
    """The kind of an action: its verb phrase without objects (``"move"`` for ``"move pot to sink"``)."""
    text = " ".join(action.lower().split())
    for kind in KINDS:
        if text == kind or text.startswith(kind + " "):
            return kind
    return text.split(" ", 1)[0] if text else ""


def kind_label(kind: str) -> str:
    """How a kind reads in a lesson: ``"focus on …"``, ``"move … to …"``, ``"look around"``."""
    if kind in _BARE:
        return kind
    if kind in ("move", "pour", "dunk", "use", "connect"):
        joint = {"move": "to", "pour": "in", "dunk": "in", "use": "on", "connect": "to"}[kind]
        return f"{kind} … {joint} …"
    return f"{kind} …"


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1}


def shortlist(
    valid: Sequence[str], task: str, look: str, observation: str, *, k: int = 30, electrical: bool = False
) -> list[str]:
    """The valid actions shown to the model, at most ``k``, in a stable order.

    Navigation (``go to``, ``teleport to``, ``open … door``) and ``look around`` always
    come first; the rest are ranked by the words they share with the task description
    (twice) and with the room and last observation, shorter actions first on ties, and
    taken in turn from each kind, so no kind crowds out the others.
    ``connect`` / ``disconnect`` only for electrical tasks; kinds that reset or end the
    episode, and focusing on a place, a door or the agent, are never offered (the full
    list still accepts them).
    """
    if k < 1:
        raise InvalidInputError(f"the shortlist needs k >= 1, not {k}")
    task_words, seen_words = _words(task), _words(look) | _words(observation)
    # Places (what `go to` / `teleport to` lead to) and the agent itself are never a task's
    # object: focusing on one ends the episode at -100, so such focus actions are not offered.
    places = {a.split(" to ", 1)[1] for a in valid if action_kind(a) in ("go to", "teleport to")}
    not_objects = places | {"agent", "air", "inventory", "the agent"}
    navigation: list[str] = []
    ranked: list[tuple[float, int, str]] = []
    for action in sorted(set(valid)):
        kind = action_kind(action)
        if kind in _HIDDEN or (kind in ("connect", "disconnect") and not electrical):
            continue
        if kind == "focus on" and (action[len("focus on ") :] in not_objects or "door" in action):
            continue
        if kind in ("go to", "teleport to", "look around") or (kind == "open" and "door" in action):
            navigation.append(action)
            continue
        words = _words(action)
        score = 2.0 * len(words & task_words) + len(words & seen_words) - 0.01 * len(action)
        if kind in ("look at", "look in", "inventory", "task", "wait", "wait1"):
            score -= 1.0  # free or idle actions: available, but not what a task needs first
        ranked.append((-score, len(action), action))
    # Round-robin over kinds, best first within each: one kind's many object pairs
    # ("move … to …") must not crowd out the rest.
    by_kind: dict[str, list[str]] = {}
    for _, _, action in sorted(ranked):
        by_kind.setdefault(action_kind(action), []).append(action)
    mixed: list[str] = []
    while any(by_kind.values()):
        for kind in list(by_kind):
            if by_kind[kind]:
                mixed.append(by_kind[kind].pop(0))
    out = navigation[:k]
    out += mixed[: max(0, k - len(out))]
    return out


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def match_action(raw: str, valid: Sequence[str], shown: Sequence[str], reply: str = "") -> tuple[str, str]:
    """Map the model's action text to a valid action; returns ``(action, how)``.

    ``how`` is ``exact`` (the text is a valid action, case and punctuation aside),
    ``mentioned`` (no such line, but the reply names a shown action: the longest one
    named), ``closest`` (the most similar valid action, shown ones first, similarity
    ≥ 0.6) or ``fallback`` (nothing close: ``look around``, always valid and free).
    """
    by_norm = {_norm(a): a for a in valid}
    key = _norm(raw)
    if key in by_norm:
        return by_norm[key], "exact"
    said = f" {_norm(reply)} "
    # single words ("task", "wait") occur in any reply by chance; only longer actions count
    named = [a for a in shown if " " in _norm(a) and f" {_norm(a)} " in said]
    if named:
        return max(named, key=lambda a: (len(_norm(a)), a)), "mentioned"
    for pool in (list(shown), list(valid)):
        close = difflib.get_close_matches(key, [_norm(a) for a in pool], n=1, cutoff=0.6)
        if close:
            return by_norm[close[0]], "closest"
    return "look around", "fallback"


_ACTION_LINE = re.compile(r"(?im)^[\s>*#-]*action\s*[:：]\s*(.+?)\s*$")
_THOUGHT = re.compile(r"(?is)^\s*thought\s*[:：]\s*")


def parse_reply(text: str) -> tuple[str, str]:
    """Split a ReAct reply into ``(thought, action text)``.

    The action is the first ``Action:`` line (quotes, backticks and a final period
    removed); without one, the last non-empty line. The thought is what precedes it.
    """
    text = text or ""
    m = _ACTION_LINE.search(text)
    if m:
        action, thought = m.group(1), text[: m.start()]
    else:
        lines = [line for line in text.splitlines() if line.strip()]
        action, thought = (lines[-1] if lines else ""), "\n".join(lines[:-1])
    action = action.strip().strip("`'\"*. ")
    thought = _THOUGHT.sub("", thought).strip()
    return thought[:2000], action[:300]


#: One worked turn shown before every step, on a made-up task and room that exist in no
#: ScienceWorld task (so it teaches the format, not a solution): small models that ignore
#: a format described in words follow one they have seen answered.
DEMO_TURN = (
    {
        "role": "user",
        "content": "Task: Your task is to find a book. First, focus on the book.\n"
        "Step 1 of 10. Score so far: 0/100.\nActions so far: none\n"
        "Where you are:\nThis room is called the hall. In it, you see: \n\tthe agent\n"
        "You also see:\n\tA door to the library (that is open)\n"
        "Last observation: This room is called the hall.\n"
        "Valid actions (3 of 3):\n- look around\n- teleport to library\n- open door to library\n"
        "What do you do next?",
    },
    {"role": "assistant", "content": "Thought: The book is probably in the library.\nAction: teleport to library"},
)


def step_messages(system: str, user: str) -> list[dict[str, str]]:
    """The messages of one step: the system prompt, :data:`DEMO_TURN`, then this step's prompt."""
    return [{"role": "system", "content": system}, *(dict(m) for m in DEMO_TURN), {"role": "user", "content": user}]


def system_prompt(lessons: Sequence[str]) -> str:
    """The system message: the role, the reply format, and the memory's lessons (advice)."""
    text = (
        "You are an agent in ScienceWorld, a text simulator of elementary-school science tasks. "
        "Each turn you see the task, where you are, your last steps and a list of valid actions. "
        "Choose exactly ONE action, copied from the list.\n"
        "Reply in exactly this format, two lines:\n"
        "Thought: <one short sentence>\n"
        "Action: <the action>"
    )
    if lessons:
        shown = "\n".join(f"- {lesson.strip()[:600]}" for lesson in lessons)
        text += f"\n\nLessons from earlier episodes (advice; they may be wrong):\n{shown}"
    return text


def step_prompt(
    task: str,
    *,
    step: int,
    limit: int,
    score: int,
    history: Sequence[tuple[str, str]],
    look: str,
    observation: str,
    shown: Sequence[str],
    n_valid: int,
    recent: int = 3,
) -> str:
    """The user message of one step (see :func:`system_prompt` for the format asked)."""
    done = "; ".join(a for a, _ in history) or "none"
    lines = [
        f"Task: {' '.join(task.split())}",
        f"Step {step} of {limit}. Score so far: {score}/100.",
        f"Actions so far: {done[-1500:]}",
    ]
    if history[-recent:]:
        lines.append("Recent steps:")
        lines += [f"> {a}\n{' '.join(o.split())[:300]}" for a, o in history[-recent:]]
    lines += [
        f"Where you are:\n{look.strip()[:900]}",
        f"Last observation: {' '.join(observation.split())[:600]}",
        f"Valid actions ({len(shown)} of {n_valid}):",
        *[f"- {a}" for a in shown],
        "What do you do next?",
    ]
    return "\n".join(lines)


def lesson_prompt(task: str, steps: Sequence[tuple[str, int]], final_score: int) -> str:
    """Ask for ONE answer-free lesson from the episode's own actions and score changes."""
    shown = "\n".join(f"{i}. {a} ({r:+d})" for i, (a, r) in enumerate(steps[-25:], 1)) or "(no actions)"
    return (
        f"You just finished an episode of this ScienceWorld task:\n{' '.join(task.split())}\n"
        f"Final score: {final_score}/100. Your actions and the score change each caused:\n{shown}\n\n"
        "Write ONE general lesson (one or two sentences) that would help in future episodes of "
        "similar tasks. Do not name specific objects; say which kinds of action helped or hurt.\n"
        "Lesson:"
    )


# ----------------------------------------------------------------------------- the simulator


@dataclass
class StepResult:
    """What one simulator step returned.

    Attributes:
        observation: the simulator's text answer (capped at 4,000 characters).
        reward: score change of this step.
        score: the task score after it (0–100; −100 after a fatal mistake).
        done: the episode is over (task complete, fatal mistake, or the step limit).
        moves: the simulator's move counter.
        valid: every valid action in the new state, sorted.
        look: the room description (a free action).
        inventory: the inventory description (a free action).
    """

    observation: str
    reward: int
    score: int
    done: bool
    moves: int
    valid: list[str] = field(default_factory=list)
    look: str = ""
    inventory: str = ""


def _jar_path() -> Path:
    try:
        from scienceworld.constants import JAR_PATH
    except ImportError as exc:
        raise MissingExtraError("the ScienceWorld simulator", "scienceworld", exc) from None
    return Path(JAR_PATH)


class ScienceWorldEnv:
    """One ScienceWorld simulator (a Java process on 127.0.0.1) behind a small, checked API.

    Args:
        step_limit: the simulator ends an episode after this many moves.
        simplification: ScienceWorld's simplifications, comma-separated (``easy`` = teleport,
            open doors and containers, self-watering pots, no electrical actions where
            the task needs none), or ``""`` for none.

    Raises:
        MissingExtraError: the ``scienceworld`` package is not installed.
        ConfigError: no ``java`` on ``PATH``, or the package has no simulator jar.
        ScienceWorldError: the simulator did not start.
    """

    def __init__(self, step_limit: int = 30, simplification: str = "easy") -> None:
        if isinstance(step_limit, bool) or not isinstance(step_limit, int) or not 1 <= step_limit <= 10_000:
            raise InvalidInputError(f"step_limit must be an integer in [1, 10000], not {step_limit!r}")
        jar = _jar_path()
        if not jar.is_file():
            raise ConfigError(
                f"the scienceworld package has no simulator at {jar}; reinstall it (pip install scienceworld)"
            )
        if shutil.which("java") is None:
            raise ConfigError(
                "ScienceWorld's simulator is a Java program and no `java` is on PATH; install a Java "
                "runtime (Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless)"
            )
        from scienceworld import ScienceWorldEnv as _Env

        self.step_limit = step_limit
        self.simplification = simplification
        self._lock = threading.Lock()  # one py4j gateway: one call at a time
        self._env: Any = None
        try:
            self._env = _Env("", envStepLimit=step_limit)
        except Exception as exc:  # py4j raises its own types; say what failed
            raise ScienceWorldError(f"the ScienceWorld simulator did not start: {type(exc).__name__}: {exc}") from None
        self.task_names: tuple[str, ...] = tuple(self._env.get_task_names())
        self.task = ""
        self.variation = 0

    def max_variations(self, task: str) -> int:
        """How many variations ``task`` has.

        Raises:
            InvalidInputError: an unknown task name (the message lists them).
        """
        task = self._check_task(task)
        with self._lock:
            return int(self._env.get_max_variations(task))

    def variations(self, task: str, split: str = "train") -> list[int]:
        """The variation indices of ``split`` (``train``, ``dev`` or ``test``) for ``task``."""
        if split not in ("train", "dev", "test"):
            raise InvalidInputError(f"split must be train, dev or test, not {split!r}")
        with self._lock:
            self._env.load(self._check_task(task), 0, "")
            return [int(v) for v in getattr(self._env, f"get_variations_{split}")()]

    def _check_task(self, task: str) -> str:
        if task not in self.task_names:
            raise InvalidInputError(f"unknown ScienceWorld task {task!r}; choose from {', '.join(self.task_names)}")
        return task

    def reset(self, task: str, variation: int) -> StepResult:
        """Load ``task`` at ``variation`` and start an episode (the simulator looks around first).

        Raises:
            InvalidInputError: an unknown task, or a variation out of range.
            ScienceWorldError: the simulator failed.
        """
        self._check_task(task)
        top = self.max_variations(task)
        if isinstance(variation, bool) or not isinstance(variation, int) or not 0 <= variation < top:
            raise InvalidInputError(f"{task} has variations 0..{top - 1}; {variation!r} is not one")
        simp = self.simplification
        if simp == "easy" and any(e in task for e in _ELECTRICAL):
            simp = "teleportAction,openDoors,openContainers,selfWateringFlowerPots"
        with self._lock:
            try:
                # generateGoldPath stays False: the agent's episode never computes the solution.
                self._env.load(task, variation, simp, generateGoldPath=False)
                observation, info = self._env.reset()
            except ValueError as exc:
                raise InvalidInputError(f"ScienceWorld refused {task} variation {variation}: {exc}") from None
            except Exception as exc:
                raise ScienceWorldError(f"ScienceWorld failed to load {task}: {type(exc).__name__}: {exc}") from None
        self.task, self.variation = task, variation
        return self._result(observation, 0, False, info)

    @property
    def task_description(self) -> str:
        """The loaded variation's task description."""
        with self._lock:
            return str(self._env.get_task_description())

    def step(self, action: str) -> StepResult:
        """Take one action (any text; the simulator answers unknown ones with a message).

        Raises:
            InvalidInputError: the action is not a short single line of text.
            ScienceWorldError: the simulator failed.
        """
        if not isinstance(action, str) or not action.strip() or len(action) > 500 or "\n" in action:
            raise InvalidInputError(f"an action is one line of text under 500 characters, not {action!r:.80}")
        with self._lock:
            try:
                observation, reward, done, info = self._env.step(action)
            except Exception as exc:
                raise ScienceWorldError(f"ScienceWorld failed on {action!r}: {type(exc).__name__}: {exc}") from None
        return self._result(observation, int(reward), bool(done), info)

    @staticmethod
    def _result(observation: Any, reward: int, done: bool, info: dict[str, Any]) -> StepResult:
        return StepResult(
            observation=str(observation)[:MAX_OBSERVATION_CHARS],
            reward=reward,
            score=int(info.get("score", 0)),
            done=done,
            moves=int(info.get("moves", 0)),
            valid=sorted({str(a) for a in info.get("valid", [])}),
            look=str(info.get("look", ""))[:MAX_OBSERVATION_CHARS],
            inventory=str(info.get("inv", ""))[:MAX_OBSERVATION_CHARS],
        )

    def close(self) -> None:
        """Stop the simulator process (idempotent)."""
        env = getattr(self, "_env", None)
        if env is None:
            return
        self._env = None
        proc = getattr(getattr(env, "_gateway", None), "java_process", None)
        try:
            env.close()  # py4j shutdown, then a newline on the JVM's stdin tells it to exit
        except Exception:  # the JVM may already be gone; nothing is left to release
            pass
        if proc is not None:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a hung JVM: it holds nothing worth saving
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        scratch = getattr(env, "_obj_tree_tempdir", None)
        if scratch is not None:
            scratch.cleanup()

    def __enter__(self) -> ScienceWorldEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
