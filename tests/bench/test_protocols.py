"""The four experiments as library functions (got_core.bench.protocols), against the stand-in server."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from got_core._text import states_some_answer
from got_core.bench import protocols as P
from got_core.bench.datasets import Problem, load_gpqa, load_math500
from got_core.bench.runner import INGEST_PREFIX, ModelSpec, open_central
from got_core.bench.standin import bench_responder
from got_core.errors import ConfigError, InvalidInputError, UnknownBackendError
from got_core.memory import Lesson, get_backend

STANDIN = ModelSpec(
    "http://127.0.0.1:0/v1", "got-standin", max_tokens=64, parallel_nodes=False, standin={"responder": "bench"}
)


@pytest.fixture
def pool(data_dir):
    return load_math500(data_dir / "math500_sample.jsonl") + load_gpqa(data_dir / "gpqa_sample.csv")


def _opts(tmp_path, data_dir, **kw):
    base = {
        "out": tmp_path / "run",
        "spec": STANDIN,
        "math_path": data_dir / "math500_sample.jsonl",
        "gpqa_path": data_dir / "gpqa_sample.csv",
        "m_test": 4,
        "workers": 1,
        "progress": False,
        "bootstrap": 500,
    }
    return P.ExperimentOptions(**{**base, **kw})


def test_paraphrase_is_a_deterministic_rewrite():
    q = "What is the remainder when $2^{10}$ is divided by $7$?"
    para = P.paraphrase(q)
    assert para == P.paraphrase(q) != q
    assert para.startswith("Consider the following problem. Determine the remainder")
    assert "$2^{10}$" in para and "$7$" in para
    assert (
        P.paraphrase("How many  positive\ndivisors?")
        == "Consider the following problem. Count how many positive divisors?"
    )


def test_worked_example_puts_the_answer_first_and_the_standin_copies_it():
    long = "Subtract 7, divide by 3. " * 60
    assert P.worked_example("Q?", "5", long).endswith(" ".join(long.split()))  # whole: no cut by default
    assert len(P.worked_example("Q?", "5", long, max_chars=120)) == 120
    text = P.worked_example("Find $x$ if $3x + 7 = 22$.", "5", "Subtract 7, divide by 3.")
    assert text.startswith("Worked example. Final answer: 5. Problem: Find $x$")
    system = "Lessons from earlier problems (general advice; they may not apply here):\n- " + text
    reply = bench_responder(
        {
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": "Question:\nFind $x$ if $3x + 7 = 22$.\n\nSolve."},
            ]
        }
    )
    assert reply.endswith("\\boxed{5}")


def test_distilled_lessons_never_name_the_gold_answer(pool):
    by_id = {p.id: p for p in pool}
    study = [
        {
            "problem_id": "recSample0000008",
            "lesson": "Recall the genetic code table before answering.",
            "outcome": "success",
            "lesson_source": "model",
        },
        {
            "problem_id": "recSample0000001",
            "lesson": "Falling bodies: the speed is 29.4 m/s here.",
            "outcome": "failed",
            "lesson_source": "model",
        },
        {"problem_id": "recSample0000002", "lesson": None, "outcome": "failed", "lesson_source": "refused"},
    ]
    lessons, dropped = P.distill_lessons(study, by_id)
    assert [l.source_problem for l in lessons] == ["recSample0000008"]
    assert lessons[0].outcome == "success"
    assert {d["problem_id"]: d["reason"] for d in dropped} == {
        "recSample0000001": "the lesson names the gold answer",
        "recSample0000002": "no lesson (refused)",
    }


def test_distilled_lessons_state_no_answer_at_all():
    """A wrong answer to a study problem may be a test question's right one: no lesson states any value."""
    study_problem = Problem("study/7", "Solve $x + 5 = 12$.", "7", "math")
    study = [
        {
            "problem_id": "study/7",
            "lesson": "The answer to this problem is $x = 2$. Isolate the unknown by undoing each operation "
            "in reverse order, then substitute back to check.",
            "outcome": "failed",
            "lesson_source": "model",
        },
        {"problem_id": "study/7", "lesson": "Final answer:\n2", "outcome": "failed", "lesson_source": "model"},
        # what SmolLM2-135M wrote under real vLLM (an answer word, a few words, then the value)
        {
            "problem_id": "study/7",
            "lesson": "The answer to this question is 1.",
            "outcome": "failed",
            "lesson_source": "model",
        },
    ]
    lessons, dropped = P.distill_lessons(study, {"study/7": study_problem})
    assert [l.text for l in lessons] == [
        "Isolate the unknown by undoing each operation in reverse order, then substitute back to check."
    ]
    assert not any(states_some_answer(l.text) for l in lessons)
    assert dropped == 2 * [
        {"problem_id": "study/7", "reason": "the lesson states an answer and too little is left without it"}
    ]


