"""Every ``got`` subcommand, given hostile arguments, answers with one line and exit 2 or 1.

The command tree is walked (core commands and every plugin group), so a new command
without cases here fails :func:`test_every_command_has_hostile_cases`. Each case runs
in its own process (``tests/gotcli.py`` forks one per case after a single import) and
must print exactly one line on stderr, no traceback, exit 2 (bad input) or 1 (a
failure), and leave nothing new on disk.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import typer
from gotcli import TIMEOUT, got_env, run_got

from got_core.cli import _load_plugins, app

#: Commands that create what they are pointed at (a missing or empty path is fine for them).
CREATORS = {"init", "demo", "unbundle", "gcc init", "gcc import", "threads demo", "memory add", "mcp"}

R = "{repo}"  # the command group's good repository


def c(command: str, *argv: str, code: int | None = 2) -> tuple[str, tuple[str, ...], int | None]:
    """A case: ``got <command> <argv>`` must fail with ``code`` (None: 1 or 2)."""
    return command, argv, code


#: command -> (the good repository it works on, arguments that make it otherwise valid)
BASE: dict[str, tuple[str, tuple[str, ...]]] = {
    "init": ("{fresh}", ()),
    "demo": ("{fresh}", ()),
    "log": ("{demo}", ()),
    "show": ("{demo}", ("best",)),
    "diff": ("{demo}", ("master", "best")),
    "replay": ("{demo}", ("best", "{out}")),
    "grep": ("{demo}", ("km",)),
    "search": ("{demo}", ("speed",)),
    "tags": ("{demo}", ()),
    "verify": ("{demo}", ()),
    "fsck": ("{demo}", ()),
    "gc": ("{demo}", ()),
    "fetch": ("{demo}", ("{peer}",)),
    "merge": ("{demo}", ("{peer}",)),
    "push": ("{demo}", ("{peer}",)),
    "bundle": ("{demo}", ("{out}.bundle",)),
    "unbundle": ("{fresh}", ("{bundle}",)),
    "gcc init": ("{fresh}", ("roadmap",)),
    "gcc log": ("{gcc}", ("-o", "seen")),
    "gcc commit": ("{gcc}", ("done",)),
    "gcc branch": ("{gcc}", ("b2", "why")),
    "gcc switch": ("{gcc}", ("main",)),
    "gcc merge": ("{gcc}", ("side",)),
    "gcc context": ("{gcc}", ()),
    "gcc branches": ("{gcc}", ()),
    "gcc export": ("{gcc}", ("{out}",)),
    "gcc import": ("{fresh}", ("{gccdir}",)),
    "session list": ("{sessions}", ()),
    "session log": ("{sessions}", ("alice",)),
    "session show": ("{sessions}", ("alice",)),
    "session diff": ("{sessions}", ("alice", "1", "2")),
    "threads list": ("{threads}", ()),
    "threads history": ("{threads}", ("demo",)),
    "threads log": ("{threads}", ("demo",)),
    "threads show": ("{threads}", ("demo",)),
    "threads diff": ("{threads}", ("demo", "latest~1")),
    "threads fork": ("{threads}", ("demo", "latest~1", "--to", "other")),
    "threads demo": ("{fresh}", ()),
    "solve": ("", ("q?", "--scripted", "{script}", "--repo-root", "{out}")),
    "audit": ("", ("{dir}", "--no-rerun")),
    "memory list": ("", ("-p", "{mem}")),
    "memory search": ("", ("units", "-p", "{mem}")),
    "memory add": ("", ("lesson", "-p", "{out}")),
    "memory stats": ("", ("-p", "{mem}")),
    "bisect": ("{mem}", ("--good", "memory~1", "--run", "true")),
    "mcp": ("{demo}", ("--read-only",)),
    "ui": ("{demo}", ()),  # never run with good arguments here: it would serve until stopped
}

#: Cases beyond the generic ones (bad --repo paths and bad numbers are added for every command).
CASES = [
    # ---- core reading commands
    c("log", "no-such-branch", "-r", R),
    c("log", "master~x", "-r", R),
    c("log", "master^3", "-r", R),
    c("log", "-n", "-1", "-r", R),
    c("show", "no-such-thing", "-r", R),
    c("show", "best~40", "-r", R),
    c("show", "..", "-r", R),
    c("show", "master:thought.md", "-r", R),
    c("diff", "best", "no-such", "-r", R),
    c("diff", "no-such", "best", "-r", R),
    c("diff", "master", "best", "-U", "-1", "-r", R),
    c("diff", "master", "best", "-p", "../x", "-r", R),
    c("replay", "best", "{file}", "-r", R),
    c("replay", "best", "/proc/x", "-r", R, code=None),
    c("replay", "best", "/proc/version/x", "-r", R),
    c("replay", "no-such", "{out}", "-r", R),
    c("grep", "(", "-r", R),
    c("grep", "x", "-b", "no-such-branch", "-r", R),
    c("search", "speed", "-k", "0", "-r", R),
    c("search", "speed", "-k", "-3", "-r", R),
    c("search", "speed", "-b", "no-such-branch", "-r", R),
    c("verify", "--allowed-signers", "{missing}", "-r", R),
    c("verify", "--allowed-signers", "{dir}", "-r", R),
    c("verify", "--allowed-signers", "/proc/self/mem", "-r", R, code=None),
    c("verify", "--gnupghome", "{missing}", "-r", R),
    c("verify", "--gnupghome", "{file}", "-r", R),
    c("verify", "no-such", "-r", R),
    # ---- sharing
    c("fetch", "{missing}", "-r", R),
    c("fetch", "{file}", "-r", R),
    c("fetch", "{dir}", "-r", R),
    c("fetch", "/proc/self", "-r", R),
    c("fetch", "{peer}", "--name", "", "-r", R),
    c("fetch", "{peer}", "--max-blob-bytes", "0", "-r", R),
    c("merge", "-r", R),
    c("merge", "no-such-rev", "-r", R),
    c("merge", "{file}", "-r", R),
    c("merge", "{peer}", "-s", "bogus", "-r", R),
    c("merge", "--resolve", "maybe", "x", "-r", R),
    c("merge", "--resolve", "ours", "nobody", "-r", R),
    c("merge", "--workers", "-s", "bogus", "-r", R),
    c("merge", "{peer}", "--branch", "no-such", "-r", R),
    c("push", "{missing}", "-r", R),
    c("push", "{file}", "-r", R),
    c("push", "{peer}", "-b", "no-such-branch", "-r", R),
    c("push", "{peer}", "--merge", "bogus", "-r", R),
    c("bundle", "{dir}", "-r", R),
    c("bundle", "/proc/x", "-r", R, code=None),
    c("bundle", "{missing}", "-r", R),
    c("bundle", "{out}.bundle", "--ref", "no-such", "-r", R),
    c("bundle", "{fifo}", "-r", R),  # a special file is refused, never replaced by the bundle
    c("unbundle", "{missing}", "-r", R),
    c("unbundle", "{dir}", "-r", R),
    c("unbundle", "{file}", "-r", R, code=None),
    c("unbundle", "{locked}", "-r", R, code=None),
    c("unbundle", "/proc/self/mem", "-r", R, code=None),
    c("unbundle", "{bundle}", "-r", "{file}"),
    c("unbundle", "{bundle}", "-r", "/proc/x", code=None),
    # ---- creators
    c("init", "-r", "{file}"),
    c("init", "-r", "{nonempty}"),
    c("init", "-r", "/proc/x", code=None),
    c("init", "-r", "/proc/version/x"),
    c("demo", "-r", "{file}"),
    c("demo", "-r", "{nonempty}"),
    c("demo", "-r", "/proc/x", code=None),
    c("threads demo", "-r", "{file}"),
    c("threads demo", "-r", "{nonempty}"),
    c("threads demo", "-r", "/proc/x", code=None),
    # ---- solve
    c("solve", "q?", "--scripted", "{missing}", "--repo-root", "{out}"),
    c("solve", "q?", "--scripted", "{dir}", "--repo-root", "{out}"),
    c("solve", "q?", "--scripted", "{file}", "--repo-root", "{out}"),
    c("solve", "q?", "--scripted", "{locked}", "--repo-root", "{out}"),
    c("solve", "q?", "--scripted", "{badscript}", "--repo-root", "{out}"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{file}"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "/proc/x", code=None),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{out}", "--arm", "bogus"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{out}", "--memory", "bogus"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{out}", "--memory", "git", "--memory-path", "{file}"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{out}", "--n", "0", "--arm", "self_consistency"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{out}", "--timeout", "-1"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{out}", "--token-cap", "0"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{out}", "--tools", "bogus"),
    c("solve", "q?", "--scripted", "{script}", "--repo-root", "{out}", "-c", "only one"),
    c("solve", "q?", "--base-url", "{deadurl}", "--repo-root", "{out}", code=1),
    c("solve", "q?", "--base-url", "not a url", "--repo-root", "{out}"),
    c("solve", "", "--scripted", "{script}", "--repo-root", "{out}"),
    # ---- audit
    c("audit", "{missing}", "--no-rerun"),
    c("audit", "{file}", "--no-rerun"),
    c("audit", "{dir}", "--no-rerun"),
    c("audit", "/proc/self", "--no-rerun"),
    c("audit", "{dir}", "--min-answer-chars", "-1", "--no-rerun"),
    # ---- memory
    c("memory list", "-b", "bogus", "-p", "{mem}"),
    c("memory list", "-p", "{missing}"),
    c("memory list", "-p", "{file}"),
    c("memory list", "-p", "/proc/self"),
    c("memory list", "-b", "markdown", "-p", "{dir}"),
    c("memory search", "units", "-p", "{mem}", "-k", "0"),
    c("memory search", "units", "-p", "{missing}"),
    c("memory search", "units", "-b", "vector", "-p", "{file}"),
    c("memory stats", "-p", "{missing}"),
    c("memory stats", "-b", "graph", "-p", "{file}"),
    c("memory add", "lesson", "-p", "{file}"),
    c("memory add", "lesson", "-p", "/proc/x", code=None),
    c("memory add", "lesson", "-p", "/proc/version/x"),
    c("memory add", "lesson", "--score", "2", "-p", "{out}"),
    c("memory add", "lesson", "--outcome", "maybe", "-p", "{out}"),
    c("memory add", "   ", "-p", "{out}"),
    c("memory add", "lesson", "-b", "bogus", "-p", "{out}"),
    # ---- gcc
    c("gcc init", "x", "-r", "{file}"),
    c("gcc init", "x", "-r", "/proc/x", code=None),
    c("gcc init", "x", "-n", "", "-r", "{out}"),
    c("gcc init", "x", "-r", "{nonempty}"),
    c("gcc init", "x", "-r", "{gcc}"),
    c("gcc log", "-o", "x"),  # no -r and no ./got.git: an error, never a new ./got.git
    c("gcc commit", "s"),
    c("gcc context"),
    c("gcc log", "-o", "x", "-b", "no-such", "-r", R),
    c("gcc log", "-o", "x", "-n", "nope", "-r", R),
    c("gcc commit", "s", "-b", "no-such", "-r", R),
    c("gcc branch", "main", "again", "-r", R),
    c("gcc branch", "..", "bad name", "-r", R),
    c("gcc switch", "no-such", "-r", R),
    c("gcc merge", "no-such", "-r", R),
    c("gcc merge", "side", "--into", "no-such", "-r", R),
    c("gcc context", "-k", "-1", "-r", R),
    c("gcc context", "-b", "no-such", "-r", R),
    c("gcc context", "-n", "nope", "-r", R),
    c("gcc branches", "-n", "nope", "-r", R),
    c("gcc export", "{file}", "-r", R),
    c("gcc export", "/proc/x", "-r", R, code=None),
    c("gcc export", "{gccdir}", "-r", R),
    c("gcc export", "{out}", "-n", "nope", "-r", R),
    c("gcc import", "{missing}", "-r", R),
    c("gcc import", "{file}", "-r", R),
    c("gcc import", "{dir}", "-r", R),
    c("gcc import", "/proc/self", "-r", R),
    c("gcc import", "{gccdir}", "--max-file-bytes", "0", "-r", R),
    c("gcc import", "{gccdir}", "--max-total-bytes", "-5", "-r", R),
    c("gcc import", "{gccdir}", "-r", "{file}"),
    # ---- bisect
    c("bisect", "--good", "no-such", "--run", "true", "-r", R),
    c("bisect", "--good", "memory", "--run", "true", "-r", R),  # good is the tip: nothing to bisect
    c("bisect", "--good", "memory~1", "--bad", "no-such", "--run", "true", "-r", R),
    c("bisect", "--good", "memory~1", "--run", "true", "-b", "no-such", "-r", R),
    c("bisect", "--good", "memory~1", "--run", "", "-r", R),
    c("bisect", "--good", "memory~1", "--run", "true", "--metric", "(", "--threshold", "1", "-r", R),
    c("bisect", "--good", "memory~1", "--run", "true", "--metric", "x", "-r", R),
    c("bisect", "--good", "memory~1", "--run", "true", "--metric", "x", "--threshold", "nan", "-r", R),
    c("bisect", "--good", "memory~1", "--run", "true", "--timeout", "-1", "-r", R),
    c("bisect", "--good", "memory~1", "--run", "true", "--scratch", "{file}", "-r", R, code=None),
    c("bisect", "--run", "true", "-r", R),
    # ---- mcp (the repository is checked before serving; stdin is empty, so nothing is served)
    c("mcp", "--port", "0", "-r", R),
    c("mcp", "--port", "70000", "-r", R),
    c("mcp", "--read-only", "-r", "{missing}"),
    c("mcp", "--read-only", "-r", "{dir}"),
    # ---- ui (checks the repository and the run directory before serving)
    c("ui", "--run", "{dir}"),
    c("ui", "--run", "{file}"),
    c("ui", "--run", "{missing}"),
    c("ui", "--port", "-1", "-r", R),
    c("ui", "--port", "70000", "-r", R),
    c("ui", "--host", "256.0.0.1", "--port", "0", "-r", R, code=None),
    # ---- session
    c("session log", "nobody", "-r", R),
    c("session show", "nobody", "-r", R),
    c("session diff", "nobody", "1", "2", "-r", R),
    c("session diff", "alice", "1", "9", "-r", R),
    c("session diff", "alice", "0", "1", "-r", R),
    c("session diff", "alice", "x~y", "1", "-r", R),
    # ---- threads
    c("threads history", "nope", "-r", R),
    c("threads history", "demo", "--ns", "nope", "-r", R),
    c("threads history", "demo", "-n", "-1", "-r", R),
    c("threads log", "nope", "-r", R),
    c("threads log", "demo", "latest~x", "-r", R),
    c("threads log", "demo", "-n", "0", "-r", R),
    c("threads show", "nope", "-r", R),
    c("threads show", "demo", "latest~x", "-r", R),
    c("threads show", "demo", "latest~99", "-r", R),
    c("threads show", "demo", "latest^2", "-r", R),
    c("threads show", "demo", "latest^x", "-r", R),
    c("threads show", "demo", "latest~-1", "-r", R),
    c("threads show", "demo", "1", "-r", R),
    c("threads show", "demo", "zzzz", "-r", R),
    c("threads show", "demo", "", "-r", R),
    c("threads diff", "demo", "latest~x", "-r", R),
    c("threads diff", "demo", "latest", "nope", "-r", R),
    c("threads diff", "nope", "latest", "-r", R),
    c("threads fork", "demo", "nope", "-r", R),
    c("threads fork", "demo", "latest", "--to", "demo", "-r", R),
    c("threads fork", "demo", "latest", "--to", "", "-r", R),
    c("threads fork", "nope", "latest", "--to", "x", "-r", R),
]

#: Bad --repo paths, tried on every command that takes one.
BAD_REPOS = ["{missing}", "{file}", "{dir}", "{nonempty}", "/proc/self", "/proc/x", "{locked}"]


def _commands() -> dict[str, object]:
    _load_plugins()
    root = typer.main.get_command(app)
    found: dict[str, object] = {}

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        elif path:
            found[" ".join(path)] = cmd

    walk(root, [])
    return found


def _generic_cases() -> list[tuple[str, tuple[str, ...], int | None]]:
    out = []
    for name, cmd in _commands().items():
        if name not in BASE:
            continue
        repo, base = BASE[name]
        params = {opt: p for p in cmd.params for opt in getattr(p, "opts", [])}
        if "--repo" in params:
            for bad in BAD_REPOS:
                if name in CREATORS and bad in ("{missing}", "{dir}"):
                    continue  # creating there is what the command is for
                # /proc/x cannot be created: the OS refuses (1); the others are bad input (2)
                out.append(c(name, *base, "-r", bad, code=None if bad == "/proc/x" else 2))
        for p in cmd.params:
            if p.param_type_name == "option" and _numeric(p.type_descriptor.annotation):
                where = ("-r", repo) if "--repo" in params else ()
                out.append(c(name, *base, p.opts[0], "x", *where))
                out.append(c(name, *base, p.opts[0], "nan", *where))
    return out


def _numeric(annotation: object) -> bool:
    kinds = set(typing.get_args(annotation)) or {annotation}
    return bool(kinds & {int, float}) and not kinds & {bool}


def _all_cases():
    return CASES + _generic_cases()


def _case_id(case) -> str:
    name, argv, _ = case
    return f"{name} {' '.join(argv)}"


def test_every_command_has_hostile_cases():
    """The table covers the whole command tree: a new command needs a BASE entry and cases."""
    commands = set(_commands())
    assert commands - set(BASE) == set(), "commands without a BASE entry: add one"
    tried = {name for name, _, _ in _all_cases()}
    assert commands - tried == set(), "commands without a hostile case: add some to CASES"
    assert set(BASE) - commands == set(), "BASE names commands that do not exist"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _got(*args: str, cwd: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from got_core.cli import _console_main; _console_main()", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A working directory with good repositories of every kind and hostile paths beside them."""
    w = tmp_path_factory.mktemp("hostile")
    home = tmp_path_factory.mktemp("home")
    env = got_env(home, COLUMNS="80", GOT_BASE_URL=f"http://127.0.0.1:{_free_port()}/v1")
    (w / "notes.txt").write_text("hello\n")
    (w / "emptydir").mkdir()
    (w / "nonempty").mkdir()
    (w / "nonempty" / "a.txt").write_text("keep me\n")
    (w / "locked.bin").write_bytes(b"\x00junk")
    (w / "locked.bin").chmod(0)
    os.mkfifo(w / "pipe")
    (w / "script.json").write_text(json.dumps(["Thought: 4.\nConfidence: 0.9\nFinal Answer: 4"]))
    (w / "badscript.json").write_text(json.dumps({"replies": [1, 2]}))
    _got("demo", "-r", "demo.git", cwd=w, env=env)
    _got("init", "-r", "peer.git", cwd=w, env=env)
    _got("bundle", "demo.bundle", "-r", "demo.git", cwd=w, env=env)
    _got("threads", "demo", "-r", "threads.git", cwd=w, env=env)
    _got("gcc", "init", "roadmap", "-r", "gcc.git", cwd=w, env=env)
    _got("gcc", "branch", "side", "try", "-r", "gcc.git", cwd=w, env=env)
    _got("gcc", "commit", "side done", "-r", "gcc.git", cwd=w, env=env)
    _got("gcc", "switch", "main", "-r", "gcc.git", cwd=w, env=env)
    _got("gcc", "export", "gccdir", "-r", "gcc.git", cwd=w, env=env)
    _got("memory", "add", "Check units first.", "-p", "mem", cwd=w, env=env)
    _got("memory", "add", "Draw the figure first.", "-p", "mem", cwd=w, env=env)  # memory~1 exists: bisectable
    from llama_index.core.base.llms.types import ChatMessage

    from got_integrations.llamaindex import GitMemory

    alice = GitMemory.from_defaults(path=w / "sessions.git", session_id="alice")
    alice.put(ChatMessage(role="user", content="What is 2 + 3?"))
    alice.put(ChatMessage(role="assistant", content="5"))
    for repo in ("demo.git", "peer.git", "threads.git", "gcc.git", "sessions.git", "mem"):
        _got("gc", "-r", repo, cwd=w, env=env)  # packed, indexed: reads add nothing later
    return w, env


