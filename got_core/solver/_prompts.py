"""The solver's prompts, in one place (§3.2 and §6.2 of arXiv 2606.14470).

Each prompt ends with a fixed, parseable tail (``Confidence: …`` then
``Final Answer: …``), so the scores and answers can be read from any model's
text. Scripted test models match on the distinctive phrases kept here
(``make the strongest honest case``, ``Compare the candidate solutions``,
``Check the proposed answer``, ``Write ONE general lesson``).
"""

from __future__ import annotations

from collections.abc import Sequence

from got_core.memory.base import Lesson
from got_core.solver._answers import LETTERS

__all__ = [
    "LESSON_CHARS",
    "MATH_STRATEGIES",
    "SYSTEM",
    "approach_prompt",
    "argue_prompt",
    "failure_context",
    "judge_prompt",
    "lesson_prompt",
    "question_block",
    "revision_prompt",
    "solve_prompt",
    "system_prompt",
    "verify_prompt",
]

SYSTEM = "You are a careful expert problem solver. Reason step by step and check your work."

#: The four root children of a free-form question: one strategy each (§3.2 branching 4).
MATH_STRATEGIES = (
    "Solve it directly, step by step.",
    "Solve it and verify every computation with a tool (calculator or sympy).",
    "Estimate or bound the answer first, then derive it exactly and compare.",
    "Solve it by a different method than the most obvious one (a substitution, a case split, or working backwards).",
)

_TAIL_MATH = (
    "End with exactly two lines:\nConfidence: <a number from 0 to 1 that your answer is correct>\n"
    "Final Answer: <the answer only, e.g. \\boxed{42}>"
)


def _tail_mcq(letters: str) -> str:
    return (
        "End with exactly two lines:\nConfidence: <a number from 0 to 1 that your answer is correct>\n"
        f"Final Answer: <one letter: {', '.join(letters)}>"
    )


#: Characters of each lesson shown in a prompt by default (lessons are a sentence or two).
LESSON_CHARS = 500


def system_prompt(tool_text: str, lessons: Sequence[Lesson], max_chars: int | None = LESSON_CHARS) -> str:
    """The system message: role, tool protocol, and the memory's lessons (read-only advice).

    ``max_chars`` cuts each lesson (``None``: shown whole, e.g. a full worked example).
    """
    parts = [SYSTEM]
    if tool_text:
        parts.append(tool_text)
    if lessons:
        shown = "\n".join(f"- {lesson.text.strip()[:max_chars]}" for lesson in lessons)
        parts.append("Lessons from earlier problems (general advice; they may not apply here):\n" + shown)
    return "\n\n".join(parts)


def question_block(question: str, choices: Sequence[str] | None) -> str:
    """The question, with lettered options for multiple choice."""
    if not choices:
        return f"Question:\n{question.strip()}"
    options = "\n".join(f"{LETTERS[i]}) {c.strip()}" for i, c in enumerate(choices))
    return f"Question:\n{question.strip()}\n\nOptions:\n{options}"


def solve_prompt(question: str, choices: Sequence[str] | None) -> str:
    """A single chain of thought (greedy, self-consistency, best-of-N samples)."""
    tail = _tail_mcq(LETTERS[: len(choices)]) if choices else _TAIL_MATH
    return f"{question_block(question, choices)}\n\nSolve the problem. Think step by step.\n\n{tail}"


def argue_prompt(question: str, choices: Sequence[str], index: int) -> str:
    """MCQ-aware expansion (§3.2): argue for one option, then judge it honestly."""
    letter = LETTERS[index]
    return (
        f"{question_block(question, choices)}\n\n"
        f"Make the strongest honest case that option {letter} is correct. Check any calculation "
        f"with a tool. Then weigh your case against the other options: if option {letter} does not "
        f"hold up, say so and give the letter you believe is correct.\n\n{_tail_mcq(LETTERS[: len(choices)])}"
    )


def approach_prompt(question: str, index: int) -> str:
    """One of the four strategies for a free-form question."""
    strategy = MATH_STRATEGIES[index % len(MATH_STRATEGIES)]
    return f"{question_block(question, None)}\n\nApproach {index + 1}: {strategy}\n\n{_TAIL_MATH}"


def failure_context(answer: str | None, failure: str) -> str:
    """The typed failure a re-expansion starts from (§3.2: at most one re-expansion)."""
    shown = answer if answer else "no answer"
    return (
        f"\n\nNote: a previous attempt (answer: {shown}) failed validation: {failure}. "
        "Reconsider the problem carefully and do not repeat that mistake."
    )


def revision_prompt(question: str, choices: Sequence[str] | None, draft: str) -> str:
    """Single revision (§6.2): criticise the draft, fix it if wrong."""
    tail = _tail_mcq(LETTERS[: len(choices)]) if choices else _TAIL_MATH
    return (
        f"{question_block(question, choices)}\n\nHere is a draft solution:\n---\n{draft.strip()[:4000]}\n---\n"
        f"Review the draft critically, step by step. If you find an error, correct it; otherwise "
        f"confirm it.\n\n{tail}"
    )


def judge_prompt(question: str, choices: Sequence[str] | None, candidates: Sequence[tuple[str, str, str]]) -> str:
    """One-shot cross-check of sibling candidates (s_cross): ``(label, answer, text)`` each."""
    shown = "\n\n".join(
        f"Candidate {label} (answer: {answer or 'none'}):\n{text.strip()[-1500:]}" for label, answer, text in candidates
    )
    lines = "\n".join(f"Candidate {label}: <score from 0 to 1>" for label, _a, _t in candidates)
    return (
        f"{question_block(question, choices)}\n\nCompare the candidate solutions below. Judge each "
        f"one's reasoning and whether its answer is correct, using the others as a cross-check.\n\n"
        f"{shown}\n\nReply with one line per candidate:\n{lines}"
    )


def verify_prompt(question: str, choices: Sequence[str] | None, answer: str, reasoning: str) -> str:
    """Gold-free validation of the best child: an independent check of its answer."""
    if choices:
        index = LETTERS.index(answer) if answer in LETTERS[: len(choices)] else -1
        shown = f"{answer}) {choices[index].strip()}" if index >= 0 else answer
    else:
        shown = answer
    return (
        f"{question_block(question, choices)}\n\nProposed answer: {shown}\n\nReasoning given:\n"
        f"{reasoning.strip()[-2000:]}\n\nCheck the proposed answer independently; do not trust the "
        "reasoning. Reply with two lines:\nVerdict: correct | incorrect\nReason: <one sentence>"
    )


def lesson_prompt(question: str, choices: Sequence[str] | None, outcome: str, reasoning: str) -> str:
    """Distil one answer-free lesson for the memory (§3.4)."""
    return (
        f"{question_block(question, choices)}\n\nOutcome of the attempt: {outcome}.\nReasoning used:\n"
        f"{reasoning.strip()[-1500:]}\n\nWrite ONE general lesson (one or two sentences) that would help "
        "on a different problem of the same kind: a method, a check, or a pitfall. Do NOT state the "
        "answer, any option text or option letter, or any number from the final result.\nLesson:"
    )
