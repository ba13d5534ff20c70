"""Answer checking: MCQ letter extraction, math-verify equivalence, threads, dispatch."""

from __future__ import annotations

import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from got_core.bench.checking import check_answer, check_choice, check_math, extract_choice
from got_core.bench.datasets import LETTERS, load_gpqa, load_math500
from got_core.errors import InvalidInputError

DATA = Path(__file__).resolve().parents[1] / "data"


# --- multiple choice -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("(C)", "C"),
        ("\\boxed{C}", "C"),
        ("So the result is $\\boxed{\\text{(B)}}$.", "B"),
        ("\\boxed{\\textbf{D}}", "D"),
        ("Answer: C", "C"),
        ("answer: c", "C"),
        ("**Answer:** B", "B"),
        ("**Answer**: (b)", "B"),
        ("After checking units, the answer is **C**.", "C"),
        ("The answer is: D", "D"),
        ("The correct option is C", "C"),
        ("The best choice would be (A).", "A"),
        ("The answer is A because the others violate energy conservation.", "A"),
        ("C)", "C"),
        ("We eliminate the rest.\nC) 29.4 m/s", "C"),
        ("Hmm, tricky.\n\nB\n", "B"),
        ("**D**", "D"),
        # Last-mentioned wins within a tier: the model corrected itself.
        ("The answer is A. Wait, I misread the units; the answer is (D).", "D"),
        # An explicit answer beats marked letters anywhere else.
        ("(B) looks tempting, and (D) too, but the final answer is C.", "C"),
        ("Option A is wrong, option B is wrong; I pick **C**", "C"),
    ],
)
def test_extract_choice_reads_common_formats(text, expected):
    assert extract_choice(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A good approach is to compute the energy first.",
        "Answer: A good approach is to compute the energy first.",
        "the answer is a bit subtle and depends on the frame.",
        "Let f(a) = 3 and consider the pair (a, b).",
        "I am not sure.",
        "",
        "Answer: E",  # out of range for four options
        "\\boxed{42}",
    ],
)
def test_extract_choice_is_not_fooled_by_prose(text):
    assert extract_choice(text) is None


def test_n_choices_bounds_the_letters():
    assert extract_choice("Answer: E", n_choices=5) == "E"
    assert extract_choice("Answer: E", n_choices=4) is None
    with pytest.raises(InvalidInputError):
        extract_choice("Answer: A", n_choices=1)
    with pytest.raises(InvalidInputError):
        extract_choice(None)  # type: ignore[arg-type]


def test_check_choice():
    assert check_choice("The answer is (b).", "B")
    assert check_choice("The answer is (b).", "b")
    assert not check_choice("The answer is (b).", "C")
    assert not check_choice("no idea", "A")
    for bad in ("", "E", "AB", None):
        with pytest.raises(InvalidInputError):
            check_choice("Answer: A", bad)  # type: ignore[arg-type]


# --- MATH ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, gold",
    [
        ("0.5", "\\frac{1}{2}"),
        ("so the probability is \\boxed{\\sqrt{2}/2}", "\\frac{\\sqrt2}{2}"),
        ("The answer is $\\frac{7}{12}$.", "\\frac{7}{12}"),
        ("Therefore $\\boxed{(-1, 4)}$.", "(-1, 4)"),
        ("\\boxed{2/\\pi}", "\\frac{2}{\\pi}"),
        ("The sale price is \\boxed{\\$34}.", "34"),
        ("\\boxed{\\dfrac{5}{36}}", "\\frac{5}{36}"),
        ("First I thought 3, but recomputing gives \\boxed{24}.", "24"),
    ],
)
def test_check_math_accepts_equivalent_forms(text, gold):
    assert check_math(text, gold)