def _fill(text: str, w: Path, repo: str) -> str:
    names = {
        "repo": repo,
        "demo": "demo.git",
        "threads": "threads.git",
        "sessions": "sessions.git",
        "gcc": "gcc.git",
        "peer": "peer.git",
        "bundle": "demo.bundle",
        "mem": "mem",
        "file": "notes.txt",
        "dir": "emptydir",
        "nonempty": "nonempty",
        "missing": "missing/nothing",
        "locked": "locked.bin",
        "fifo": "pipe",
        "out": "out/new",
        "fresh": "fresh.git",
        "gccdir": "gccdir",
        "script": "script.json",
        "badscript": "badscript.json",
        "deadurl": "{deadurl}",
    }
    return text.format(**names)


@pytest.fixture(scope="module")
def results(world):
    w, env = world
    cases = _all_cases()
    runs = []
    for name, argv, _ in cases:
        repo = BASE.get(name, ("", ()))[0]
        filled = [_fill(a, w, _fill(repo, w, "")) if "{" in a else a for a in argv]
        filled = [a.replace("{deadurl}", env["GOT_BASE_URL"]) for a in filled]
        runs.append({"argv": [*name.split(), *filled], "watch": [str(w)]})
    out = run_got(runs, env, w)
    return {_case_id(case): (run, res) for case, run, res in zip(cases, runs, out, strict=True)}


@pytest.mark.parametrize("case", _all_cases(), ids=_case_id)
def test_hostile_arguments_fail_with_one_line(results, case):
    run, res = results[_case_id(case)]
    expected = case[2]
    err_lines = res["stderr"].splitlines()
    shown = f"got {' '.join(run['argv'])}\n--- exit {res['code']}\n--- stderr:\n{res['stderr']}\n--- stdout:\n{res['stdout'][-2000:]}"
    assert "Traceback" not in res["stderr"], shown
    assert len(err_lines) == 1, shown
    assert "internal error" not in res["stderr"], shown
    assert res["code"] in ((1, 2) if expected is None else (expected,)), shown
    assert res["created"] == [], f"{shown}\n--- created: {res['created']}"


def test_special_files_are_never_replaced(results, world):
    w, _ = world
    _run, res = results[_case_id(c("bundle", "{fifo}", "-r", R))]
    assert res["code"] == 2 and "not a regular file" in res["stderr"], res
    assert stat.S_ISFIFO((w / "pipe").lstat().st_mode)  # still the FIFO it was