def _answer_stating_responder(request):
    """The bench stand-in, except that its lessons state answers (as SmolLM2's did): every short
    answer of the sample data, after an answer cue, plus one useful sentence."""
    last = next((m["content"] for m in reversed(request.get("messages") or []) if m.get("role") == "user"), "")
    if "Write ONE general lesson" in last:
        return (
            "Lesson: The answer to this problem is $x = 2$. The final answer is 5, so the result is 24 and "
            "34 = 34. Therefore \\boxed{144}. Restate exactly what is asked and re-check every computation "
            "before committing."
        )
    return bench_responder(request)


def test_a_run_whose_model_states_answers_in_lessons_passes_the_memory_audit(tmp_path, data_dir):
    from got_core.bench.audit import audit_run
    from got_core.bench.standin import StandInOpenAIServer

    with StandInOpenAIServer(responder=_answer_stating_responder, model="got-standin") as server:
        spec = replace(STANDIN, base_url=server.url, standin=None)
        opts = _opts(tmp_path, data_dir, spec=spec, k_study=3, m_test=4, backends=("markdown", "git"))
        result = P.five_substrates(opts)
    study = [r for r in result.records if r["phase"] == "study"]
    assert study and all(r["lesson"] for r in study)
    assert not any(states_some_answer(r["lesson"]) for r in study)
    checks = {c.name: c for c in audit_run(opts.out, rerun=False, fsck=False).checks}
    memory = checks["no expected answer in memory"]
    assert memory.status == "PASS", memory.detail


def test_every_backend_ingests_the_same_lessons_once(tmp_path):
    lessons = [
        Lesson("Check units before comparing magnitudes in physics questions.", source_problem="a"),
        Lesson("Enumerate small cases before guessing a counting formula.", source_problem="b"),
    ]
    states = {b: P.ingest(tmp_path, b, lessons, []) for b in ("none", "markdown", "git")}
    assert states["none"]["n_stored"] == 0
    assert states["markdown"]["fingerprint"] == states["git"]["fingerprint"]
    assert states["git"]["n_given"] == states["git"]["n_stored"] == 2 and states["git"]["tip"]
    with open_central(tmp_path) as central:
        tip = central.tip(INGEST_PREFIX + "git")
        given = central.read_file(tip, "lessons.jsonl").decode().splitlines()
        assert [json.loads(line)["source_problem"] for line in given] == ["a", "b"]
    # A second call reads the record back and leaves the memory alone.
    assert P.ingest(tmp_path, "git", lessons[:1], []) == states["git"]
    with get_backend("markdown", path=tmp_path / "memory" / "markdown", read_only=True) as mem:
        assert len(mem.all_lessons()) == 2


def test_test_time_arms_compare_every_arm_with_greedy(tmp_path, data_dir):
    result = P.run_experiment("test_time_arms", _opts(tmp_path, data_dir, arms=("self_consistency", "argue")))
    assert set(result.tables) == {"MATH", "GPQA"}  # m_test=4 draws from both benchmarks
    for rows in result.tables.values():
        assert [r.arm for r in rows] == ["greedy", "self_consistency", "argue"]
    assert len(result.records) == 12 and {r["method"] for r in result.records} == {
        "greedy",
        "self_consistency",
        "argue",
    }
    problems = [[r["problem_id"] for r in result.records if r["arm"] == a] for a in ("greedy", "argue")]
    assert problems[0] == problems[1]  # paired: the same problems, in the same order
    md = (tmp_path / "run" / "table.md").read_text()
    n_math = sum(1 for r in result.records if r["arm"] == "greedy" and r["kind"] == "math")
    assert f"| self_consistency | {n_math} |" in md and f"| self_consistency | {4 - n_math} |" in md
    assert "Δ pp vs greedy" in md
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["experiment"] == "test_time_arms" and "api_key" not in config["runtime"]["model"]
    assert (tmp_path / "run" / "deltas.png").exists()


