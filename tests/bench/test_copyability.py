"""The copyability sweep as designed (§5, Table 7): tiers built by construction, real MiniLM cosines."""

from __future__ import annotations

import json
import statistics

import pytest

from got_core.bench import protocols as P
from got_core.bench.checking import check_answer
from got_core.bench.datasets import Problem, leakage_audit, load_math500
from got_core.bench.protocols.copyability import PARAPHRASE_REF
from got_core.bench.runner import ModelSpec
from got_core.repo import ReasoningRepo

STANDIN = ModelSpec(
    "http://127.0.0.1:0/v1", "got-standin", max_tokens=64, parallel_nodes=False, standin={"responder": "bench"}
)


@pytest.fixture(scope="module")
def sample():
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "data"
    test = load_math500(data / "math500_sample.jsonl")
    corpus, leakage = leakage_audit(test, load_math500(data / "math_train_sample.jsonl"), 0.95)
    return test, corpus, leakage


def test_each_tier_lands_in_its_band_and_the_method_band_answer_differs(sample):
    test, corpus, _ = sample
    tiers = P.build_tiers(test, corpus)
    by_id = {q.id: q for q in corpus}
    for tier, (low, high, _target) in P.TIER_BANDS.items():
        cosines = [tiers[p.id][tier]["cosine"] for p in test]
        assert low <= statistics.mean(cosines) <= high, (tier, cosines)
        assert not any(tiers[p.id][tier]["fallback"] for p in test), tier  # a candidate in every band
    for p in test:
        t = tiers[p.id]
        assert t["identical"]["cosine"] == pytest.approx(1.0, abs=1e-3) and t["identical"]["copyable"]
        assert t["paraphrase"]["copyable"] and t["paraphrase"]["answer"] == p.answer
        mb = t["method_band"]
        assert 0.60 <= mb["cosine"] <= 0.85 and by_id[mb["source_id"]].subject == p.subject
        assert not check_answer(p, "\\boxed{" + mb["answer"] + "}") and mb["copyable"] is False
        assert by_id[t["same_subject"]["source_id"]].subject == p.subject
        assert t["same_subject"]["source_id"] != mb["source_id"] and t["same_subject"]["cosine"] < 0.60
        assert by_id[t["unrelated"]["source_id"]].subject != p.subject
    assert P.build_tiers(test, corpus) == tiers  # deterministic


def test_the_method_band_skips_a_candidate_with_the_same_answer(sample):
    test, corpus, _ = sample
    algebra = next(p for p in test if p.id == "sample/algebra/001.json")  # 3x + 7 = 22, answer 5
    same_answer = Problem(
        "planted/same-answer",
        "If $3x + 5 = 20$, what is the value of $x$?",  # cosine 0.72 to the test problem, answer 5 too
        "5",
        "math",
        subject="Algebra",
        domain="Algebra",
        level=1,
        meta={"solution": "Subtract 5, divide by 3: $x = \\boxed{5}$."},
    )
    tiers = P.build_tiers([algebra], [same_answer, *corpus])
    mb = tiers[algebra.id]["method_band"]
    assert mb["source_id"] != "planted/same-answer" and mb["answer"] != "5" and 0.60 <= mb["cosine"] <= 0.85


def test_paraphrases_come_from_the_model_or_a_file_and_fall_back_to_the_template_labelled(sample):
    test, corpus, _ = sample
    two = test[:2]
    given = {
        two[0].id: "Determine the number $x$ for which $3x + 7 = 22$ holds.",
        two[1].id: "Find the real numbers satisfying an absolute value inequality.",  # drops every number
    }
    tiers = P.build_tiers(two, corpus, paraphrases=given, paraphrase_source="model")
    ok, bad = tiers[two[0].id]["paraphrase"], tiers[two[1].id]["paraphrase"]
    assert ok["problem"] == given[two[0].id] and ok["source"] == "model" and ok["fallback"] == ""
    assert bad["problem"] == P.paraphrase(two[1].question) and bad["source"] == "template rewrite"
    assert bad["fallback"].startswith("fallback: the model paraphrase was dropped the number(s)")
    assert P.paraphrase_ok("What is $2+2$?", "What is $2+2$?") == "unchanged"
    assert P.paraphrase_ok("What is $2+2$?", "") == "empty"
    assert P.paraphrase_ok("What is $2+2$?", "Compute the sum $2+2$.") is None


