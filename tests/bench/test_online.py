"""Online memory (issue 16 §3, Table 6's online arm): question i sees exactly the memory after question i-1."""

from __future__ import annotations

import json
import shutil

import pytest
from gitcli import git

from got_core.bench import protocols as P
from got_core.bench.memories import DeferredWrites, StaticMemory
from got_core.bench.protocols.online import ONLINE_PREFIX, check_online_stream, position_branch
from got_core.bench.runner import ModelSpec
from got_core.memory import Lesson, get_backend
from got_core.repo import ReasoningRepo

STANDIN = ModelSpec(
    "http://127.0.0.1:0/v1", "got-standin", max_tokens=64, parallel_nodes=False, standin={"responder": "bench"}
)


def _opts(out, data_dir, **kw):
    base = {
        "out": out,
        "spec": STANDIN,
        "math_path": data_dir / "math500_sample.jsonl",
        "gpqa_path": data_dir / "gpqa_sample.csv",
        "k_study": 2,
        "m_test": 6,
        "backends": ("git", "markdown"),
        "memory_mode": "online",
        "online_verify": "self",
        "workers": 1,
        "progress": False,
        "bootstrap": 300,
    }
    return P.ExperimentOptions(**{**base, **kw})


@pytest.fixture(scope="module")
def online_run(tmp_path_factory):
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "data"
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        mp.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
        out = tmp_path_factory.mktemp("online") / "run"
        result = P.five_substrates(_opts(out, data))
    return out, result


