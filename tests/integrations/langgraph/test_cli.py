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


# ---------------------------------------------------------------------------- revisions as git reads them
@pytest.fixture
def time_travel(tmp_path):
    """Two turns of the demo agent, then `update_state` on the end of the first turn: the
    latest checkpoint's parent is that old checkpoint, and the second turn is a fork line."""
    from langchain_core.messages import AIMessage, HumanMessage

    from got_integrations.langgraph import GitCheckpointSaver
    from got_integrations.langgraph.cli import build_demo_graph, history_rows

    path = tmp_path / "tt.git"
    saver = GitCheckpointSaver.from_path(path)
    graph = build_demo_graph(saver)
    config = {"configurable": {"thread_id": "t"}}
    for question in ("What is 12*(3+4)?", "What is 2**10/4?"):
        graph.invoke({"messages": [HumanMessage(question)]}, config)
    first_end = next(r for r in history_rows(saver, "t") if r["step"] == 3)
    old = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": first_end["checkpoint_id"]}}
    graph.update_state(old, {"messages": [AIMessage("Checked again: 84.")]}, as_node="agent")
    rows = history_rows(saver, "t")
    saver.close()
    return path, rows, first_end


def _show(capsys, path, rev):
    code, out, err = run(capsys, "threads", "show", "t", rev, "--json", "-r", str(path))
    assert code == 0, err
    return json.loads(out)["commit"]


def test_tilde_and_caret_walk_the_real_parents_after_time_travel(time_travel, capsys):
    path, rows, first_end = time_travel
    head = "refs/got/threads/t/root/head"
    for n in range(5):  # latest~N is git's <head>~N: the update's ancestry, never the abandoned second turn
        assert _show(capsys, path, f"latest~{n}") == git(path, "rev-parse", f"{head}~{n}").strip()
    assert _show(capsys, path, "latest~1") == first_end["commit"]
    # listing order (by checkpoint id) puts the abandoned line's newest checkpoint second: not our parent
    assert rows[1]["commit"] != first_end["commit"] and rows[1]["step"] > first_end["step"]
    assert _show(capsys, path, "latest^") == _show(capsys, path, "latest~1")
    assert _show(capsys, path, "HEAD^0") == _show(capsys, path, "latest")
    assert _show(capsys, path, "latest~2^") == _show(capsys, path, "latest~3")
    # a checkpoint id, or a commit prefix, then ~N
    assert _show(capsys, path, f"{first_end['checkpoint_id']}~2") == git(path, "rev-parse", f"{head}~3").strip()
    assert _show(capsys, path, f"{first_end['commit'][:8]}^") == git(path, "rev-parse", f"{head}~2").strip()


def test_bad_revisions_are_one_line_user_errors(time_travel, capsys):
    path, _rows, _ = time_travel
    for rev, says in [
        ("latest~x", "take a number"),
        ("latest^2", "names none"),
        ("latest~99", "goes past the first checkpoint"),
        ("1", "give more of the id"),
        ("~1", "names no checkpoint"),
    ]:
        code, _, err = run(capsys, "threads", "show", "t", rev, "-r", str(path))
        assert code == 2 and says in err and len(err.splitlines()) == 1, (rev, err)


def test_diff_fork_and_log_use_the_same_revisions(time_travel, capsys):
    path, _rows, first_end = time_travel
    code, out, _ = run(capsys, "threads", "diff", "t", "latest~1", "latest", "-r", str(path))
    assert code == 0 and "Checked again: 84." in out and "The answer is 256." not in out
    code, out, _ = run(capsys, "threads", "fork", "t", "latest~1", "--to", "t2", "--json", "-r", str(path))
    assert code == 0 and json.loads(out)["commit"] == first_end["commit"]
    code, out, _ = run(capsys, "threads", "log", "t", "--json", "-r", str(path))
    first_parents = git(path, "log", "--first-parent", "--format=%H", "refs/got/threads/t/root/head").split()
    assert code == 0 and [r["commit"] for r in json.loads(out)] == first_parents
    code, out, _ = run(capsys, "threads", "log", "t", "latest~2", "-n", "2", "--json", "-r", str(path))
    assert [r["commit"] for r in json.loads(out)] == first_parents[2:4]


def test_log_graph_shows_the_fork(time_travel, capsys):
    path, rows, first_end = time_travel
    code, out, _ = run(capsys, "threads", "log", "t", "--graph", "-r", str(path))
    assert code == 0
    lines = out.splitlines()
    latest = next(i for i, line in enumerate(lines) if "(latest)" in line)
    fork = next(i for i, line in enumerate(lines) if "(fork)" in line)
    assert "Checked again: 84." in lines[latest] and "The answer is 256." in lines[fork]
    assert any(line.strip().startswith("|/") for line in lines)  # where the two lines part
    assert f" {first_end['commit'][:7]}" in "\n".join(lines)  # ids abbreviated as git does
    # every checkpoint is in the graph exactly once
    assert sum(1 for line in lines if "step " in line) == len(rows)
