"""`got session list|log|show|diff` on a repository written by GitMemory."""

from __future__ import annotations

import json

from llama_index.core.base.llms.types import ChatMessage
from typer.testing import CliRunner

from got_core.cli import main as got_main
from got_integrations.llamaindex import GitMemory
from got_integrations.llamaindex._session import message_path
from got_integrations.llamaindex.cli import app

runner = CliRunner()


def _seed(repo_path):
    alice = GitMemory.from_defaults(path=repo_path, session_id="alice")
    alice.put(ChatMessage(role="user", content="What is 2 + 3?"))
    alice.put_messages([ChatMessage(role="assistant", content="It is 5."), ChatMessage(role="user", content="Thanks!")])
    GitMemory.from_defaults(path=repo_path, session_id="bob/x").put(ChatMessage(role="user", content="hey"))
    return alice


def test_list_log_show_json(repo_path):
    alice = _seed(repo_path)
    out = runner.invoke(app, ["list", "--repo", str(repo_path), "--json"])
    assert out.exit_code == 0, out.output
    rows = {r["session"]: r for r in json.loads(out.output)}
    assert set(rows) == {"alice", "bob/x"} and rows["alice"]["messages"] == 3
    assert rows["alice"]["head"] == alice.head
    out = runner.invoke(app, ["log", "alice", "--repo", str(repo_path), "--json"])
    writes = json.loads(out.output)
    assert [w["commit"] for w in writes] == [w.commit for w in alice.history()]
    assert [[m["preview"] for m in w["messages"]] for w in writes] == [["What is 2 + 3?"], ["It is 5.", "Thanks!"]]
    assert writes[1]["messages"][0]["id"] == alice.message_ids()[1]
    out = runner.invoke(app, ["show", "alice", "--repo", str(repo_path), "--json"])
    assert [r["id"] for r in json.loads(out.output)] == alice.message_ids()


def test_text_output_and_diff_between_writes(repo_path, capsys):
    alice = _seed(repo_path)
    assert got_main(["session", "log", "alice", "--repo", str(repo_path)]) == 0
    text = capsys.readouterr().out
    first, second = alice.history()[0].commit, alice.history()[1].commit
    assert f"#1 {first[:7]} " in text and f"#2 {second[:7]} " in text and "It is 5." in text
    assert got_main(["session", "diff", "alice", "1", "2", "--repo", str(repo_path)]) == 0
    patch = capsys.readouterr().out
    assert message_path(2) in patch and message_path(3) in patch and message_path(1) not in patch
    assert '"text": "Thanks!"' in patch
    assert got_main(["session", "diff", "alice", first, second[:12], "--repo", str(repo_path)]) == 0
    assert capsys.readouterr().out == patch  # commits work as well as write numbers
    assert got_main(["session", "list", "--repo", str(repo_path)]) == 0
    assert "bob/x" in capsys.readouterr().out


def test_errors_are_clear(repo_path, tmp_path, capsys):
    _seed(repo_path)
    assert got_main(["session", "log", "carol", "--repo", str(repo_path)]) == 2
    assert "no session 'carol'" in capsys.readouterr().err
    assert got_main(["session", "diff", "alice", "1", "7", "--repo", str(repo_path)]) == 2
    assert "writes 1..2" in capsys.readouterr().err
    assert got_main(["session", "list", "--repo", str(tmp_path / "nothing.git")]) == 2
    assert "no git repository" in capsys.readouterr().err


def test_show_abbreviates_message_ids_that_git_still_reads(repo_path, capsys):
    from gitcli import git

    alice = _seed(repo_path)
    ids = alice.message_ids()
    assert got_main(["session", "show", "alice", "--repo", str(repo_path)]) == 0
    shown = [line.strip() for line in capsys.readouterr().out.splitlines() if ":messages/" in line]
    assert len(shown) == len(ids) and not any(full in shown for full in ids)
    for short, full in zip(shown, ids, strict=True):
        commit, _, path = short.partition(":")
        assert 7 <= len(commit) <= 12 and full == f"{git(repo_path, 'rev-parse', commit).strip()}:{path}"
        assert git(repo_path, "show", short) == git(repo_path, "show", full)  # git reads the short id
    assert got_main(["session", "show", "alice", "--full", "--repo", str(repo_path)]) == 0
    out = capsys.readouterr().out
    assert all(full in out for full in ids)
