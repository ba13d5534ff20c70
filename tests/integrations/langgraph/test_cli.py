"""`got threads`: the LangGraph threads CLI, demo included, through the real `got` entry point."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from gitcli import fsck_clean, git

from got_core.cli import main


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def demo_repo(tmp_path, capsys):
    path = tmp_path / "demo.git"
    code, out, err = run(capsys, "threads", "demo", "--repo", str(path))
    assert code == 0, err
    assert "The answer is 84." in out and "The answer is 256." in out and "The answer is 42." in out
    assert "messages/000/000007.json" in out  # the diff of the second turn
    return path


def test_demo_writes_a_valid_repository_with_a_fork(demo_repo):
    ok, report = fsck_clean(demo_repo)
    assert ok, report
    refs = git(demo_repo, "for-each-ref", "--format=%(refname)").split()
    assert "refs/got/threads/demo/root/head" in refs
    assert any(r.startswith("refs/got/threads/demo/root/forks/") for r in refs)
    assert "refs/got/threads/demo-branch/root/head" in refs
    log = git(demo_repo, "log", "--format=%s", "refs/got/threads/demo/root/head").splitlines()
    assert log[0] == "step 9 (loop) ai: The answer is 42." and log[-1] == "step -1 (input)"


def test_list_history_show_json(demo_repo, capsys):
    code, out, _ = run(capsys, "threads", "list", "--json", "-r", str(demo_repo))
    threads = {(r["thread_id"], r["checkpoint_ns"]): r for r in json.loads(out)}
    assert code == 0 and set(threads) == {("demo", ""), ("demo-branch", "")}
    assert threads[("demo", "")]["latest_step"] == 9 and threads[("demo", "")]["checkpoints"] == 15

    code, out, _ = run(capsys, "threads", "history", "demo", "--json", "-r", str(demo_repo))
    rows = json.loads(out)
    # newest first by checkpoint id: the fork's steps 9..5, then the first line's 8..-1
    assert code == 0 and [r["step"] for r in rows] == [9, 8, 7, 6, 5, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1]
    assert rows[0]["last_message"] == "ai: The answer is 42."
    assert git(demo_repo, "cat-file", "-t", rows[0]["commit"]).strip() == "commit"
    assert any("calculator" in r["last_message"] for r in rows)

    code, out, _ = run(capsys, "threads", "show", "demo", rows[0]["checkpoint_id"][:30], "--json", "-r", str(demo_repo))
    state = json.loads(out)
    assert code == 0 and state["values"]["messages"][-1]["content"] == "The answer is 42."


def test_diff_shows_only_the_readable_state(demo_repo, capsys):
    _, out, _ = run(capsys, "threads", "history", "demo", "--json", "-r", str(demo_repo))
    rows = json.loads(out)
    newest, older = rows[0]["checkpoint_id"], rows[4]["checkpoint_id"]
    code, out, _ = run(capsys, "threads", "diff", "demo", older, newest, "-r", str(demo_repo))
    assert code == 0 and "The answer is 42." in out and ".bin" not in out and "checkpoint.json" not in out
    code, out, _ = run(capsys, "threads", "diff", "demo", older, newest, "--all", "-r", str(demo_repo))
    assert code == 0 and "checkpoint.json" in out


def test_fork_starts_a_thread_sharing_history(demo_repo, capsys):
    _, out, _ = run(capsys, "threads", "history", "demo", "--json", "-r", str(demo_repo))
    rows = json.loads(out)
    at = next(r for r in rows if r["step"] == 3)
    code, out, _ = run(
        capsys, "threads", "fork", "demo", at["checkpoint_id"], "--to", "what-if", "--json", "-r", str(demo_repo)
    )
    forked = json.loads(out)
    assert code == 0 and forked["commit"] == at["commit"]
    _, out, _ = run(capsys, "threads", "history", "what-if", "--json", "-r", str(demo_repo))
    assert [r["checkpoint_id"] for r in json.loads(out)] == [
        r["checkpoint_id"] for r in rows if r["step"] <= 3 and r["step"] >= -1
    ][-5:]
    # forking into an existing thread is refused with a clear message
    code, _, err = run(capsys, "threads", "fork", "demo", at["checkpoint_id"], "--to", "what-if", "-r", str(demo_repo))
    assert code == 2 and "already has checkpoints" in err


def test_unknown_thread_and_ambiguous_prefix_are_user_errors(demo_repo, capsys):
    code, _, err = run(capsys, "threads", "history", "nope", "-r", str(demo_repo))
    assert code == 2 and "no checkpoints" in err
    code, _, err = run(capsys, "threads", "diff", "demo", "1", "-r", str(demo_repo))
    assert code == 2 and "give more of the id" in err
    code, out, _ = run(capsys, "threads", "list", "-r", str(demo_repo))
    assert code == 0 and "demo-branch" in out


def test_cookbook_runs_end_to_end(tmp_path, capsys):
    path = Path(__file__).resolve().parents[3] / "cookbooks" / "langgraph_checkpointer.py"
    spec = importlib.util.spec_from_file_location("langgraph_checkpointer_cookbook", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    repo = tmp_path / "agent.git"
    assert module.main(["--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "fork answer: The answer is 99." in out and "replayed answer: The answer is 256." in out
    assert "+++ b/messages/000/000011.json" in out
    ok, report = fsck_clean(repo)
    assert ok, report
    heads = git(repo, "for-each-ref", "--format=%(refname)", "refs/got/threads/tutor/").split()
    assert "refs/got/threads/tutor/root/head" in heads and len(heads) >= 4  # head, 2 forks, writes
