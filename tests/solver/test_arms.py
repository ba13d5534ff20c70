"""Test-time arms (§6.2): each records its nodes through the hook; votes, revisions and verifiers work."""

from __future__ import annotations

import json
from itertools import cycle

import pytest
from gitcli import fsck_clean, git

from got_core.errors import ConfigError
from got_core.solver import ARMS, majority_vote, run_arm
from got_core.solver._engine import NodeRun
from got_core.testing import ScriptedChatModel

QUESTION = "Which gas makes up most of Earth's atmosphere by volume?"
CHOICES = ["Oxygen", "Nitrogen", "Argon", "Carbon dioxide"]


class Spy(ScriptedChatModel):
    """Also remembers the generation options of each call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.options = []

    def _complete(self, messages, **kwargs):
        self.options.append(kwargs)
        return super()._complete(messages, **kwargs)


def rules(sample_answers=("B",), verdict=lambda answer: "correct"):
    answers = cycle(sample_answers)

    def sample(_messages):
        return f"Air is mostly N2.\nConfidence: 0.8\nFinal Answer: {next(answers)}"

    def verify(messages):
        answer = messages[-1]["content"].split("Proposed answer: ", 1)[1][0]
        return f"Verdict: {verdict(answer)}\nReason: checked against composition tables"

    return [
        (r"Solve the problem", sample),
        (r"Review the draft critically", "The draft holds.\nConfidence: 0.85\nFinal Answer: B"),
        (r"case that option B", "78% of air is nitrogen.\nConfidence: 0.9\nFinal Answer: B"),
        (r"case that option [ACD]", "That option is a minor component.\nConfidence: 0.1\nFinal Answer: B"),
        (r"Compare the candidate solutions", "Candidate 1: 0.1\nCandidate 2: 0.9\nCandidate 3: 0.1\nCandidate 4: 0.1"),
        (r"Check the proposed answer", verify),
        (r"Write ONE general lesson", "Lesson: Recall standard composition tables before reasoning."),
    ]


EXPECTED_NODES = {"greedy": 2, "self_consistency": 6, "argue": 5, "revision": 3, "verifier_bon": 5, "tot": 5}


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_every_arm_records_its_nodes_through_the_hook(arm, tmp_path):
    assert set(ARMS) == set(EXPECTED_NODES)
    result = run_arm(arm, QUESTION, CHOICES, model=ScriptedChatModel(rules=rules()), repo_root=tmp_path, seed=3)
    assert (result.answer, result.outcome, result.arm) == ("B", "success", arm)
    assert len(result.nodes) == EXPECTED_NODES[arm]
    gd = result.repo_path
    root = result.nodes[0]
    assert root.depth == 0 and not root.parents
    notes = git(gd, "notes", "--ref=got", "list").split()
    assert set(notes[1::2]) == {n.oid for n in result.nodes}  # every node has its score note
    for node in result.nodes[1:]:
        assert node.metadata["arm"] == arm
        assert json.loads(git(gd, "show", f"{node.oid}:metadata.json"))["label"] == node.metadata["label"]
        assert git(gd, "rev-parse", f"explore/{arm}/{node.metadata['label']}").strip() == node.oid
    history = git(gd, "rev-list", "master").split()
    assert history[0] == result.winner.oid and history[-1] == root.oid  # the winning path is on master
    assert git(gd, "rev-parse", "best").strip() == result.winner.oid
    assert f"success_{result.winner.node_id}" in git(gd, "tag").split()
    assert fsck_clean(gd)[0]


def test_self_consistency_majority_vote_temperature_and_seeds(tmp_path):
    model = Spy(rules=rules(sample_answers=("B", "C", "B", "A", "B")))
    result = run_arm(
        "self_consistency", QUESTION, CHOICES, model=model, repo_root=tmp_path, seed=10, arm_options={"n": 5}
    )
    samples = result.nodes[1:]
    assert [s.metadata["answer"] for s in samples] == ["B", "C", "B", "A", "B"]
    assert result.answer == "B" and samples[0].metadata["votes"] == {"B": 3, "C": 1, "A": 1}
    assert [s.scores["s_cross"] for s in samples] == [0.6, 0.2, 0.6, 0.2, 0.6]
    sample_calls = [o for o, m in zip(model.options, model.received) if "Solve the problem" in m[-1]["content"]]
    assert [o["seed"] for o in sample_calls] == [10, 11, 12, 13, 14]
    assert {o["temperature"] for o in sample_calls} == {0.7}


def test_majority_vote_ties_and_free_form_answers():
    def run(key, s_local, letter=True):
        r = NodeRun(label=key, role="sample", prompt="", s_local=s_local)
        if letter:
            r.answer = r.letter = key
        else:
            r.answer = key
        return r

    winner, votes = majority_vote([run("A", 0.9), run("B", 0.2), run("B", 0.3), run("A", 0.1)])
    assert winner == "A" and votes == {"A": 2, "B": 2}  # tie: the higher summed self-rating
    winner, _ = majority_vote([run("A", 0.5), run("B", 0.5)])
    assert winner == "A"  # full tie: the earlier answer
    winner, votes = majority_vote([run("\\frac{1}{2}", 0.4, False), run("0.5", 0.4, False), run("1/3", 0.9, False)])
    assert winner == "1/2" and votes["1/2"] == 2
    stopped = run("C", 1.0)
    stopped.stopped = "timeout"
    assert majority_vote([stopped]) == (None, {})


def test_revision_puts_draft_and_revision_on_the_winning_path(tmp_path):
    model = ScriptedChatModel(
        rules=[
            (r"Solve the problem", "Oxygen is vital.\nConfidence: 0.6\nFinal Answer: A"),
            (
                r"Review the draft critically",
                "The draft confuses importance with volume.\nConfidence: 0.8\nFinal Answer: B",
            ),
        ]
    )
    result = run_arm("revision", QUESTION, CHOICES, model=model, repo_root=tmp_path, tools=())
    root, draft, revised = result.nodes
    assert (draft.metadata["answer"], revised.metadata["answer"], result.answer) == ("A", "B", "B")
    assert revised.parents == (draft.oid,) and revised.depth == 2 and revised.metadata["changed"] is True
    assert "Oxygen is vital" in model.received[1][-1]["content"]  # the draft was shown for revision
    assert git(result.repo_path, "rev-list", "master").split() == [revised.oid, draft.oid, root.oid]


def test_verifier_best_of_n_keeps_the_verified_sample(tmp_path):
    model = ScriptedChatModel(
        rules=rules(
            sample_answers=("A", "B", "C", "B"), verdict=lambda answer: "correct" if answer == "B" else "incorrect"
        )
    )
    result = run_arm("verifier_bon", QUESTION, CHOICES, model=model, repo_root=tmp_path, arm_options={"n": 4})
    samples = result.nodes[1:]
    assert [s.scores["s_verifier"] for s in samples] == [0.0, 1.0, 0.0, 1.0]
    assert all(s.trace[-1]["type"] == "verify" for s in samples)
    assert result.answer == "B" and result.winner.oid == samples[1].oid and result.outcome == "success"


def test_verifier_best_of_n_rejected_everywhere_fails(tmp_path):
    model = ScriptedChatModel(rules=rules(verdict=lambda answer: "incorrect"))
    result = run_arm("verifier_bon", QUESTION, CHOICES, model=model, repo_root=tmp_path, arm_options={"n": 2})
    assert result.outcome == "failed" and result.validation["failure"].startswith("verifier rejected")
    assert "best" not in git(result.repo_path, "tag").split()


def test_unknown_arms_and_bad_options_are_config_errors(tmp_path):
    model = ScriptedChatModel(rules=rules())
    with pytest.raises(ConfigError, match="unknown arm 'beam'.*greedy"):
        run_arm("beam", QUESTION, CHOICES, model=model, repo_root=tmp_path)
    with pytest.raises(ConfigError, match="bad options"):
        run_arm("greedy", QUESTION, CHOICES, model=model, repo_root=tmp_path, arm_options={"n": 3})
    with pytest.raises(ConfigError, match="positive integer"):
        run_arm("self_consistency", QUESTION, CHOICES, model=model, repo_root=tmp_path, arm_options={"n": 0})


def test_the_solver_package_exports_resolve_lazily():
    import got_core.solver as solver

    for name in solver.__all__:
        assert getattr(solver, name) is not None, name
    assert solver.run_arm is run_arm and solver.ARMS is ARMS
    with pytest.raises(AttributeError):
        solver.no_such_name  # noqa: B018
