"""The tree-of-thoughts solver with scripted models: tree shape, scores, notes, tags, memory, budgets."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from gitcli import fsck_clean, git

from got_core import ReasoningRepo
from got_core.errors import ConfigError, InvalidInputError
from got_core.memory import get_backend
from got_core.solver import Budget, OpenAICompatibleModel, solve
from got_core.solver._answers import (
    answer_free,
    extract_answer,
    normalize_math,
    parse_candidate_scores,
    parse_confidence,
    parse_verdict,
)
from got_core.solver.react import FINAL_PROMPT
from got_core.testing import ScriptedChatModel

QUESTION = "A crate holds 6 boxes with 7 lanterns in each box. How many lanterns are in the crate?"
CHOICES = ["36 lanterns", "48 lanterns", "forty-two lanterns", "13 lanterns"]
OPTION_TEXT = "forty-two lanterns"


def mcq_rules(verdicts=("correct",), lesson=None):
    """Children argue A-D (C loops on the calculator until its 3 steps are spent; D gives no rating)."""
    verdict_iter = iter(verdicts)
    last = [verdicts[-1]]

    def verify(_messages):
        v = next(verdict_iter, last[0])
        return f"Verdict: {v}\nReason: {'the product matches' if v == 'correct' else 'the units do not match'}"

    return [
        (r"case that option A", "Thought: 6+7 is 13, not A's 36.\nConfidence: 0.2\nFinal Answer: C"),
        (r"case that option B", "Thought: 48 would need 8 per box.\nConfidence: 0.1\nFinal Answer: C"),
        (r"case that option C", "Thought: multiply.\nAction: calculator\nAction Input: 6*7"),
        (r"^Observation: ", "Thought: check again.\nAction: calculator\nAction Input: 7*6"),
        (re.escape(FINAL_PROMPT), "The product is 42.\nConfidence: 0.9\nFinal Answer: C"),
        (r"case that option D", "D is 6+7, a sum, so the answer is C.\nFinal Answer: C"),
        (r"Compare the candidate solutions", "Candidate 1: 0.3\nCandidate 2: 0.2\nCandidate 3: 0.95\nCandidate 4: 0.4"),
        (r"Check the proposed answer", verify),
        (
            r"Write ONE general lesson",
            lesson
            or "Lesson: Multiply boxes by items per box and confirm the "
            "product with the calculator; here it was forty-two lanterns, option C.",
        ),
    ]


def gitdir(result):
    return result.repo_path


def children(result, parent_oid):
    return [n for n in result.nodes if n.parents and n.parents[0] == parent_oid]


def test_mcq_tree_shape_scores_notes_tags_master_and_an_answer_free_lesson(tmp_path):
    memory = get_backend("git", path=tmp_path / "memory.git")
    model = ScriptedChatModel(rules=mcq_rules())
    result = solve(QUESTION, CHOICES, model=model, memory=memory, repo_root=tmp_path / "trees", seed=1)
    assert (result.answer, result.letter, result.outcome, result.rounds) == ("C", "C", "success", 1)

    root = result.nodes[0]
    kids = children(result, root.oid)
    assert len(result.nodes) == 5 and [k.metadata["label"] for k in kids] == ["A", "B", "C", "D"]
    assert all(k.depth == 1 and k.metadata["round"] == 1 for k in kids)
    for kid in kids:  # ReAct inner loop: at most 3 tool steps, at most 4 model calls
        actions = [s for s in kid.trace if s.get("action")]
        assert len(actions) <= 3 and max(s["call"] for s in kid.trace) <= 4
    c = kids[2]
    assert [s["action_input"] for s in c.trace if s.get("action")] == ["6*7", "7*6", "7*6"]
    assert c.trace[-1]["type"] == "forced_final"

    for kid in kids:  # §3.2: s = 0.6·s_local + 0.4·s_cross
        s = kid.scores
        assert s["s_comb"] == pytest.approx(0.6 * s["s_local"] + 0.4 * s["s_cross"], abs=1e-6)
    assert [k.scores["s_judge"] for k in kids] == [0.3, 0.2, 0.95, 0.4]
    assert [k.scores["s_local"] for k in kids] == [0.2, 0.1, 0.9, 0.5]
    assert kids[3].metadata["s_local_source"] == "heuristic" and kids[0].metadata["s_local_source"] == "model"

    gd = gitdir(result)
    assert gd == tmp_path / "trees" / f"{result.problem_id}.git"
    for node in result.nodes:
        note = json.loads(git(gd, "notes", "--ref=got", "show", node.oid))
        assert note["s_comb"] == node.scores["s_comb"]
    assert set(git(gd, "tag").split()) == {"best", f"success_{c.node_id}"}
    assert git(gd, "rev-parse", "best").strip() == c.oid == result.winner.oid
    best_note = json.loads(git(gd, "notes", "--ref=got", "show", "best"))
    assert best_note["outcome"] == "success" and best_note["validation"]["checks"]["verifier"]["agrees"] is True
    assert git(gd, "rev-list", "master").split() == [c.oid, root.oid]
    assert "Extracted answer: C" in git(gd, "show", "master:thought.md")
    assert fsck_clean(gd)[0]

    # one lesson, distilled by the model, with the answer and the option text stripped
    lessons = memory.all_lessons()
    assert len(lessons) == 1 and result.lesson == lessons[0].text and result.lesson_source == "model"
    assert lessons[0].outcome == "success" and "[answer withheld]" in lessons[0].text
    assert "forty-two" not in lessons[0].text.lower() and "option c" not in lessons[0].text.lower()
    mem = memory.repo.path
    assert git(mem, "log", "--oneline", "memory").count("\n") == 1
    for needle in (OPTION_TEXT, "forty-two", "option C"):
        assert git(mem, "log", "--all", "--oneline", "-S", needle) == ""
    memory.close()


def test_a_rejected_best_child_gets_exactly_one_reexpansion_with_the_typed_failure(tmp_path):
    model = ScriptedChatModel(rules=mcq_rules(verdicts=("incorrect",)))
    result = solve(QUESTION, CHOICES, model=model, repo_root=tmp_path)
    assert result.outcome == "failed" and result.rounds == 2 and result.answer == "C"
    root = result.nodes[0]
    kids = children(result, root.oid)
    assert len(kids) == 8 and [k.metadata["label"] for k in kids[4:]] == ["r2-A", "r2-B", "r2-C", "r2-D"]
    first_best = next(k for k in kids[:4] if k.metadata["label"] == "C")
    assert all(k.metadata["after_failure"] == first_best.oid for k in kids[4:])
    assert kids[4].metadata["failure"] == "verifier rejected: the units do not match"
    argued = [m for m in model.received if len(m) == 2 and "case that option" in m[1]["content"]]
    assert len(argued) == 8
    assert all("failed validation: verifier rejected: the units do not match" in m[1]["content"] for m in argued[4:])
    tags = git(result.repo_path, "tag").split()
    assert len(tags) == 2 and all(t.startswith("failed_") for t in tags)  # no best, no third round
    assert git(result.repo_path, "rev-parse", "master").strip() == result.winner.oid == kids[6].oid


def test_reexpansion_can_recover_and_the_second_best_is_tagged_best(tmp_path):
    model = ScriptedChatModel(rules=mcq_rules(verdicts=("incorrect", "correct")))
    result = solve(QUESTION, CHOICES, model=model, repo_root=tmp_path)
    assert (result.outcome, result.rounds, result.answer) == ("success", 2, "C")
    assert result.winner.metadata["label"] == "r2-C"
    tags = git(result.repo_path, "tag").split()
    assert "best" in tags and sum(t.startswith("failed_") for t in tags) == 1
    assert git(result.repo_path, "rev-parse", "best").strip() == result.winner.oid


def math_model(judge="I cannot rank these."):
    answers = iter(["391", "391", "389", "391", "391", "391", "391", "391"])
    return ScriptedChatModel(
        rules=[
            (
                r"Approach \d",
                lambda _m: f"17*23 = {(a := next(answers))}.\nConfidence: 0.8\nFinal Answer: \\boxed{{{a}}}",
            ),
            (r"Compare the candidate solutions", judge),
            (r"Check the proposed answer", "Verdict: correct\nReason: 17*23 is 391."),
            (r"Write ONE general lesson", "Lesson: Check products with the calculator."),
        ]
    )


def test_math_children_are_four_strategies_scored_by_agreement(tmp_path):
    result = solve("What is 17 * 23?", model=math_model(), repo_root=tmp_path, tools=("calculator",))
    kids = result.nodes[1:]
    assert [k.metadata["label"] for k in kids] == ["s1", "s2", "s3", "s4"]
    assert [k.metadata["answer"] for k in kids] == ["391", "391", "389", "391"]
    assert [k.scores["s_cross"] for k in kids] == [
        pytest.approx(2 / 3),
        pytest.approx(2 / 3),
        0.0,
        pytest.approx(2 / 3),
    ]
    assert "s_judge" not in kids[0].scores  # the judge's reply did not parse: agreement is used
    assert (result.answer, result.outcome) == ("391", "success")
    assert result.validation["checks"]["recheck"] == {
        "tool": "calculator",
        "input": "391",
        "ok": True,
        "value": "391",
        "note": None,
    }


def test_no_extractable_answer_is_a_typed_failure(tmp_path):
    model = ScriptedChatModel(default="I am not sure how to approach this.")
    result = solve("What is 17 * 23?", model=model, repo_root=tmp_path, tools=())
    assert result.outcome == "failed" and result.answer is None and result.rounds == 2
    assert result.nodes[5].metadata["failure"] == "no answer extracted"


@pytest.mark.parametrize("backend", ["git", "markdown"])
def test_lessons_are_injected_and_a_read_only_memory_stays_unchanged(tmp_path, backend):
    path = tmp_path / "mem"
    writer = get_backend(backend, path=path)
    solve(QUESTION, CHOICES, model=ScriptedChatModel(rules=mcq_rules()), memory=writer, repo_root=tmp_path / "t1")
    lesson = writer.all_lessons()[0].text
    writer.close()

    def snapshot():
        files = {
            p.relative_to(path): p.read_bytes()
            for p in sorted(path.rglob("*"))
            if p.is_file() and "index" not in p.name and not p.name.endswith(".lock")
        }
        tip = ReasoningRepo.open(path, create=False).tip("memory") if backend == "git" else None
        return files, tip

    before = snapshot()
    frozen = get_backend(backend, path=path, read_only=True)
    model = ScriptedChatModel(rules=mcq_rules())
    result = solve(QUESTION + " (again)", CHOICES, model=model, memory=frozen, repo_root=tmp_path / "t2")
    frozen.close()
    assert result.lesson is None and result.lesson_source == "read-only"
    assert [lesson_.text for lesson_ in result.lessons_used] == [lesson]
    assert lesson in model.received[0][0]["content"]  # injected into the node's system prompt
    assert all("Write ONE general lesson" not in m[-1]["content"] for m in model.received)
    assert snapshot() == before
    assert result.nodes[0].metadata["lessons"] == [lesson]


def slow(seconds, text="Confidence: 0.9\nFinal Answer: C"):
    def reply(_messages):
        time.sleep(seconds)
        return text

    return reply


def test_a_wall_clock_timeout_is_a_recorded_outcome_not_a_crash(tmp_path):
    model = ScriptedChatModel(
        rules=[(r"case that option A", "Confidence: 0.5\nFinal Answer: A"), (r"case that option B", slow(30.0))]
    )  # abandoned at the deadline; 6 s leave a loaded machine room to finish the root and A first
    result = solve(QUESTION, CHOICES, model=model, repo_root=tmp_path, budget=Budget(wall_clock_s=6.0))
    assert result.outcome == "timeout"
    labels = [n.metadata.get("label") for n in result.nodes]
    assert labels == ["root", "A", "B"]  # C and D never started
    late = result.nodes[2]
    assert late.outcome == "timeout" and late.trace[-1]["type"] == "stopped"
    tags = git(result.repo_path, "tag").split()
    assert f"failed_timeout_{late.node_id}" in tags
    a = result.nodes[1]
    assert a.tags == [f"failed_{a.node_id}"]  # could not be verified in time: not a success
    assert "not verified" in result.validation["failure"]
    assert json.loads(git(result.repo_path, "show", f"{late.oid}:metadata.json"))["outcome"] == "timeout"
    assert fsck_clean(result.repo_path)[0]


def test_a_token_cap_is_a_recorded_outcome(tmp_path):
    model = ScriptedChatModel(rules=mcq_rules())
    memory = get_backend("git", path=tmp_path / "mem.git")
    result = solve(QUESTION, CHOICES, model=model, memory=memory, repo_root=tmp_path, budget=Budget(max_tokens=60))
    assert result.outcome == "budget" and result.answer is None and model.n_calls == 1
    node = result.nodes[1]
    assert node.outcome == "budget" and f"failed_budget_{node.node_id}" in git(result.repo_path, "tag")
    assert result.lesson_source == "template"  # no tokens left to distil one
    assert memory.all_lessons()[0].outcome == "failure"
    memory.close()


def test_model_failures_become_error_nodes(tmp_path):
    result = solve("What is 17 * 23?", model=ScriptedChatModel(), repo_root=tmp_path, tools=())
    assert result.outcome == "error" and result.answer is None
    assert [n.outcome for n in result.nodes[1:]] == ["error"] * 4
    assert all(t.startswith("failed_error_") for t in git(result.repo_path, "tag").split())


def test_inputs_and_repositories(tmp_path):
    model = ScriptedChatModel(rules=mcq_rules())
    with pytest.raises(InvalidInputError):
        solve("   ", model=model, repo_root=tmp_path)
    with pytest.raises(InvalidInputError):
        solve(QUESTION, ["only one"], model=model, repo_root=tmp_path)
    with pytest.raises(ConfigError, match="repo_root"):
        solve(QUESTION, CHOICES, model=model)
    with pytest.raises(ConfigError, match="unknown arm"):
        solve(QUESTION, CHOICES, model=model, repo_root=tmp_path, arm="beam")
    result = solve(QUESTION, CHOICES, model=model, repo_root=tmp_path, problem_id="gpqa/rec 7")
    assert result.repo_path == tmp_path / "gpqa%2Frec%207.git"
    shared = ReasoningRepo.open(tmp_path / "shared.git")
    result = solve(QUESTION, CHOICES, model=ScriptedChatModel(rules=mcq_rules()), repo=shared)
    assert result.session_ref == f"refs/heads/sessions/{result.problem_id}"
    assert shared.tip(f"sessions/{result.problem_id}") == result.winner.oid
    assert shared.tip("master") is None and result.problem_id.startswith("q-")


@pytest.mark.parametrize(
    "text, final, n, expected",
    [
        ("Confidence: 0.9\nFinal Answer: C", "C", 4, ("C", "C")),
        ("so the answer is (b).", None, 4, ("B", "B")),
        ("no letter here", None, 4, (None, None)),
        ("x = 3, so \\boxed{\\frac{1}{2}} done", None, None, ("\\frac{1}{2}", None)),
        ("work...", "$\\boxed{391}$.", None, ("391", None)),
        ("lots of work\nAnswer: 12.5", None, None, ("12.5", None)),
    ],
)
def test_answer_extraction(text, final, n, expected):
    assert extract_answer(text, final, n) == expected


def test_parsers_and_normalisation():
    assert parse_confidence("Confidence: 0.8") == 0.8
    assert parse_confidence("my confidence is 75%") == 0.75
    assert parse_confidence("Confidence: 8/10") == 0.8
    assert parse_confidence("Confidence: 7") == 0.7
    assert parse_confidence("nothing") is None
    assert parse_candidate_scores("Candidate 1: 0.3\n**Candidate 2:** 90%\nCandidate 9: 0.1", ["1", "2"]) == {
        "1": 0.3,
        "2": 0.9,
    }
    assert parse_verdict("Verdict: incorrect\nReason: wrong sign") == (False, "wrong sign")
    assert parse_verdict("**Verdict:** Correct") == (True, "**Verdict:** Correct")
    assert parse_verdict("hmm")[0] is None
    assert normalize_math("\\frac{1}{2}") == normalize_math("0.5") == normalize_math("x = 1/2") == "1/2"
    assert normalize_math("2\\sqrt{3}") == "2\\sqrt(3)"


@pytest.mark.parametrize(
    "lesson, answers, options, n, kept",
    [
        (
            "Multiply first; the result was 391 here.",
            ["391"],
            None,
            None,
            "Multiply first; the result was [answer withheld] here.",
        ),
        ("Always multiply carefully: 13910 apples is wrong.", ["391"], None, None, None),  # survives inside a number
        (
            "Pick option C, forty-two lanterns, after multiplying counts.",
            ["C"],
            CHOICES,
            4,
            "Pick option [answer withheld], [answer withheld], after multiplying counts.",
        ),
        ("The answer is B.", ["B"], CHOICES, 4, None),  # nothing left worth keeping
        (
            "Use \\frac{1}{2} of the total when splitting evenly among two friends.",
            ["\\frac{1}{2}"],
            None,
            None,
            "Use [answer withheld] of the total when splitting evenly among two friends.",
        ),
    ],
)
def test_lessons_are_made_answer_free_or_refused(lesson, answers, options, n, kept):
    assert answer_free(lesson, answers, options, n) == kept


# ----------------------------------------------------------------------------- OpenAI-compatible end to end


@pytest.fixture
def server():
    rules = [(re.compile(p), r) for p, r in mcq_rules()]
    requests = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "stand-in-model", "object": "model"}]})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(req)
            last = next(m["content"] for m in reversed(req["messages"]) if m["role"] == "user")
            reply = next(r for p, r in rules if p.search(last))
            text = reply(req["messages"]) if callable(reply) else reply
            for stop in req.get("stop") or []:
                text = text.split(stop)[0]
            self._send(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "created": 0,
                    "model": req["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
                }
            )

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", requests
    httpd.shutdown()
    httpd.server_close()


def test_solve_against_an_openai_compatible_endpoint(server, tmp_path):
    url, requests = server
    model = OpenAICompatibleModel(url, "stand-in-model", backoff=0.01)
    result = solve(
        QUESTION, CHOICES, model=model, repo_root=tmp_path, parallel=True, seed=5, memory=get_backend("none")
    )
    model.close()
    assert (result.answer, result.outcome) == ("C", "success")
    assert len(requests) == result.n_calls == 10  # A, B, D: 1 call; C: 3 tool steps + 1; judge, verifier, lesson
    assert result.usage.total_tokens == 110 * 10 and not result.usage.estimated
    assert {r["model"] for r in requests} == {"stand-in-model"}
    assert sorted(
        r["seed"]
        for r in requests
        if "case that option" in r["messages"][1]["content"]
        and r["messages"][-1]["role"] == "user"
        and len(r["messages"]) == 2
    ) == [5, 6, 7, 8]
    assert git(result.repo_path, "rev-parse", "best").strip() == result.winner.oid


def test_budget_limits_and_the_budgeted_model():
    from got_core.solver import BudgetedModel, BudgetExceededError, BudgetTracker

    for bad in ({"wall_clock_s": 0}, {"max_tokens": -1}, {"max_calls": True}):
        with pytest.raises(ConfigError):
            Budget(**bad)
    inner = ScriptedChatModel(default="fine")
    model = BudgetedModel(inner, BudgetTracker(Budget(wall_clock_s=None, max_calls=2)))
    msgs = [{"role": "user", "content": "hello there"}]
    assert model.complete(msgs).text == "fine" and model.complete(msgs).text == "fine"
    with pytest.raises(BudgetExceededError) as info:
        model.complete(msgs)
    assert info.value.reason == "budget" and model.tracker.exceeded == "budget" and inner.n_calls == 2
    hung = BudgetedModel(ScriptedChatModel(default=slow(20.0)), BudgetTracker(Budget(wall_clock_s=0.3)))
    with pytest.raises(BudgetExceededError, match="abandoned") as info:
        hung.complete(msgs)
    assert info.value.reason == "timeout" and hung.usage.total_tokens == 0 and hung.calls[-1].error