def test_system_comparison_reports_budgets_and_use(tmp_path, data_dir):
    result = P.system_comparison(_opts(tmp_path, data_dir, m_test=3, budget_s=45.0))
    assert [r.arm for r in result.rows] == ["vanilla", "sc5", "tot"]
    vanilla = [r for r in result.records if r["arm"] == "vanilla"]
    assert all(r["n_calls"] == 1 and r["budget_s"] == 45.0 for r in vanilla)
    sc = [r for r in result.records if r["arm"] == "sc5"]
    assert all(r["n_calls"] == 5 for r in sc)
    header = next(line for line in result.table_md.splitlines() if line.startswith("| arm"))
    assert "budget s/problem" in header and "wall s/problem mean (max)" in header and "timeouts" in header
    assert re.search(r"\| vanilla \| 3 \| .* \| 45 \| 0/3 \|", result.table_md)


def test_system_comparison_takes_per_arm_budgets_counts_timeouts_and_runs_the_matched_control(tmp_path, data_dir):
    # A 1 ms budget cannot hold an HTTP round trip to a server that waits 20 ms: tot must time out.
    spec = replace(STANDIN, standin={"responder": "bench", "latency_ms": 20})
    opts = _opts(tmp_path, data_dir, spec=spec, m_test=2, budgets={"vanilla": 60.0, "sc5": 180.0, "tot": 0.001})
    result = P.system_comparison(replace(opts, compute_matched=90.0))
    budgets = {r["arm"]: r["budget_s"] for r in result.records}
    assert budgets == {
        "vanilla": 60.0,
        "sc5": 180.0,
        "tot": 0.001,
        "vanilla@90s": 90.0,
        "sc5@90s": 90.0,
        "tot@90s": 90.0,
    }
    rows = {r.arm: r for r in result.rows}
    assert list(rows) == ["vanilla", "sc5", "tot"]  # the control is its own table
    assert rows["tot"].extra["timeouts"] == 2 and rows["vanilla"].extra["timeouts"] == 0
    assert all(r["outcome"] == "timeout" for r in result.records if r["arm"] == "tot")
    assert not any(r["outcome"] == "timeout" for r in result.records if r["arm"] == "tot@90s")
    md = result.table_md
    assert re.search(r"\| tot \| 2 \| .* \| 0.001 \| 2/2 \|", md)
    assert "Compute-matched control: every arm at 90 s" in md and "| tot@90s | 2 |" in md
    assert "Δ pp vs vanilla@90s" in md
    with pytest.raises(ConfigError, match="unknown system arm"):
        P.system_comparison(_opts(tmp_path / "x", data_dir, budgets={"nope": 3.0}))


def test_budgets_and_arm_options_parse_or_say_what_is_wrong():
    assert P.parse_budgets("vanilla=60,sc5=180,tot=600") == P.PUBLISHED_BUDGETS
    assert P.parse_budgets("self_consistency=5") == {"sc5": 5.0}
    for bad in ("vanilla", "vanilla=0", "tot=abc"):
        with pytest.raises(ConfigError, match="ARM=SECONDS"):
            P.parse_budgets(bad)
    opts = P.parse_arm_options(["self_consistency.n=5", "self_consistency.temperature=0.5,0.7,1.0"])
    assert opts == {"self_consistency": {"n": [5], "temperature": [0.5, 0.7, 1.0]}}
    arms = P.expand_arms(("greedy", "self_consistency"), opts)
    assert list(arms) == [
        "greedy",
        "self_consistency[temperature=0.5]",
        "self_consistency[temperature=0.7]",
        "self_consistency[temperature=1.0]",
    ]
    assert arms["self_consistency[temperature=0.7]"] == (
        "self_consistency",
        {"arm_options": {"n": 5, "temperature": 0.7}},
    )
    with pytest.raises(ConfigError, match="ARM.KEY=VALUE"):
        P.parse_arm_options(["self_consistency=5"])
    with pytest.raises(ConfigError, match="does not take"):
        P.expand_arms(("self_consistency",), {"self_consistency": {"nope": [1]}})
    with pytest.raises(ConfigError, match="not in the run"):
        P.expand_arms(("greedy",), {"tot": {"branching": [2]}})


