"""Pre-registration as git commits (got_core.bench.prereg): the rule is committed before the first model call."""

from __future__ import annotations

import json
import shutil

import pytest
from gitcli import git

from got_core.bench import protocols as P
from got_core.bench.audit import audit_run
from got_core.bench.prereg import (
    PREREG_REF,
    check_prereg,
    commit_prereg,
    evaluate,
    load_prereg,
    parse_prereg,
)
from got_core.bench.runner import ModelSpec
from got_core.errors import ConfigError, InvalidInputError, ModelError
from got_core.repo import ReasoningRepo

STANDIN = ModelSpec(
    "http://127.0.0.1:0/v1", "got-standin", max_tokens=64, parallel_nodes=False, standin={"responder": "bench"}
)
RULE = """\
title: self-consistency beats greedy
decision_rule:
  arm: self_consistency
  require: ci_above_zero
validity:
  - {check: empty_predictions, max: 0}
  - {check: baseline_below_ceiling, max_accuracy: 0.95}
  - {check: min_n, value: 3}
"""


@pytest.fixture
def rule_file(tmp_path):
    path = tmp_path / "prereg.yaml"
    path.write_text(RULE)
    return path


def _opts(tmp_path, data_dir, **kw):
    base = {
        "out": tmp_path / "run",
        "spec": STANDIN,
        "math_path": data_dir / "math500_sample.jsonl",
        "gpqa_path": data_dir / "gpqa_sample.csv",
        "m_test": 3,
        "workers": 1,
        "progress": False,
        "bootstrap": 300,
        "arms": ("self_consistency",),
    }
    return P.ExperimentOptions(**{**base, **kw})


def test_a_file_is_validated_field_by_field(tmp_path, rule_file):
    pre, raw = load_prereg(rule_file)
    assert pre.arm == "self_consistency" and pre.require == "ci_above_zero" and pre.baseline is None
    assert [c["check"] for c in pre.validity] == ["empty_predictions", "baseline_below_ceiling", "min_n"]
    assert raw == rule_file.read_bytes()
    assert parse_prereg(pre.to_dict()) == pre  # the stored form reads back
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps(pre.to_dict()))
    assert load_prereg(as_json)[0] == pre
    bad = {
        "title: x\nrule: {}\n": "unknown key",
        "title: x\ndecision_rule: {arm: a, require: sometimes}\n": "require must be one of",
        "title: x\ndecision_rule: {arm: a}\nvalidity: [{check: vibes}]\n": "unknown check",
        "title: x\ndecision_rule: {arm: a}\nvalidity: [{check: min_n}]\n": "needs 'value'",
        "title: x\ndecision_rule: {arm: a}\nvalidity: [{check: min_n, value: lots}]\n": "must be a number",
        "title: x\ndecision_rule: {arm: a, benchmark: aime}\n": "benchmark must be one of",
        "- just a list\n": "a pre-registration is a mapping",
        "title: [unclosed\n": "not valid YAML",
    }
    for text, message in bad.items():
        path = tmp_path / "bad.yaml"
        path.write_text(text)
        with pytest.raises(InvalidInputError, match=message):
            load_prereg(path)
    big = tmp_path / "big.yaml"
    big.write_text("title: " + "x" * 70_000)
    with pytest.raises(InvalidInputError, match="at most"):
        load_prereg(big)
    with pytest.raises(InvalidInputError, match="cannot read"):
        load_prereg(tmp_path / "missing.yaml")


def _records(arm_correct, base_correct, arm="self_consistency", base="greedy", kind="mcq"):
    out = []
    for name, verdicts in ((base, base_correct), (arm, arm_correct)):
        out += [
            {
                "arm": name,
                "problem_id": f"p{i}",
                "correct": v,
                "phase": "test",
                "kind": kind,
                "answer": "A",
                "outcome": "success",
            }
            for i, v in enumerate(verdicts)
        ]
    return out


def test_the_verdict_follows_the_rule_and_the_validity_conditions(rule_file):
    pre, _ = load_prereg(rule_file)
    better = _records([True] * 10, [False] * 8 + [True] * 2)
    (v,) = evaluate(pre, better, "greedy", n_resamples=500)
    assert v.benchmark == "gpqa" and v.verdict == "CONFIRMED" and v.rule_met is True
    assert all(c["ok"] for c in v.conditions)
    same = _records([True, False] * 5, [True, False] * 5)
    assert evaluate(pre, same, "greedy", n_resamples=500)[0].verdict == "NOT CONFIRMED"
    empty = _records([True] * 10, [False] * 10)
    empty[0]["answer"] = ""  # one empty prediction breaks "0 empty predictions"
    (v,) = evaluate(pre, empty, "greedy", n_resamples=500)
    assert v.verdict == "INVALID" and v.rule_met is True
    assert [c["check"] for c in v.conditions if not c["ok"]] == ["empty_predictions"]
    ceiling = _records([True] * 10, [True] * 10)
    assert evaluate(pre, ceiling, "greedy", n_resamples=500)[0].verdict == "INVALID"
    control = parse_prereg(
        {
            "title": "t",
            "decision_rule": {"arm": "self_consistency", "benchmark": "math"},
            "validity": [{"check": "control_positive", "arm": "identical", "baseline": "greedy"}],
        }
    )
    recs = (
        _records([True] * 10, [False] * 10, kind="math")
        + _records([True] * 10, [False] * 10, arm="identical", kind="math")[10:]
    )
    (v,) = evaluate(control, recs + _records([False] * 3, [True] * 3), "greedy", n_resamples=500)
    assert v.benchmark == "math" and v.verdict == "CONFIRMED" and v.conditions[0]["ok"]