def test_the_leakage_audit_removes_exact_and_near_copies_of_test_problems(sample):
    _, corpus, leakage = sample
    assert leakage["n_corpus"] == 23 and leakage["n_kept"] == 20 == len(corpus)
    assert [e["corpus"] for e in leakage["exact"]] == ["train-sample/leak/exact_algebra_001.json"]
    assert {n["corpus"]: n["test"] for n in leakage["near"]} == {
        "train-sample/leak/near_number_theory_001.json": "sample/number_theory/001.json",
        "train-sample/leak/near_number_theory_002.json": "sample/number_theory/002.json",
    }
    assert all(n["cosine"] >= 0.95 for n in leakage["near"])
    assert not any(q.id.startswith("train-sample/leak/") for q in corpus)


def test_the_sweep_injects_the_whole_example_and_asks_the_model_for_paraphrases(tmp_path, data_dir):
    long_solution = " ".join(f"Step {i}: subtract and divide, then check the value." for i in range(40))
    row = {
        "problem": "If $3x + 7 = 22$, what is the value of $x$?",
        "solution": long_solution + " So $x = \\boxed{5}$.",
        "answer": "5",
        "subject": "Algebra",
        "level": 4,
        "unique_id": "long/algebra.json",
    }
    math = tmp_path / "long.jsonl"
    math.write_text(json.dumps(row) + "\n")
    opts = P.ExperimentOptions(
        out=tmp_path / "run",
        spec=STANDIN,
        math_path=math,
        n_gpqa=0,
        m_test=1,
        levels=(4, 5),
        tier_corpus=data_dir / "math_train_sample.jsonl",
        paraphrase="model",
        workers=1,
        progress=False,
        bootstrap=200,
    )
    result = P.copyability_sweep(opts)
    ident = next(r for r in result.records if r["arm"] == "identical")
    para = next(r for r in result.records if r["arm"] == "paraphrase")
    assert para["extra"]["source"] == "model" and para["extra"]["fallback"] == ""
    with ReasoningRepo(tmp_path / "run" / "central.git", create=False) as central:
        assert central.tip(PARAPHRASE_REF) is not None
        root = central.log(ident["result_sha"], decorate=False)[-1]
        shown = json.loads(central.read_file(root.oid, "metadata.json"))["lessons"][0]
    example = P.worked_example(row["problem"], "5", row["solution"])
    assert len(example) > 1500 and shown == example  # the full example, not cut at 500 characters
    tiers = [json.loads(line) for line in (tmp_path / "run" / "tiers.jsonl").read_text().splitlines()]
    assert [t["tier"] for t in tiers] == list(P.TIERS) and tiers[0]["copyable"] == 1
    assert "copyable answers" in result.table_md and "≥ 0.85" in result.table_md
    assert "2 copies of a test problem" not in result.table_md  # this test problem has one planted copy
    assert "1 copies of a test problem" in result.table_md
    # A cap cuts it, when asked for.
    capped = P.copyability_sweep(
        P.ExperimentOptions(
            **{**vars(opts), "out": tmp_path / "capped", "example_chars": 200, "paraphrase": "template"}
        )
    )
    ident = next(r for r in capped.records if r["arm"] == "identical")
    with ReasoningRepo(tmp_path / "capped" / "central.git", create=False) as central:
        root = central.log(ident["result_sha"], decorate=False)[-1]
        assert len(json.loads(central.read_file(root.oid, "metadata.json"))["lessons"][0]) == 200


def test_the_fig3_plot_overlays_another_run_and_a_bad_overlay_is_refused(tmp_path, data_dir):
    from got_core.errors import InvalidInputError

    other = tmp_path / "other"
    other.mkdir()
    (other / "tiers.jsonl").write_text(
        json.dumps(
            {"label": "32B", "tier": "identical", "mean_cosine": 1.0, "delta": 0.4, "delta_low": 0.2, "delta_high": 0.6}
        )
        + "\n"
    )
    opts = P.ExperimentOptions(
        out=tmp_path / "run",
        spec=STANDIN,
        math_path=data_dir / "math500_sample.jsonl",
        n_gpqa=0,
        m_test=2,
        tier_corpus=data_dir / "math_train_sample.jsonl",
        paraphrase="template",
        overlay=(other,),
        workers=1,
        progress=False,
        bootstrap=200,
    )
    result = P.copyability_sweep(opts)
    assert result.files["sweep_png"].read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(InvalidInputError, match="tiers.jsonl"):
        P.copyability_sweep(P.ExperimentOptions(**{**vars(opts), "out": tmp_path / "x", "overlay": (tmp_path,)}))