def test_test_time_arms_sweep_a_knob_and_report_the_token_ratio(tmp_path, data_dir):
    opts = _opts(
        tmp_path,
        data_dir,
        m_test=3,
        arms=("self_consistency",),
        arm_options={"self_consistency": {"n": [3], "temperature": [0.5, 1.0]}},
    )
    result = P.test_time_arms(opts)
    arms = ["greedy", "self_consistency[temperature=0.5]", "self_consistency[temperature=1.0]"]
    assert [r.arm for r in result.rows] == arms
    sc = [r for r in result.records if r["arm"] != "greedy"]
    assert all(r["n_calls"] == 3 and r["method"] == "self_consistency" for r in sc)
    rows = {r.arm: r for r in result.rows}
    ratio = rows[arms[1]].extra["tokens_mean"] / rows["greedy"].extra["tokens_mean"]
    assert ratio > 1
    line = next(l for l in result.table_md.splitlines() if l.startswith(f"| {arms[1]} |"))
    assert line.rstrip(" |").endswith(f"{ratio:.1f}×") and "× tokens vs greedy" in result.table_md


def test_five_substrates_runs_study_ingest_and_read_only_test(tmp_path, data_dir):
    opts = _opts(tmp_path, data_dir, k_study=3, m_test=4, backends=("markdown", "git"), method="argue")
    result = P.five_substrates(opts)
    study = [r for r in result.records if r["phase"] == "study"]
    test = [r for r in result.records if r["phase"] == "test"]
    assert len(study) == 3 and len(test) == 12
    assert {b: [r.arm for r in rows] for b, rows in result.tables.items()} == {
        "MATH": ["none", "markdown", "git"],
        "GPQA": ["none", "markdown", "git"],
    }
    assert {r["problem_id"] for r in study}.isdisjoint({r["problem_id"] for r in test})
    for r in test:
        mem = r["memory"]
        assert mem["mode"] == "shared" and mem["before"] == mem["after"]
        assert mem["before"]["n"] == (0 if r["arm"] == "none" else 3)
    assert any(r["lessons_used"] for r in test if r["arm"] != "none")
    assert not any(r["lessons_used"] for r in test if r["arm"] == "none")
    # Resuming with the same options solves nothing and writes the same results.
    first = (tmp_path / "run" / "results.jsonl").read_bytes()
    P.five_substrates(
        _opts(tmp_path, data_dir, k_study=3, m_test=4, backends=("markdown", "git"), method="argue", resume=True)
    )
    assert (tmp_path / "run" / "results.jsonl").read_bytes() == first


def test_five_substrates_defaults_to_the_single_shot_agent_and_one_table_per_benchmark(tmp_path, data_dir):
    opts = _opts(tmp_path, data_dir, k_study=2, m_test=4, backends=("git",))
    assert opts.method == "single_shot"
    result = P.five_substrates(opts)
    test = [r for r in result.records if r["phase"] == "test"]
    # single-shot retrieval-augmented: one model call, no tools, the lessons in the prompt
    assert all(r["n_calls"] == 1 and r["method"] == "greedy" and r["n_nodes"] == 2 for r in test)
    assert any(r["lessons_used"] for r in test if r["arm"] == "git")
    run = tmp_path / "run"
    math, gpqa = (run / "table_math.md").read_text(), (run / "table_gpqa.md").read_text()
    n_math = sum(1 for r in test if r["arm"] == "none" and r["kind"] == "math")
    assert math.startswith("## Five-substrate controlled transfer (§4) — MATH (stand-in model)")
    assert f"| git | {n_math} |" in math and f"| git | {4 - n_math} |" in gpqa and 0 < n_math < 4
    assert math in result.table_md and gpqa in result.table_md
    assert P.resolve_method("tot") == ("tot", {})
    assert P.resolve_method("single_shot") == ("greedy", {"tools": [], "max_steps": 0})
    with pytest.raises(ConfigError, match="unknown method"):
        P.resolve_method("nope")


def test_bad_experiment_options_are_refused(tmp_path, data_dir):
    with pytest.raises(UnknownBackendError):
        P.five_substrates(_opts(tmp_path, data_dir, backends=("nope",)))
    with pytest.raises(ConfigError, match="unknown arm"):
        P.run_experiment("test_time_arms", _opts(tmp_path, data_dir, arms=("nope",)))
    with pytest.raises(ConfigError, match="unknown experiment"):
        P.run_experiment("nope", _opts(tmp_path, data_dir))
    with pytest.raises(InvalidInputError, match="no problems"):
        P.load_pool(_opts(tmp_path, data_dir, n_math=0, n_gpqa=0))
    with pytest.raises(InvalidInputError):
        P.five_substrates(_opts(tmp_path, data_dir, k_study=15, m_test=10))
