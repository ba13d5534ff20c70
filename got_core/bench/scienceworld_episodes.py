"""One ScienceWorld episode with memory, every step a commit (the cross-episode regime, Table 5).

An episode is a ReAct loop over the environment's valid actions (§3.2's agent, with
the simulator's actions instead of tools): at the start the memory is asked for the
lessons most relevant to the task description; each step the model sees them, the
task, where it is, its last steps and a shortlist of valid actions, and answers
``Thought: … / Action: …``; the action is matched to a valid one and taken.

Git (one repository per arm, a branch per episode, ``refs/heads/episodes/<id>``):

* every step is a node commit — ``thought.md`` (action, score change, thought,
  observation), ``scores.json`` (``s_comb`` = score / 100, ``score``, ``reward``),
  ``trace.jsonl`` (the prompt, the reply, the shortlist, the match, the observation,
  usage), ``metadata.json`` (task, variation, valid-action count…);
* a last node summarises the episode (score, lessons used, the lesson written) and
  carries the outcome tag ``success_<episode>`` (score 100) or ``failed_<episode>``;
* the scores of the whole episode are one notes commit on ``refs/notes/got``.

After the episode one answer-free lesson is distilled and written to the arm's
memory: the model's own sentence (the objects it focused on stripped, or the
sentence refused, as the solver does with answers) plus what the episode observed,
in action kinds without objects ("the score rose after go to … (+17); focus on …
(+50)"). The simulator never computes the gold path, so nothing a lesson holds can
come from it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from got_core.bench.scienceworld import (
    ScienceWorldEnv,
    StepResult,
    action_kind,
    kind_label,
    lesson_prompt,
    match_action,
    parse_reply,
    shortlist,
    step_messages,
    step_prompt,
    system_prompt,
)
from got_core.errors import ConfigError, ModelError
from got_core.memory.base import MemoryBackend
from got_core.names import encode_component
from got_core.repo.reasoning import ReasoningRepo
from got_core.solver._answers import answer_free
from got_core.solver.models import ChatModel
from got_core.types import Node

__all__ = ["Episode", "EpisodeSettings", "distill_lesson", "observed_lesson", "run_episode"]


@dataclass(frozen=True)
class Episode:
    """One (task, variation) at its place in the episode sequence.

    Attributes:
        index: 0-based position in the sequence (the x axis of the learning curve).
        task: the ScienceWorld task name.
        variation: the task variation.
    """

    index: int
    task: str
    variation: int

    @property
    def episode_id(self) -> str:
        """``001-find-animal-v3``: position, task, variation (also the tag suffix)."""
        return f"{self.index + 1:03d}-{self.task}-v{self.variation}"

    @property
    def branch(self) -> str:
        """The episode's branch, ``episodes/<episode id>``."""
        return "episodes/" + encode_component(self.episode_id, "episode id")


@dataclass(frozen=True)
class EpisodeSettings:
    """How an arm plays each episode (the same for every arm of a run).

    Attributes:
        arm: the arm's name (its memory backend).
        max_steps: actions per episode (the simulator's own limit is set on the env).
        k_lessons: lessons retrieved at the start of an episode.
        shortlist_k: valid actions shown per step.
        max_tokens: completion limit per model call.
        temperature: sampling temperature (0: greedy).
        seed: base seed; step ``i`` of episode ``e`` uses ``seed + 1000·e + i``.
        simplification: as given to the environment (recorded in the metadata).
    """

    arm: str
    max_steps: int = 15
    k_lessons: int = 3
    shortlist_k: int = 30
    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    simplification: str = "easy"


def observed_lesson(task: str, steps: Sequence[tuple[str, int]], final_score: int) -> str:
    """What an episode showed, in action kinds only (no objects): answer-free by construction."""
    gains = [f"{kind_label(action_kind(a))} ({r:+d})" for a, r in steps if r > 0]
    head = f"In ScienceWorld '{task}' (score {final_score}/100 in {len(steps)} steps)"
    if gains:
        text = f"{head} the score rose after: {'; '.join(gains)}."
    else:
        tried = sorted({kind_label(action_kind(a)) for a, _ in steps})
        text = f"{head} no action raised the score; tried: {', '.join(tried) or 'nothing'}."
    if final_score < 0 and steps:
        last = kind_label(action_kind(steps[-1][0]))
        text += f" The episode ended at {final_score} right after {last}: check that the object fits the task first."
    return text