def test_the_rule_is_committed_before_the_first_model_call(tmp_path, data_dir, rule_file):
    # A dead endpoint: the run fails at its first contact with the model, after the commit.
    dead = ModelSpec("http://127.0.0.1:9/v1", "nothing", max_tokens=8)
    with pytest.raises(ModelError):
        P.test_time_arms(_opts(tmp_path, data_dir, spec=dead, prereg=rule_file))
    with ReasoningRepo(tmp_path / "run" / "central.git", create=False) as central:
        sha = central.tip(PREREG_REF)
        assert sha is not None and central.refs("refs/got/results/") == {}
        stored = json.loads(central.read_file(sha, "prereg.json"))
        assert stored["decision_rule"]["arm"] == "self_consistency" and stored["registered_at"]
        assert central.read_file(sha, "prereg.source") == rule_file.read_bytes()


def test_every_node_descends_from_the_preregistration_and_the_table_reports_the_verdict(tmp_path, data_dir, rule_file):
    result = P.test_time_arms(_opts(tmp_path, data_dir, prereg=rule_file))
    run = tmp_path / "run"
    config = json.loads((run / "config.json").read_text())
    sha = config["prereg"]["sha"]
    assert check_prereg(run) == (
        "PASS",
        f"{PREREG_REF} {sha[:10]} is the only root of all 6 result histories "
        f"({sum(r['n_nodes'] for r in result.records)} commits): every node commit descends from it",
    )
    # Real git agrees: the only parentless commit behind every result is the pre-registration.
    for t in config["tasks"]:
        roots = git(run / "central.git", "rev-list", "--max-parents=0", t["ref"]).split()
        assert roots == [sha]
    # On these 3 problems the stand-in's self-consistency gains one: the CI touches 0, the rule is not met.
    assert [v.verdict for v in result.verdicts] == ["NOT CONFIRMED"]
    assert f"Pre-registered ({PREREG_REF} {sha[:10]}): self-consistency beats greedy" in result.table_md
    assert f"**{result.verdicts[0].verdict}**" in result.table_md
    assert json.loads((run / "verdict.json").read_text())[0]["verdict"] == result.verdicts[0].verdict
    # Resuming with another rule is refused; with the same one it goes on.
    other = tmp_path / "other.yaml"
    other.write_text(RULE.replace("ci_above_zero", "ci_excludes_zero"))
    with pytest.raises(ConfigError, match="different settings"):
        P.test_time_arms(_opts(tmp_path, data_dir, prereg=other, resume=True))
    with pytest.raises(ConfigError, match="cannot change once the run started"):
        commit_prereg(run, load_prereg(other)[0], other.read_bytes())
    again = P.test_time_arms(_opts(tmp_path, data_dir, prereg=rule_file, resume=True))
    assert [r["result_sha"] for r in again.records] == [r["result_sha"] for r in result.records]


def test_the_check_fails_on_a_preregistration_written_after_the_run(tmp_path, data_dir, rule_file):
    P.test_time_arms(_opts(tmp_path, data_dir))  # no --prereg
    run = tmp_path / "run"
    assert check_prereg(run)[0] == "SKIP"
    forged = tmp_path / "forged"
    shutil.copytree(run, forged)
    spec = commit_prereg(forged, *load_prereg(rule_file))  # registered after every node exists
    config = json.loads((forged / "config.json").read_text())
    config["prereg"] = {"sha": spec["sha"], "ref": PREREG_REF}
    (forged / "config.json").write_text(json.dumps(config))
    status, detail = check_prereg(forged)
    assert status == "FAIL" and "not descended from the pre-registration" in detail
    # `got audit` reads the same verdict (its hook once took any non-empty status for a PASS).
    audit = {c.name: c for c in audit_run(forged, rerun=False, fsck=False).checks}
    assert audit["pre-registration precedes the run"].status == "FAIL"
    assert {c.name: c for c in audit_run(run, rerun=False, fsck=False).checks}[
        "pre-registration precedes the run"
    ].status == "SKIP"
    # A config naming another commit, or a missing ref, fails too.
    config["prereg"]["sha"] = "0" * 40
    (forged / "config.json").write_text(json.dumps(config))
    assert check_prereg(forged)[0] == "FAIL"
    git(forged / "central.git", "update-ref", "-d", PREREG_REF)
    status, detail = check_prereg(forged)
    assert status == "FAIL" and "missing" in detail
