"""The fairness audit (got_core.bench.audit, `got audit`) on a real stand-in run, and on tampered copies."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import typer
from typer.testing import CliRunner

from got_core.bench import protocols as P
from got_core.bench.audit import MIN_ANSWER_CHARS, answer_needles, audit_run
from got_core.bench.runner import ModelSpec, Task
from got_core.cli.audit import register
from got_core.errors import ConfigError
from got_core.memory.git import GitMemory
from got_core.repo import ReasoningRepo
from got_core.types import canonical_json

DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """One small five-substrate run (stand-in model), shared read-only by the tests below."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:  # the autouse isolation is per test; do the same here
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        opts = P.ExperimentOptions(
            out=tmp_path_factory.mktemp("audit") / "run",
            math_path=DATA / "math500_sample.jsonl",
            gpqa_path=DATA / "gpqa_sample.csv",
            k_study=3,
            m_test=5,
            backends=("git",),
            method="argue",
            workers=1,
            progress=False,
            bootstrap=200,
            spec=ModelSpec(
                "http://127.0.0.1:0/v1",
                "got-standin",
                max_tokens=64,
                parallel_nodes=False,
                standin={"responder": "bench"},
            ),
        )
        P.five_substrates(opts)
    return opts.out


@pytest.fixture
def run(clean_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(clean_run, copy)
    return copy


def _status(report):
    return {c.name: c.status for c in report.checks}


def _config(run):
    return json.loads((run / "config.json").read_text())


def test_a_clean_run_passes_every_check(run):
    report = audit_run(run)
    status = _status(report)
    assert report.ok, report.to_dict()
    assert status == {
        "results complete": "PASS",
        "split disjoint": "PASS",
        "same gold letters across arms": "PASS",
        "every node a commit": "PASS",
        "no expected answer in memory": "PASS",
        "fresh memory per question": "PASS",
        "seeded re-run identical": "PASS",
        "git fsck central.git": "PASS",
    }
    detail = {c.name: c.detail for c in report.checks}
    assert f"shorter than {MIN_ANSWER_CHARS} characters" in detail["no expected answer in memory"]
    assert "bit-identical (same SHAs)" in detail["seeded re-run identical"]


def test_an_answer_leaked_into_a_memory_commit_fails(run):
    config = _config(run)
    by_id = {p["id"]: p for p in config["problems"]}
    leak = next(by_id[i]["answer"] for i in config["split"]["test"] if len(by_id[i]["answer"]) >= MIN_ANSWER_CHARS)
    with GitMemory(repo=ReasoningRepo.open(run / "memory" / "git")) as mem:
        mem.add_insight(f"When in doubt the answer is {leak}, remember it.")
    report = audit_run(run, rerun=False)
    check = next(c for c in report.checks if c.name == "no expected answer in memory")
    assert check.status == "FAIL" and repr(leak) in check.detail
    assert _status(report)["fresh memory per question"] == "FAIL"  # the memory moved after ingest
    assert not report.ok


def test_a_gold_letter_that_differs_between_arms_fails(run):
    config = _config(run)
    task = next(t for t in config["tasks"] if t["arm"] == "git" and t["problem_id"].startswith("rec"))
    with ReasoningRepo(run / "central.git", create=False) as central:
        sha = central.tip(task["ref"])
        record = json.loads(central.read_file(sha, "result.json"))
        record["gold_letter"] = "D" if record["gold_letter"] != "D" else "A"
        central.commit_files(task["ref"], {"result.json": canonical_json(record)}, "tamper\n", parents=[sha])
    status = _status(audit_run(run, rerun=False))
    assert status["same gold letters across arms"] == "FAIL"


def test_a_missing_result_and_a_changed_record_fail(run):
    config = _config(run)
    ref = Task.from_dict(config["audit"]["rerun_task"]).result_ref
    other = next(t["ref"] for t in config["tasks"] if t["ref"] != ref)
    with ReasoningRepo(run / "central.git", create=False) as central:
        sha = central.tip(ref)
        record = json.loads(central.read_file(sha, "result.json"))
        record["answer"] = "a different answer"
        central.commit_files(ref, {"result.json": canonical_json(record)}, "tamper\n", parents=[sha])
        central.delete_ref(other)
    status = _status(audit_run(run))
    assert status["results complete"] == "FAIL"
    assert status["seeded re-run identical"] == "FAIL"


def test_answer_rule_skips_short_answers():
    assert answer_needles("\\frac{7}{12}") == (["\\frac{7}{12}"], [])
    assert answer_needles(" 24 ") == ([], ["24"])
    assert answer_needles("9 E1", 4) == (["9 E1"], [])
    assert answer_needles("") == ([], [])


def test_not_a_run_directory_is_a_user_error(tmp_path):
    with pytest.raises(ConfigError, match="not a benchmark run"):
        audit_run(tmp_path)


def test_got_audit_command_exits_nonzero_on_fail(run):
    app = typer.Typer()
    register(app)

    @app.command("noop")  # a second command keeps typer from collapsing the app into `audit`
    def noop() -> None:
        """Nothing."""

    runner = CliRunner()
    ok = runner.invoke(app, ["audit", str(run), "--no-rerun", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    shutil.rmtree(run / "central.git" / "refs" / "got" / "results" / "git")
    bad = runner.invoke(app, ["audit", str(run), "--no-rerun"])
    assert bad.exit_code == 1 and "FAIL" in bad.output