def _focus_objects(steps: Sequence[tuple[str, int]]) -> list[str]:
    """The objects the agent focused on: the closest thing ScienceWorld has to an answer."""
    return [a[len("focus on ") :].strip() for a, _ in steps if action_kind(a) == "focus on"]


def distill_lesson(
    model: ChatModel,
    task: str,
    task_description: str,
    steps: Sequence[tuple[str, int]],
    final_score: int,
    *,
    max_tokens: int = 64,
    seed: int = 0,
) -> tuple[str, str, str]:
    """Distil one answer-free lesson from an episode; returns ``(text, source, raw reply)``.

    ``source`` is ``model`` (the model's sentence, cleaned, then what the episode
    observed), ``template`` (no usable sentence: the observation alone) or
    ``template (model lesson refused)`` (the sentence named an object the agent
    focused on in a way stripping could not remove).
    """
    observed = observed_lesson(task, steps, final_score)
    try:
        raw = model.complete(
            [{"role": "user", "content": lesson_prompt(task_description, steps, final_score)}],
            temperature=0.0,
            max_tokens=max_tokens,
            seed=seed,
        ).text
    except ModelError:
        raw = ""
    body = re.split(r"(?im)^\s*lesson\s*:\s*", raw)[-1].strip() if raw else ""
    body = " ".join(body.split())[:600]
    sentence = answer_free(body, _focus_objects(steps)) if body else None
    if sentence:
        return f"{sentence} {observed}", "model", raw
    return observed, ("template" if not body else "template (model lesson refused)"), raw


def _step_text(step: int, action: str, result: StepResult, thought: str) -> str:
    return (
        f"Step {step}: {action} ({result.reward:+d} -> {result.score}/100)\n\n"
        f"Thought: {thought or '(none)'}\n\nObservation: {result.observation.strip()}\n"
    )


