"""The audit's one rule for finding a gold answer or letter in text (got_core.bench.audit.needles)."""

from __future__ import annotations

import pytest

from got_core.bench.audit.needles import gold_keys, letter_markers, occurrences, states_answer
from got_core.solver import _prompts as P


def _found(text: str, answer: str) -> list[tuple[str, bool]]:
    return [(o.needle, o.stated) for o in occurrences(text, answer)]


def test_a_long_answer_counts_anywhere_exactly():
    assert _found("so it is \\frac{7}{12} in the end", "\\frac{7}{12}") == [("\\frac{7}{12}", True)]
    assert _found("use (-1, 4) then (-1, 4)", "(-1, 4)") == [("(-1, 4)", True)] * 2
    assert _found("METHIONINE", "Methionine") == []  # case-sensitive, as git log -S


@pytest.mark.parametrize(
    "text",
    [
        "When in doubt the answer is 24, remember it.",
        "Final Answer: 24",
        "so x = 24.",
        "\\boxed{24}",
        "the result is $24$",
        "it equals 24",
        "the expected value: 24",
    ],
)
def test_a_short_answer_stated_as_an_answer_counts(text):
    assert states_answer(text, "24")


@pytest.mark.parametrize("text", ["at most 24 cases to check", "Step 24: simplify", "24 apples were there"])
def test_a_short_answer_by_chance_is_found_but_not_stated(text):
    assert _found(text, "24") == [("24", False)]
    assert not states_answer(text, "24")


@pytest.mark.parametrize("text", ["x = 124", "x = 24x", "x = y^24", "x = 0.24", "x = 24.5", "x = 1,24,0", "x = -24"])
def test_a_short_answer_inside_a_longer_token_is_not_it(text):
    assert _found(text, "24") == []


def test_short_option_texts_are_matched_as_tokens():
    assert states_answer("the answer is 30% here", "30%")
    assert not states_answer("the answer is 130% here", "30%")
    assert states_answer("Final answer: 4 A.", "4 A")


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("the correct answer is (C).", "C"),
        ("expected_answer: C", "C"),
        ('gold_letter="C"', "C"),
        ("\\boxed{B}", "B"),
        ("answer is **D**", "D"),
        ("Answer: A", "A"),
        ("true answer = D", "D"),
    ],
)
def test_gold_letter_markers(text, letter):
    assert [lt for lt, _ in letter_markers(text)] == [letter]


@pytest.mark.parametrize(
    "text",
    ["Answer: A good approach is to", "the answer is a bit subtle", "gold letter: d", "option C", "(C) is an option"],
)
def test_prose_is_not_a_letter_marker(text):
    assert letter_markers(text) == []


def test_the_solvers_own_prompts_carry_no_marker():
    """Every prompt the solver writes (less the question) names each option letter: none is a marker."""
    question, choices = "Which gas is noble?", ["Argon", "Oxygen", "Nitrogen", "Hydrogen"]
    block = P.question_block(question, choices)
    prompts = [P.argue_prompt(question, choices, i) for i in range(4)]
    prompts += [P.solve_prompt(question, choices), P.revision_prompt(question, choices, "draft")]
    for prompt in prompts:
        assert letter_markers(prompt.replace(block, "")) == [], prompt


def test_gold_keys_name_the_gold_and_hold_it():
    value = {"type": "hint", "expected_answer": "24", "gold_letter": "C", "x": {"correct_option": "(C)"}}
    assert gold_keys(value, "24", "C") == [
        "expected_answer = '24'",
        "gold_letter = 'C'",
        "x.correct_option = '(C)'",
    ]
    assert gold_keys({"expected_answer": "25", "answer": "24", "letter": "C"}, "24", "C") == []
    assert gold_keys([{"gold": "24"}], "24", None) == ["[0].gold = '24'"]
