"""``got mcp``: the official MCP client against our server, over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is part of the dev install")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from got_core.cli import main
from got_integrations.mcp import MAX_TEXT_CHARS, READ_TOOLS, WRITE_TOOLS, build_server
from tests.gitcli import fsck_clean, git

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))


def stdio(repo: Path, *extra: str) -> StdioServerParameters:
    """``got mcp`` as a subprocess (module form, so it runs from this checkout)."""
    env = {"PYTHONPATH": str(ROOT), "HOME": os.environ.get("HOME", str(repo.parent))}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "got_integrations.mcp", "-r", str(repo), *extra],
        env=env,
        cwd=str(repo.parent),
    )


async def call(client: Client, tool: str, /, **arguments):
    result = await client.call_tool(tool, arguments)
    return result.is_error, "".join(getattr(c, "text", "") for c in result.content)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def test_a_gcc_session_memory_and_history_over_stdio(tmp_path):
    repo = tmp_path / "agent.git"

    async def session():
        async with Client(stdio(repo), read_timeout_seconds=TIMEOUT) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == set(WRITE_TOOLS) | set(READ_TOOLS)
            assert tools["gcc_log"].input_schema["required"] == ["observation", "thought", "action"]
            assert all(t.description for t in tools.values())
            steps = [
                ("gcc_log", {"observation": "the tests fail", "thought": "a missing import", "action": "add it"}),
                ("gcc_commit", {"summary": "fixed the import; tests pass"}),
                ("gcc_branch", {"name": "faster", "purpose": "try a cache"}),
                ("gcc_log", {"observation": "slow", "thought": "cache results", "action": "add lru_cache"}),
                ("gcc_commit", {"summary": "cached the lookups"}),
                ("gcc_merge", {"branch": "faster"}),
                ("memory_add", {"text": "Run the tests before caching anything.", "topic": "caching"}),
            ]
            for name, args in steps:
                is_error, text = await call(client, name, **args)
                assert not is_error, (name, text)
            _, context = await call(client, "gcc_context", k=3)
            assert "cached the lookups" in context and "branch `main`" in context
            _, found = await call(client, "memory_search", query="caching tests", k=2)
            assert json.loads(found)[0]["text"] == "Run the tests before caching anything."
            _, log = await call(client, "got_log", rev="gcc/main", limit=50)
            log = json.loads(log)
            assert any("Merged branch `faster`" in e["summary"] for e in log)
            _, shown = await call(client, "got_show", rev=log[0]["oid"])
            assert json.loads(shown)["oid"] == log[0]["oid"]
            _, diff = await call(client, "got_diff", a=log[-1]["oid"], b=log[0]["oid"])
            assert diff.startswith("diff --git")
            _, hits = await call(client, "got_grep", pattern="cached the lookups", fixed=True)
            assert {h["oid"] for h in json.loads(hits)} <= {e["oid"] for e in log} and json.loads(hits)
            _, pending = await call(client, "merge_status")
            assert json.loads(pending) == []
            return log

    log = run(session())
    # what the tools wrote is plain git: the branches, the commits, the memory, a clean fsck
    assert git(repo, "rev-parse", "gcc/main").strip() == log[0]["oid"]
    assert "faster" in git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/gcc/")
    assert "Run the tests before caching anything." in git(repo, "log", "-1", "--format=%B", "memory")
    assert fsck_clean(repo)[0]


HOSTILE = [
    ("gcc_branch", {"name": "../escape", "purpose": "x"}),
    ("gcc_branch", {"name": ".git", "purpose": "x"}),
    ("gcc_branch", {"name": "a" * 300, "purpose": "x"}),
    ("gcc_merge", {"branch": "no-such-branch"}),
    ("gcc_commit", {"summary": ""}),
    ("gcc_log", {"observation": "o" * (MAX_TEXT_CHARS + 1), "thought": "t", "action": "a"}),
    ("gcc_context", {"k": "many"}),
    ("gcc_context", {"k": 10**9}),
    ("memory_add", {"text": "a lesson", "outcome": "pwned"}),
    ("memory_add", {"text": "   "}),
    ("memory_search", {"query": "x", "k": -1}),
    ("got_show", {"rev": "--output=/tmp/got-mcp-pwned"}),
    ("got_show", {"rev": "HEAD@{-1}"}),
    ("got_diff", {"a": "nope", "b": "nope2"}),
    ("got_grep", {"pattern": "(unclosed"}),
    ("got_log", {"limit": 0}),
    ("no_such_tool", {}),
]


def test_hostile_arguments_are_tool_errors_and_change_nothing(tmp_path):
    repo = tmp_path / "agent.git"
    server = build_server(repo)

    async def session():
        async with Client(server, read_timeout_seconds=TIMEOUT) as client:
            assert not (await call(client, "gcc_commit", summary="a start"))[0]
            before = git(repo, "for-each-ref")
            for name, args in HOSTILE:
                is_error, text = await call(client, name, **args)
                assert is_error, (name, text)
                assert text.strip(), name  # a message the model can act on
            assert git(repo, "for-each-ref") == before
            is_error, text = await call(client, "gcc_branch", name="../escape", purpose="x")
            assert "not usable" in text

    run(session())
    assert not Path("/tmp/got-mcp-pwned").exists()
    assert fsck_clean(repo)[0]


def test_read_only_serves_only_reads_and_creates_nothing(tmp_path):
    repo = tmp_path / "agent.git"
    build_server(repo).run  # noqa: B018 - creating the server creates the repository
    ws_server = build_server(repo)

    async def write_one():
        async with Client(ws_server) as client:
            assert not (await call(client, "gcc_commit", summary="one milestone"))[0]

    run(write_one())
    before = git(repo, "for-each-ref")

    async def session():
        async with Client(stdio(repo, "--read-only"), read_timeout_seconds=TIMEOUT) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == set(READ_TOOLS)
            is_error, _ = await call(client, "gcc_commit", summary="sneaky")
            assert is_error
            assert not (await call(client, "got_log", rev="gcc/main"))[0]

    run(session())
    assert git(repo, "for-each-ref") == before
    missing = tmp_path / "missing.git"
    proc = subprocess.run(
        [sys.executable, "-m", "got_integrations.mcp", "-r", str(missing), "--read-only"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode != 0 and not missing.exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_on_loopback(tmp_path):
    repo, port = tmp_path / "agent.git", free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "got_integrations.mcp", "-r", str(repo), "--http", "--port", str(port)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:  # wait until the server accepts connections
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the MCP server never listened"
                time.sleep(0.2)

        async def session():
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=TIMEOUT) as client:
                assert "gcc_log" in {t.name for t in (await client.list_tools()).tools}
                return await call(client, "gcc_log", observation="o", thought="over http", action="a")

        is_error, text = run(session())
        assert not is_error and "logged step 1" in text
    finally:
        proc.terminate()
        proc.wait(timeout=TIMEOUT)
    assert "over http" in git(repo, "log", "-1", "--format=%B", "gcc/main")


def test_got_mcp_is_a_got_command(capsys):
    assert main(["mcp", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--read-only" in out and "--http" in out


def snapshot(repo: Path) -> tuple[str, dict[str, bytes]]:
    """Every ref (``git for-each-ref``) and every file of the git directory but the derived
    index (``got/``: a cache rebuilt from git, ARCHITECTURE §5)."""
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and p.relative_to(repo).parts[0] != "got"
    }
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)"), files


def test_read_only_changes_nothing_even_where_a_read_would_tidy_up(tmp_path):
    """``merge_status`` drops entries already merged; a read-only server must not (nor any tool)."""
    from got_core import ReasoningRepo
    from got_core.collab import pending_ref

    repo = tmp_path / "agent.git"

    async def write_some():
        async with Client(build_server(repo)) as client:
            for name, args in [
                ("gcc_commit", {"summary": "one milestone"}),
                ("gcc_branch", {"name": "side", "purpose": "an alternative"}),
                ("gcc_log", {"observation": "o", "thought": "t", "action": "a"}),
                ("memory_add", {"text": "Check units before comparing numbers.", "topic": "units"}),
            ]:
                assert not (await call(client, name, **args))[0], name

    run(write_some())
    r = ReasoningRepo(repo, create=False)
    merged = r.tip("memory")
    # parked for review: one merged since (up to date), one that would merge cleanly, one conflicted
    clean = r.commit_files("refs/heads/peer/clean", {"more.txt": "theirs\n"}, "clean\n", parents=[merged])
    clash = r.commit_files("refs/heads/peer/clash", {"notes.txt": "theirs\n"}, "clash\n", parents=[merged])
    r.commit_files("memory", {"notes.txt": "ours\n"}, "ours\n")
    for name, commit in [("peer", merged), ("clean", clean), ("clash", clash)]:
        r.set_ref(pending_ref("memory", name), commit, expected=None)
    r.close()
    refs_before, files_before = snapshot(repo)
    assert "refs/got/merge-pending/memory/peer" in refs_before

    async def session():
        async with Client(stdio(repo, "--read-only"), read_timeout_seconds=TIMEOUT) as client:
            _, log = await call(client, "got_log", rev="memory")
            oid = json.loads(log)[0]["oid"]
            reads = [
                ("merge_status", {}),
                ("merge_status", {"into": "memory"}),
                ("gcc_context", {"k": 3}),
                ("memory_search", {"query": "units numbers", "k": 2}),
                ("got_log", {"all_refs": True}),
                ("got_show", {"rev": oid}),
                ("got_diff", {"a": oid, "b": "gcc/main"}),
                ("got_grep", {"pattern": "milestone", "fixed": True}),
            ]
            assert {name for name, _ in reads} == set(READ_TOOLS)
            for name, args in reads:
                is_error, text = await call(client, name, **args)
                assert not is_error, (name, text)
            _, pending = await call(client, "merge_status")
            return json.loads(pending)

    pending = run(session())
    # the merged one is not listed (and still parked); the others are previewed, nothing written
    assert [(p["name"], [c["path"] for c in p["conflicts"]]) for p in pending] == [
        ("clash", ["notes.txt"]),
        ("clean", []),
    ]
    refs_after, files_after = snapshot(repo)
    assert refs_after == refs_before
    assert git(repo, "rev-parse", "refs/got/merge-pending/memory/peer").strip() == merged
    assert files_after == files_before