def run_episode(
    env: ScienceWorldEnv,
    episode: Episode,
    *,
    model: ChatModel,
    memory: MemoryBackend,
    repo: ReasoningRepo,
    settings: EpisodeSettings,
) -> dict[str, Any]:
    """Play one episode, record it in ``repo`` and write its lesson to ``memory``.

    Returns:
        The episode's record: ids, final and task score (``max(0, final)``), success,
        steps, how actions were matched, lessons used and written, the summary commit,
        its tag, model calls and tokens.

    Raises:
        InvalidInputError: an unknown task or variation.
        ScienceWorldError: the simulator failed.
        ConfigError: the episode's branch exists already (the run directory holds a run).
    """
    t0 = time.perf_counter()
    if repo.tip(episode.branch) is not None:
        raise ConfigError(f"{repo.path} already has {episode.branch}; start the run in a new --out")
    state = env.reset(episode.task, episode.variation)
    description = env.task_description
    lessons = memory.get_relevant(description, settings.k_lessons) if settings.k_lessons > 0 else []
    lesson_texts = [lesson.text for lesson in lessons]
    system = system_prompt(lesson_texts)
    electrical = any(e in episode.task for e in ("power-component", "conductivity"))
    meta_base = {
        "env": "scienceworld",
        "arm": settings.arm,
        "episode": episode.episode_id,
        "episode_index": episode.index,
        "task": episode.task,
        "variation": episode.variation,
        "simplification": settings.simplification,
    }
    history: list[tuple[str, str]] = []
    steps: list[tuple[str, int]] = []
    oids: dict[str, dict[str, Any]] = {}
    matches = {"exact": 0, "mentioned": 0, "closest": 0, "fallback": 0}
    calls, prompt_tokens, completion_tokens = 0, 0, 0
    end_reason = "step limit"
    for i in range(1, settings.max_steps + 1):
        shown = shortlist(
            state.valid, description, state.look, state.observation, k=settings.shortlist_k, electrical=electrical
        )
        user = step_prompt(
            description,
            step=i,
            limit=settings.max_steps,
            score=state.score,
            history=history,
            look=state.look,
            observation=state.observation,
            shown=shown,
            n_valid=len(state.valid),
        )
        messages = step_messages(system, user)
        try:
            response = model.complete(
                messages,
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
                seed=settings.seed + 1000 * episode.index + i,
                stop=["\nObservation", "\nThought:", "\n- "],
            )
        except ModelError as exc:
            end_reason = f"model error: {str(exc)[:200]}"
            break
        calls += 1
        prompt_tokens += response.usage.prompt_tokens
        completion_tokens += response.usage.completion_tokens
        thought, raw_action = parse_reply(response.text)
        action, how = match_action(raw_action, state.valid, shown, response.text)
        matches[how] += 1
        result = env.step(action)
        trace = {
            "step": i,
            "prompt": messages if i == 1 else [{"role": "user", "content": user}],
            "reply": response.text,
            "thought": thought,
            "raw_action": raw_action,
            "action": action,
            "match": how,
            "shown_actions": shown,
            "valid_actions": len(state.valid),
            "observation": result.observation,
            "reward": result.reward,
            "score": result.score,
            "done": result.done,
            "moves": result.moves,
            "usage": response.usage.to_dict(),
        }
        scores = {"s_comb": max(0, result.score) / 100.0, "score": result.score, "reward": result.reward}
        node = repo.commit_node(
            Node(
                _step_text(i, action, result, thought),
                scores=scores,
                trace=[trace],
                metadata={
                    **meta_base,
                    "kind": "step",
                    "step": i,
                    "valid_actions": len(state.valid),
                    "shown_actions": len(shown),
                    "match": how,
                    "lessons_used": len(lesson_texts),
                },
                problem_id=episode.episode_id,
                depth=i,
            ),
            ref=episode.branch,
            note=False,
            tag=False,
        )
        oids[node.committed_oid()] = scores
        history.append((action, result.observation))
        steps.append((action, result.reward))
        state = result
        if result.done:
            end_reason = "task complete" if result.score >= 100 else ("fatal action" if result.score < 0 else "done")
            break
    final = state.score
    success = final >= 100
    stored, source, raw, lesson_calls = None, "no memory", "", 0
    if getattr(memory, "name", "") != "none" and not getattr(memory, "read_only", False):
        # The control arm keeps nothing, so it is not asked for a lesson (same agent, fewer calls).
        text, source, raw = distill_lesson(
            model,
            episode.task,
            description,
            steps,
            final,
            max_tokens=settings.max_tokens,
            seed=settings.seed + 1000 * episode.index + 999,
        )
        lesson_calls = 1
        add = memory.add_success if success else memory.add_failure
        stored = add(
            text,
            topic_key=f"scienceworld-{episode.task}",
            source_problem=episode.episode_id,
            score=max(0, min(100, final)) / 100.0,
            meta={**meta_base, "final_score": final, "source": source},
        )
    outcome = "success" if success else "failed"
    record: dict[str, Any] = {
        "arm": settings.arm,
        "episode": episode.episode_id,
        "index": episode.index,
        "task": episode.task,
        "variation": episode.variation,
        "final_score": final,
        "task_score": max(0, final),
        "success": success,
        "outcome": outcome,
        "end": end_reason,
        "steps": len(steps),
        "actions": [a for a, _ in steps],
        "matches": matches,
        "lessons_used": lesson_texts,
        "lesson": stored.text if stored is not None else None,
        "lesson_source": source,
        "calls": calls + lesson_calls,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "branch": f"refs/heads/{episode.branch}",
    }
    used = "\n".join(f"- {t}" for t in lesson_texts) or "(none)"
    summary = repo.commit_node(
        Node(
            f"Episode {episode.episode_id}: score {final}/100 in {len(steps)} steps ({outcome}, {end_reason})\n\n"
            f"Task: {description.strip()}\n\nLessons used:\n{used}\n\n"
            f"Lesson written ({record['lesson_source']}):\n{record['lesson'] or '(none)'}\n",
            scores={"s_comb": max(0, final) / 100.0, "score": final, "task_score": max(0, final)},
            trace=[{"lesson_prompt_reply": raw, "lessons_used": lesson_texts}],
            metadata={**meta_base, "kind": "episode", "record": record},
            problem_id=episode.episode_id,
            depth=len(steps) + 1,
            outcome=outcome,
            node_id=episode.episode_id,
        ),
        ref=episode.branch,
        note=False,
        tag=True,
    )
    oids[summary.committed_oid()] = summary.scores
    repo.set_notes(oids)  # the whole episode's scores in one notes commit
    record["commit"] = summary.committed_oid()
    record["tag"] = summary.tags[0] if summary.tags else ""
    record["elapsed_s"] = round(time.perf_counter() - t0, 3)
    return record