@pytest.fixture
def run(online_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(online_run[0], copy)
    return copy


def test_the_memory_grows_question_by_question_and_each_question_records_what_it_saw(online_run):
    out, result = online_run
    for arm in ("git", "markdown"):
        mine = sorted((r for r in result.records if r["arm"] == arm), key=lambda r: r["memory"]["position"])
        assert [r["memory"]["position"] for r in mine] == list(range(6))
        assert all(r["memory"]["mode"] == "online" and r["memory"]["stream"] == arm for r in mine)
        verified = [r["outcome"] == "success" for r in mine]
        # memory at question i = the lessons verified before it (one per verified question)
        assert [r["memory"]["before"]["n"] for r in mine] == [sum(verified[:i]) for i in range(6)]
        assert all(r["memory"]["before"] == r["memory"]["after"] for r in mine)  # read-only during the question
        assert any(r["memory"]["proposed"] for r in mine) and any(r["lessons_used"] for r in mine[1:])
    git_recs = sorted((r for r in result.records if r["arm"] == "git"), key=lambda r: r["memory"]["position"])
    assert [r["memory"]["branch"] for r in git_recs] == [position_branch(i) for i in range(6)]
    assert not any(r["phase"] == "study" for r in result.records)  # starting empty: no study phase
    assert check_online_stream(out)[0] == "PASS"
    config = json.loads((out / "config.json").read_text())
    assert [s["arm"] for s in config["online"]["streams"]] == ["git", "markdown"]
    steps = git(out / "central.git", "show", f"{ONLINE_PREFIX}git:steps.jsonl").splitlines()
    assert [json.loads(s)["position"] for s in steps] == list(range(-1, 6))
    assert "accuracy by quartile" in result.table_md and (out / "online.png").read_bytes()[:4] == b"\x89PNG"
    quartiles = [json.loads(line) for line in (out / "quartiles.jsonl").read_text().splitlines()]
    assert {q["arm"] for q in quartiles} == {"git", "markdown"} and sum(q["n"] for q in quartiles) == 12


def test_a_lesson_added_to_the_memory_after_the_run_fails_the_check(run):
    with get_backend("markdown", path=run / "memory" / "online" / "markdown") as mem:
        mem.add_insight("Planted after the run: always answer B.")
    status, detail = check_online_stream(run)
    assert status == "FAIL" and "markdown: the memory on disk" in detail


def test_a_record_claiming_another_memory_state_fails_the_check(run):
    config = json.loads((run / "config.json").read_text())
    key = config["online"]["streams"][0]["tasks"][3]
    ref = next(t["ref"] for t in config["tasks"] if t["key"] == key)
    with ReasoningRepo(run / "central.git", create=False) as central:
        sha = central.tip(ref)
        record = json.loads(central.read_file(sha, "result.json"))
        record["memory"]["before"]["n"] += 1  # "question 3 saw one lesson more than there was"
        parents = list(central.log(sha, decorate=False)[0].parents)
        central.commit_files(ref, {"result.json": json.dumps(record)}, "tampered\n", parents=parents, force=True)
    status, detail = check_online_stream(run)
    assert status == "FAIL" and key in detail


def test_a_moved_position_branch_fails_the_check(run):
    path = run / "memory" / "online" / "git"
    tip = git(path, "rev-parse", "refs/heads/" + position_branch(5)).strip()
    git(path, "update-ref", "refs/heads/" + position_branch(2), tip)
    status, detail = check_online_stream(run)
    assert status == "FAIL" and "branch at/2" in detail


def test_a_kill_between_the_append_and_its_log_does_not_append_twice(run, data_dir):
    with ReasoningRepo(run / "central.git", create=False) as central:
        ref = ONLINE_PREFIX + "markdown"
        last = central.log(central.tip(ref), decorate=False)[0]
        steps = [json.loads(s) for s in central.read_file(last.oid, "steps.jsonl").decode().splitlines()]
        central.set_ref(ref, last.parents[0])  # the log lost its last step; the memory kept the lesson
    assert steps[-1]["appended"] == 1, "the sample's last markdown question must have offered a lesson"
    with get_backend("markdown", path=run / "memory" / "online" / "markdown", read_only=True) as mem:
        held = len(mem.all_lessons())
    assert check_online_stream(run)[0] == "FAIL"
    P.five_substrates(_opts(run, data_dir, resume=True))
    with get_backend("markdown", path=run / "memory" / "online" / "markdown", read_only=True) as mem:
        assert len(mem.all_lessons()) == held
    assert check_online_stream(run)[0] == "PASS"


def test_every_backend_streams_online_side_by_side(tmp_path, data_dir):
    # vector included: its store is written by the driver between questions (chromadb's cache)
    opts = _opts(tmp_path / "all", data_dir, backends=("vector", "graph", "git"), m_test=3, workers=2)
    result = P.five_substrates(opts)
    for arm in ("vector", "graph", "git"):
        mine = sorted((r for r in result.records if r["arm"] == arm), key=lambda r: r["memory"]["position"])
        verified = [r["outcome"] == "success" for r in mine]
        assert [r["memory"]["before"]["n"] for r in mine] == [sum(verified[:i]) for i in range(3)], arm
    assert check_online_stream(tmp_path / "all")[0] == "PASS"


def test_gold_verification_appends_only_correct_answers(tmp_path, data_dir):
    result = P.five_substrates(_opts(tmp_path / "gold", data_dir, backends=("git",), online_verify="gold"))
    mine = sorted((r for r in result.records if r["arm"] == "git"), key=lambda r: r["memory"]["position"])
    correct = [bool(r["correct"]) for r in mine]
    assert [r["memory"]["before"]["n"] for r in mine] == [sum(correct[:i]) for i in range(len(mine))]
    assert check_online_stream(tmp_path / "gold")[0] == "PASS"


def test_static_memory_and_deferred_writes(tmp_path):
    lessons = [Lesson(f"Exemplar {i}: add the numbers, then check.", source_problem=str(i)) for i in range(3)]
    static = StaticMemory(lessons)
    assert [l.text for l in static.get_relevant("anything at all", 2)] == [lessons[0].text, lessons[1].text]
    assert static.read_only and static.add_insight("ignored") is None and len(static) == 3
    with get_backend("markdown", path=tmp_path / "m") as mem:
        mem.add_insight("Check the units of every quantity before comparing.")
    inner = get_backend("markdown", path=tmp_path / "m", read_only=True)
    deferred = DeferredWrites(inner)
    assert not deferred.read_only
    deferred.add_success("A new lesson the solver wanted to keep.", source_problem="p1", score=0.8)
    assert deferred.captured == [
        {
            "text": "A new lesson the solver wanted to keep.",
            "topic_key": "a-new-lesson-the-solver-wanted",
            "source_problem": "p1",
            "outcome": "success",
            "score": 0.8,
            "meta": {},
        }
    ]
    assert len(deferred.all_lessons()) == 1 and deferred.get_relevant("units", 3)  # the store is untouched
    deferred.close()
