"""The merged-memory experiment (cookbooks/merged_memory.py): real worker processes, both layouts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitcli import fsck_clean, git

from got_core.bench import merged_memory as mm
from got_core.errors import InvalidInputError, MergeConflictError
from got_core.memory.base import Lesson
from got_core.memory.git import lesson_path, render_topic_file
from got_core.types import Conflict

ROOT = Path(__file__).resolve().parents[2]
COOKBOOK = ROOT / "cookbooks" / "merged_memory.py"
TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))


def cookbook(cwd: Path, *args: str, module: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the cookbook script (or ``python -m got_core.bench.merged_memory``) in directory ``cwd``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "got_core.bench.merged_memory"] if module else [sys.executable, str(COOKBOOK)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=cwd)


def test_both_phases_with_worker_processes(tmp_path):
    out = tmp_path / "run"
    proc = cookbook(tmp_path, "--standin", "--out", str(out), "--bootstrap", "1000")
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    rows = {(r["layout"], r["scenario"]): r for r in results["functional"]}
    k = len(results["planted"])
    assert k == 4
    for layout in ("keyed", "content"):
        clean = rows[(layout, "disjoint")]
        assert clean["conflicts"] == 0 and clean["silent_in_concatenation"] == 0 and clean["lessons_merged"] == 12
        # three separate worker processes, none of them the orchestrator
        pids = clean["worker_pids"]
        assert len(set(pids)) == 3 and results["orchestrator_pid"] not in pids
        assert clean["fsck_clean"] and rows[(layout, "contradictions")]["fsck_clean"]
    keyed, content = rows[("keyed", "contradictions")], rows[("content", "contradictions")]
    assert keyed["conflicts"] == k and keyed["resolved"] == k and keyed["silent_in_merge"] == 0
    assert keyed["silent_in_concatenation"] == k  # the control keeps every pair, no signal
    assert content["conflicts"] == 0 and content["silent_in_merge"] == k  # the structural caveat
    assert content["lessons_merged"] == 12 + k
    # The merged keyed memory kept the verified side of each planted topic, as a two-parent merge.
    central = out / "keyed" / "contradictions" / "central.git"
    assert fsck_clean(central)[0]
    merges = git(central, "log", "--merges", "--format=%P", "memory").splitlines()
    assert merges and all(len(m.split()) == 2 for m in merges)
    for p in results["planted"]:
        text = git(central, "show", f"memory:{lesson_path(p['topic'])}")
        assert p["text"] not in text
    # Accuracy phase: pre-registered plan first, every arm on every question, paired Δ vs merged.
    plan = json.loads((out / "preregistration.json").read_text())
    acc = results["accuracy"]
    assert acc["preregistration"] == plan and plan["primary"] == "merged vs concatenation"
    by_arm = {r["arm"]: r for r in acc["rows"]}
    assert set(by_arm) == {
        "merged",
        "concatenation",
        "solo:algebra",
        "solo:biology",
        "solo:chemistry",
        "merged (content layout)",
        "none",
    }
    assert {r["n"] for r in acc["rows"]} == {plan["n_questions"]} == {24}
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 7 * 24
    planted_texts = {p["text"] for p in results["planted"]}
    merged_seen = {t for a in answers if a["arm"] == "merged" for t in a["lessons"]}
    concat_seen = {t for a in answers if a["arm"] == "concatenation" for t in a["lessons"]}
    assert not merged_seen & planted_texts and planted_texts <= concat_seen
    assert by_arm["merged"]["acc"] > by_arm["concatenation"]["acc"]
    assert by_arm["merged"]["acc"] > max(by_arm[f"solo:{d}"]["acc"] for d in ("algebra", "biology", "chemistry"))
    assert all(r["delta"] >= 0 and r["delta_low"] <= r["delta"] <= r["delta_high"] for r in acc["rows"] if "delta" in r)
    table = (out / "table.md").read_text()
    assert "conflicts surfaced" in table and "Δ merged − arm" in table and table in proc.stdout


def test_k_contradictions_surface_as_k_conflicts(tmp_path):
    out = tmp_path / "run"
    proc = cookbook(
        tmp_path, "--no-accuracy", "--layouts", "keyed", "--contradictions", "2", "--out", str(out), module=True
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((out / "results.json").read_text())["functional"]
    (clean, contra) = rows
    assert clean["conflicts"] == 0 and contra["conflicts"] == 2 and contra["silent_in_concatenation"] == 2
    assert not (out / "preregistration.json").exists()


def test_the_data_makes_each_lesson_decide_its_questions():
    """Each question: its lesson alone gives the answer, the contradiction alone a wrong one,
    both together a tie (so concatenation guesses); other domains' lessons do not count."""
    domains = mm.load_domains()
    every = [Lesson(e["lesson"], f"{d}/{t}") for d, ts in domains.items() for t, e in ts.items()]
    for q in mm.mixed_test_set(domains):
        d, t = q["topic"].split("/")
        entry = domains[d][t]

        def answer(texts, q=q):
            request = {"messages": mm.prompt(texts, q)}
            return mm.parse_letter(mm.advice_responder(request), len(q["options"]))

        right = mm.LETTERS[q["answer"]]
        assert answer([entry["lesson"]]) == right, q["id"]
        assert answer([entry["contra"]]) != right, q["id"]
        assert mm.retrieve(every, q["q"], 1) == [entry["lesson"]], q["id"]
        assert answer(mm.retrieve(every, q["q"], 3)) == right, q["id"]


