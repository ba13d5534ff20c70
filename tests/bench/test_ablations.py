"""The MATH-500 ablations as the paper ran them (Table 6, Fig. 2), against the stand-in server."""

from __future__ import annotations

import json
import re

import pytest

from got_core.bench import protocols as P
from got_core.bench.audit import audit_run
from got_core.bench.datasets import leakage_audit, load_math500
from got_core.bench.protocols.online import check_online_stream
from got_core.bench.runner import INGEST_PREFIX, ModelSpec
from got_core.errors import ConfigError
from got_core.names import encode_component
from got_core.repo import ReasoningRepo

STANDIN = ModelSpec(
    "http://127.0.0.1:0/v1", "got-standin", max_tokens=64, parallel_nodes=False, standin={"responder": "bench"}
)


def _opts(tmp_path, data_dir, **kw):
    base = {
        "out": tmp_path / "run",
        "spec": STANDIN,
        "math_path": data_dir / "math500_sample.jsonl",
        "n_gpqa": 0,
        "m_test": 10,
        "memory_corpus": data_dir / "math_train_sample.jsonl",
        "online_verify": "self",
        "workers": 2,
        "progress": False,
        "bootstrap": 300,
    }
    return P.ExperimentOptions(**{**base, **kw})


def test_content_kinds_hold_what_they_say(data_dir):
    q = next(p for p in load_math500(data_dir / "math_train_sample.jsonl") if p.id.endswith("number_theory/002.json"))
    worked = P.render_content(q, "worked")
    assert worked.startswith("Worked example. Final answer: 18. Problem: How many positive divisors")
    assert "Solution: Factor $180" in worked
    answer_only = P.render_content(q, "answer_only")
    assert "Final answer: 18" in answer_only and "Solution" not in answer_only and "Factor" not in answer_only
    full = P.render_content(q, "full_solution")
    assert "Solution: Factor $180" in full and "\\boxed{18}" in full and "Final answer" not in full
    lesson = P.render_content(q, "lesson")
    assert "answer withheld" in lesson and "\\boxed" not in lesson
    assert not re.search(r"(?<![\d.])18(?![\d.])", lesson)  # the answer, as a number, is gone ("180" stays)
    assert "Factor $180" in lesson  # the method stays
    assert len(P.render_content(q, "worked", 40)) == 40
    with pytest.raises(ConfigError, match="unknown content"):
        P.render_content(q, "summary")


def test_the_arms_run_on_the_same_problems_each_with_its_memory(tmp_path, data_dir):
    # Every arm runs end to end in tests/cookbooks; here the memory of each kind is checked in detail.
    arms = ["none", "sc5", "static_fewshot", "vector_subject", "vector_answer_only", "vector_lesson", "git_online"]
    result = P.math500_ablations(_opts(tmp_path, data_dir, arms=tuple(arms[1:]), m_test=5))
    run = tmp_path / "run"
    assert [r.arm for r in result.rows] == arms and all(r.n == 5 for r in result.rows)
    for arm in arms:
        assert f"| {arm} | 5 |" in result.table_md
    by_arm: dict[str, list[dict]] = {}
    for r in result.records:
        by_arm.setdefault(r["arm"], []).append(r)
    assert {tuple(sorted(x["problem_id"] for x in v)) for v in by_arm.values()} == {
        tuple(sorted(x["problem_id"] for x in by_arm["none"]))
    }
    config = json.loads((run / "config.json").read_text())
    # the leakage audit ran against this run's test problems before anything was ingested
    test = [
        p for p in load_math500(data_dir / "math500_sample.jsonl") if p.id in {r["problem_id"] for r in by_arm["none"]}
    ]
    _, expected = leakage_audit(test, load_math500(data_dir / "math_train_sample.jsonl"), 0.95)
    assert config["leakage"] == expected
    leaked = {e["corpus"] for e in expected["exact"] + expected["near"]}
    planted = {"sample/algebra/001.json", "sample/number_theory/001.json", "sample/number_theory/002.json"}
    assert len(leaked) == len(planted & {p.id for p in test})  # every planted copy of a test problem, no other
    n_kept = 23 - len(leaked)
    assert f"{len(expected['exact'])} exact and {len(expected['near'])} near-duplicate" in result.table_md
    with ReasoningRepo(run / "central.git", create=False) as central:
        for store in ("vector_answer_only", "vector_lesson"):
            sha = central.tip(INGEST_PREFIX + encode_component(store, "backend"))
            given = [json.loads(line) for line in central.read_file(sha, "lessons.jsonl").decode().splitlines()]
            assert len(given) == n_kept and not {g["source_problem"] for g in given} & leaked, store
        subject = INGEST_PREFIX + encode_component("vector_subject." + encode_component("Geometry"), "backend")
        given = [
            json.loads(line) for line in central.read_file(central.tip(subject), "lessons.jsonl").decode().splitlines()
        ]
        assert {g["source_problem"].split("/")[1] for g in given} == {"geometry"}
    # static few-shot: the same three exemplars for every question, one per subject
    static = by_arm["static_fewshot"]
    assert len({tuple(r["lessons_used"]) for r in static}) == 1 and len(static[0]["lessons_used"]) == 3
    assert len(config["fewshot"]) == 3
    assert all(r["n_calls"] == 5 and r["method"] == "self_consistency" for r in by_arm["sc5"])
    assert all(r["n_calls"] == 1 for a in arms if a != "sc5" for r in by_arm[a])
    assert all(r["memory"]["backend"] == "vector_answer_only" for r in by_arm["vector_answer_only"])
    # the online arm: solutions accumulate; its quartiles and curve are reported
    online = sorted(by_arm["git_online"], key=lambda r: r["memory"]["position"])
    verified = [r["outcome"] == "success" and bool(r["answer"]) for r in online]
    assert [r["memory"]["before"]["n"] for r in online] == [sum(verified[:i]) for i in range(5)]
    assert check_online_stream(run)[0] == "PASS"
    assert "| git_online | Q4 |" in result.table_md
    for name in ("forest.png", "online.png", "deltas.png"):
        assert (run / name).read_bytes()[:4] == b"\x89PNG"
    report = audit_run(run, rerun=False)
    assert report.ok, [c for c in report.checks if c.status == "FAIL"]


def test_bad_ablation_options_are_refused(tmp_path, data_dir):
    with pytest.raises(ConfigError, match="--memory-corpus"):
        P.math500_ablations(_opts(tmp_path, data_dir, memory_corpus=None))
    with pytest.raises(ConfigError, match="unknown ablation arm"):
        P.math500_ablations(_opts(tmp_path, data_dir, arms=("vector", "rag")))
    with pytest.raises(ConfigError, match="online-start"):
        P.math500_ablations(_opts(tmp_path, data_dir, online_start="study"))
