"""The four experiments as library functions (got_core.bench.protocols), against the stand-in server."""

from __future__ import annotations

import json
import re

import pytest

from got_core.bench import protocols as P
from got_core.bench.datasets import load_gpqa, load_math500
from got_core.bench.runner import INGEST_PREFIX, ModelSpec, open_central
from got_core.bench.standin import bench_responder
from got_core.errors import ConfigError, InvalidInputError, UnknownBackendError
from got_core.memory import Lesson, get_backend
from got_core.testing.embeddings import HashEmbedder

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


def test_tiers_are_deterministic_and_ordered_by_similarity(pool):
    test = [p for p in pool if p.id in ("sample/algebra/001.json", "recSample0000008")]
    emb = HashEmbedder(256)
    tiers = P.build_tiers(test, pool, embedder=emb)
    assert tiers == P.build_tiers(test, pool, embedder=emb)
    by_id = {p.id: p for p in pool}
    for p in test:
        t = tiers[p.id]
        assert set(t) == set(P.TIERS)
        assert t["identical"]["source_id"] == t["paraphrase"]["source_id"] == p.id
        assert t["identical"]["cosine"] == pytest.approx(1.0, abs=1e-4)
        assert t["paraphrase"]["problem"] == P.paraphrase(p.question)
        assert by_id[t["unrelated"]["source_id"]].kind != p.kind
        assert t["method_band"]["source_id"] != p.id and t["same_subject"]["source_id"] != p.id
        assert t["method_band"]["cosine"] >= t["unrelated"]["cosine"]
    # The molecular-biology question has a same-subject partner: no fallback for its method band.
    bio = tiers["recSample0000008"]["method_band"]
    assert by_id[bio["source_id"]].subject == "Molecular Biology" and bio["fallback"] is False


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
    assert [r.arm for r in result.rows] == ["greedy", "self_consistency", "argue"]
    assert len(result.records) == 12 and {r["method"] for r in result.records} == {
        "greedy",
        "self_consistency",
        "argue",
    }
    problems = [[r["problem_id"] for r in result.records if r["arm"] == a] for a in ("greedy", "argue")]
    assert problems[0] == problems[1]  # paired: the same problems, in the same order
    md = (tmp_path / "run" / "table.md").read_text()
    assert "| self_consistency | 4 |" in md and "Δ pp vs greedy" in md
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["experiment"] == "test_time_arms" and "api_key" not in config["runtime"]["model"]
    assert (tmp_path / "run" / "deltas.png").exists()


def test_system_comparison_reports_budgets_and_use(tmp_path, data_dir):
    result = P.system_comparison(_opts(tmp_path, data_dir, m_test=3, budget_s=45.0))
    assert [r.arm for r in result.rows] == ["vanilla", "self_consistency", "tot"]
    vanilla = [r for r in result.records if r["arm"] == "vanilla"]
    assert all(r["n_calls"] == 1 and r["budget_s"] == 45.0 for r in vanilla)
    sc = [r for r in result.records if r["arm"] == "self_consistency"]
    assert all(r["n_calls"] == 5 for r in sc)
    header = next(line for line in result.table_md.splitlines() if line.startswith("| arm"))
    assert "budget s/problem" in header and "wall s/problem mean (max)" in header
    assert re.search(r"\| vanilla \| 3 \| .* \| 45 \|", result.table_md)


def test_five_substrates_runs_study_ingest_and_read_only_test(tmp_path, data_dir):
    opts = _opts(tmp_path, data_dir, k_study=3, m_test=4, backends=("markdown", "git"), method="argue")
    result = P.five_substrates(opts)
    study = [r for r in result.records if r["phase"] == "study"]
    test = [r for r in result.records if r["phase"] == "test"]
    assert len(study) == 3 and len(test) == 12 and [r.arm for r in result.rows] == ["none", "markdown", "git"]
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