@pytest.mark.parametrize(
    "reply,letter",
    [
        ("Final Answer: B", "B"),
        ("final answer: (C) two", "C"),
        ("It is two.\nFINAL ANSWER = D", "D"),
        ("Final answer: a quadratic has no real roots, so B", "B"),
        ("The answer is E", None),  # only A-D exist
        ("no letter here", None),
    ],
)
def test_parse_letter(reply, letter):
    assert mm.parse_letter(reply, 4) == letter


def test_score_resolver_keeps_the_confident_side_and_abstains_on_a_tie():
    def conflict(a, b):
        ours = render_topic_file([Lesson("Flip the sign.", "t", score=a)])
        theirs = render_topic_file([Lesson("Keep the sign.", "t", score=b)])
        return Conflict(lesson_path("t"), None, ours, theirs)

    assert "Flip the sign." in mm.score_resolver(conflict(0.8, 0.3))
    assert "Keep the sign." in mm.score_resolver(conflict(0.3, 0.8))
    with pytest.raises(MergeConflictError, match="reviewer"):
        mm.score_resolver(conflict(0.5, 0.5))


def test_bad_inputs_are_clear_errors(tmp_path):
    bad = tmp_path / "domains.json"
    bad.write_text(json.dumps({"a": {"t": {"lesson": "x", "contra": "y", "questions": [{"q": "?"}]}}, "b": {}}))
    with pytest.raises(InvalidInputError, match="domain 'a'|domain 'b'|question"):
        mm.load_domains(bad)
    entry = {"lesson": "x", "contra": "y", "questions": [{"q": "?", "options": ["a", "b"], "answer": 0}]}
    bad.write_text(json.dumps({"../../escape": {"t": entry}, "b": {"t": entry}}))
    with pytest.raises(InvalidInputError, match="is not a name"):
        mm.load_domains(bad)
    bad.write_text(json.dumps({"a": {"t/../x": entry}, "b": {"t": entry}}))
    with pytest.raises(InvalidInputError, match="is not a name"):
        mm.load_domains(bad)
    bad.write_text(json.dumps({"a": {"t": entry}, "b": {"t": entry}}))
    assert sorted(mm.load_domains(bad)) == ["a", "b"]
    bad.write_text("{not json")
    with pytest.raises(InvalidInputError, match="cannot read"):
        mm.load_domains(bad)
    proc = cookbook(tmp_path, "--no-accuracy", "--domains", str(bad), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "cannot read the domains file" in proc.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    proc = cookbook(tmp_path, "--no-accuracy", "--out", str(tmp_path / "full"))
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    proc = cookbook(tmp_path, "--no-accuracy", "--layouts", "hashed", "--out", str(tmp_path / "r2"))
    assert proc.returncode == 2 and "--layouts" in proc.stderr
    proc = cookbook(tmp_path, "--out", str(tmp_path / "r3"))
    assert proc.returncode == 2 and "needs a model" in proc.stderr