@pytest.mark.parametrize(
    "text, gold",
    [
        ("\\boxed{145}", "144"),
        ("\\boxed{0.4472}", "\\frac{\\sqrt5}{5}"),
        ("\\boxed{(-1, 5)}", "(-1, 4)"),
        ("I could not solve it.", "5"),
        ("", "5"),
        ("\\boxed{", "5"),
        ("\\boxed{\\frac{1}{0}}", "1"),
    ],
)
def test_check_math_rejects_wrong_or_unreadable_answers(text, gold):
    assert not check_math(text, gold)


def test_check_math_refuses_uninterruptible_integer_blowups():
    # Evaluating this would hold the GIL for hours; without the pre-screen the test hangs.
    assert not check_math("\\boxed{10^{10^{10^{10}}}}", "1")
    assert not check_math("\\boxed{10^10^10}", "1")
    assert not check_math("\\boxed{2^{123456789}}", "1")
    assert not check_math("\\boxed{100000!}", "1")
    assert check_math("\\boxed{2^{10}}", "1024")


def test_check_math_works_from_worker_threads():
    problems = load_math500(DATA / "math500_sample.jsonl")
    answers = [f"Working... so the answer is $\\boxed{{{p.answer}}}$" for p in problems]
    assert threading.current_thread() is threading.main_thread()
    with ThreadPoolExecutor(max_workers=4) as pool:
        right = list(pool.map(check_math, answers, [p.answer for p in problems]))
        wrong = list(pool.map(check_math, ["\\boxed{999}"] * len(problems), [p.answer for p in problems]))
    assert right == [True] * len(problems)
    assert wrong == [False] * len(problems)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGALRM timers are POSIX-only")
def test_check_math_leaves_the_callers_alarm_alone():
    # math-verify's own timeouts call signal.alarm(0) when done, which would cancel
    # any timer the caller (pytest-timeout, a solver) had running in the main thread.
    fired: list[int] = []
    old_handler = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    old_timer = signal.setitimer(signal.ITIMER_REAL, 120.0)
    try:
        assert check_math("\\boxed{\\frac{2}{4}}", "\\frac{1}{2}")
        remaining = signal.getitimer(signal.ITIMER_REAL)[0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, *old_timer)
        signal.signal(signal.SIGALRM, old_handler)
    assert remaining > 0 and not fired


def test_check_math_input_validation():
    with pytest.raises(InvalidInputError):
        check_math("\\boxed{1}", "  ")
    with pytest.raises(InvalidInputError):
        check_math(None, "1")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        check_math("\\boxed{1}", "1", timeout_s=0)


# --- dispatch --------------------------------------------------------------------------------


def test_check_answer_dispatches_on_kind():
    mcq = load_gpqa(DATA / "gpqa_sample.csv")[0]
    wrong_letter = next(x for x in LETTERS[:4] if x != mcq.gold_letter)
    assert check_answer(mcq, f"The answer is ({mcq.gold_letter}).")
    assert not check_answer(mcq, f"The answer is ({wrong_letter}).")
    # A letter-shaped answer to a MATH problem is not a number, and vice versa.
    math = load_math500(DATA / "math500_sample.jsonl")[0]
    assert check_answer(math, f"\\boxed{{{math.answer}}}")
    assert not check_answer(math, "The answer is (A).")
    with pytest.raises(InvalidInputError, match="unknown kind"):
        check_answer(replace(math, kind="essay"), "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="gold letter"):
        check_answer(replace(mcq, gold_letter=None), "(A)")


def test_sample_solutions_check_as_correct():
    # The project-written samples must be self-consistent: each solution's boxed
    # answer verifies against the gold answer, and each gold letter is the correct option.
    for p in load_math500(DATA / "math500_sample.jsonl"):
        assert check_math(p.meta["solution"], p.answer), p.id
    for p in load_gpqa(DATA / "gpqa_sample.csv", seed=9):
        assert check_answer(p, f"Answer: {p.gold_letter}")
        assert p.choices[LETTERS.index(p.gold_letter)] == p.answer
