"""The LangGraph Agent Server (``langgraph dev``) with our checkpointer and store.

The slow test starts the real server from a copy of ``cookbooks/agent_server`` on
127.0.0.1 (a free port, no browser, no tracing, no version check: nothing leaves the
machine), drives it with ``langgraph_sdk`` and checks with the real ``git`` binary that
what the server saved is commits on the thread's refs; a second start with ``GOT_AES_KEY``
checks that no object holds a message or store value in the clear and that the server
still reads them all back. The fast tests cover the
factories' configuration: the watched-directory guard, the default location, the key.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from gitcli import fsck_clean, git
from timeouts import TEST_TIMEOUT

from got_core.errors import ConfigError
from got_core.names import encode_component
from got_integrations.langgraph._store_doc import item_path

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "cookbooks" / "agent_server"

pytest.importorskip("langgraph_api", reason="the Agent Server needs the 'server' extra (langgraph-cli[inmem])")


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"agent_server_{name}", EXAMPLE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _thread_refs(gitdir: Path, thread_id: str) -> list[str]:
    out = git(gitdir, "for-each-ref", "--format=%(refname)", f"refs/got/threads/{encode_component(thread_id)}/")
    return out.split()


def _checkpoint_commits(gitdir: Path, ref: str) -> dict[str, str]:
    """checkpoint id -> commit, read by git from the ``Checkpoint:`` trailers along ``ref``."""
    out = git(gitdir, "log", "--format=%H %(trailers:key=Checkpoint,valueonly,separator=)", ref)
    pairs = (line.split() for line in out.splitlines() if line.strip())
    return {pair[1]: pair[0] for pair in pairs if len(pair) == 2}


def _run_trailers(gitdir: Path, thread_id: str) -> set[str]:
    """The ``Run:`` trailers of every commit on the thread's checkpoint lines."""
    refs = [r for r in _thread_refs(gitdir, thread_id) if not r.endswith("/writes")]
    if not refs:
        return set()
    out = git(gitdir, "log", "--format=%(trailers:key=Run,valueonly,separator=)", *refs)
    return {line.strip() for line in out.splitlines() if line.strip()}


# ---------------------------------------------------------------------------- the factories
async def test_repo_inside_the_watched_directory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from got_integrations.langgraph import server

    app = tmp_path / "app"
    app.mkdir()
    monkeypatch.chdir(app)
    monkeypatch.setenv("GOT_REPO", "agent.git")
    with pytest.raises(ConfigError, match="watches"):
        async with server.checkpointer():
            pass
    monkeypatch.setenv("GOT_REPO", str(tmp_path / "outside.git"))
    monkeypatch.setenv("GOT_STORE_REPO", str(app / "store.git"))
    with pytest.raises(ConfigError, match="GOT_STORE_REPO"):
        async with server.store():
            pass
    assert sorted(p.name for p in app.iterdir()) == []  # nothing was created inside the watched directory


async def test_the_watched_directory_guard_can_be_lifted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from got_integrations.langgraph import GitCheckpointSaver, server

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GOT_REPO", "agent.git")
    monkeypatch.setenv("GOT_ALLOW_REPO_IN_WATCHED_DIR", "1")
    async with server.checkpointer() as saver:
        assert isinstance(saver, GitCheckpointSaver)
        assert Path(saver.repo.gitdir).resolve() == (tmp_path / "agent.git").resolve()
    assert "langgraph dev" in caplog.text


async def test_default_repository_is_in_the_user_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from got_integrations.langgraph import GitStore, server

    app = tmp_path / "app"
    app.mkdir()
    monkeypatch.chdir(app)
    monkeypatch.delenv("GOT_REPO", raising=False)
    monkeypatch.delenv("GOT_STORE_REPO", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    expected = (tmp_path / "data" / "gitofthoughts" / "agent-server.git").resolve()
    async with server.checkpointer() as saver, server.store() as store:
        assert isinstance(store, GitStore)
        assert Path(saver.repo.gitdir).resolve() == expected
        assert Path(store.repo.gitdir).resolve() == expected
        await store.aput(("notes",), "n1", {"text": "kept in git"})
    assert "refs/got/store" in git(expected, "for-each-ref", "--format=%(refname)")
    assert list(app.iterdir()) == []


async def test_a_key_of_the_wrong_length_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from got_integrations.langgraph import server

    monkeypatch.setenv("GOT_REPO", str(tmp_path / "agent.git"))
    monkeypatch.setenv("GOT_AES_KEY", "too short")
    with pytest.raises(ConfigError, match="GOT_AES_KEY"):
        async with server.checkpointer():
            pass
    assert not (tmp_path / "agent.git").exists()


async def test_with_a_key_nothing_readable_reaches_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph.types import Command

    from got_integrations.langgraph import server

    gitdir = tmp_path / "agent.git"
    monkeypatch.setenv("GOT_REPO", str(gitdir))
    monkeypatch.setenv("GOT_AES_KEY", "0123456789abcdef0123456789abcdef")
    agent = _load("agent")
    async with server.checkpointer() as saver, server.store() as store:
        graph = agent.builder.compile(checkpointer=saver, store=store)
        config = {"configurable": {"thread_id": "t1"}}
        await graph.ainvoke({"messages": [{"role": "user", "content": "a trip to Lisbon"}]}, config)
        result = await graph.ainvoke(Command(resume="approve"), config)
        assert result["messages"][-1].content.startswith("Approved. Plan for a trip to Lisbon")
        found = await store.asearch(("plans",))
        assert [item.value["plan"] for item in found] == ["Plan for a trip to Lisbon: 1. research 2. draft 3. check"]
    refs = git(gitdir, "for-each-ref", "--format=%(refname)").split()
    assert "refs/got/store" in refs and any(r.startswith("refs/got/threads/t1/") for r in refs)
    # The plan text is in no blob and no commit message (only the namespace path, a ref-like name, is readable).
    for word in ("research", "Approved"):
        assert git(gitdir, "grep", "-l", word, *refs, check=False) == ""
        assert git(gitdir, "log", "--all", f"--grep={word}", "--format=%H") == ""


# ---------------------------------------------------------------------------- the CLI process
#: Run in a subprocess with the server's environment: the real ``langgraph`` CLI (``validate``, which carries the
#: same ``log_command`` decorator as ``dev``), with an audit hook recording every URL opened and every name looked
#: up, in any thread, and refusing them (the probe itself sends nothing); the threads are joined before the report.
AUDITED_CLI = """
import json, sys, threading
seen = []
def hook(event, args):
    if event in ("urllib.Request", "socket.getaddrinfo", "socket.connect"):
        seen.append([event, str(args[0] if event != "socket.connect" else args[1])])
        raise PermissionError("the test lets nothing leave the machine")
sys.addaudithook(hook)
from langgraph_cli.cli import cli
try:
    cli(["validate", "--config", "langgraph.json"], standalone_mode=False)
finally:
    for thread in threading.enumerate():
        if thread is not threading.main_thread():
            thread.join()
    print("AUDIT " + json.dumps(seen))
"""


def _cli_network_events(app: Path, env: dict[str, str]) -> list[list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", AUDITED_CLI], cwd=app, env=env, capture_output=True, text=True, timeout=TEST_TIMEOUT
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("AUDIT ")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    return json.loads(lines[-1][len("AUDIT ") :])


def test_the_server_cli_runs_no_analytics_thread(tmp_path: Path) -> None:
    """``langgraph dev`` with the cookbook's environment opens no URL and looks up no name (no analytics post).

    The CLI's analytics thread resolved its host while the main thread rewrote the environment (glibc's
    ``setenv`` against ``getaddrinfo``'s ``getenv``): the rare SIGSEGV of ``langgraph dev`` at start. The same
    probe without ``LANGGRAPH_CLI_NO_ANALYTICS`` shows the post, so the probe can see it."""
    pytest.importorskip("langgraph_cli")
    demo = _load("demo")
    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api", "demo.py"))
    env = demo.server_env(tmp_path / "data" / "agent.git")
    assert _cli_network_events(app, env) == []
    assert env["PYTHONFAULTHANDLER"] == "1"  # a crash of the server leaves a Python traceback in its log
    without = {k: v for k, v in env.items() if k != "LANGGRAPH_CLI_NO_ANALYTICS"}
    events = _cli_network_events(app, without)
    assert any(kind == "urllib.Request" and "/rest/v1/logs" in url for kind, url in events), events


def test_a_crashed_server_is_reported_with_its_signal_and_log(tmp_path: Path) -> None:
    """The start-up failure names the signal and the log, and carries the log's text."""
    demo = _load("demo")
    assert demo.exit_description(-11) == "signal 11 (SIGSEGV)"
    assert demo.exit_description(3) == "status 3"
    log = tmp_path / "server.log"
    log.write_text("Fatal Python error: Segmentation fault\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    proc.wait(timeout=TEST_TIMEOUT)
    with pytest.raises(RuntimeError) as failed:
        demo._wait_ready(f"http://127.0.0.1:{demo.free_port()}", proc, log, TEST_TIMEOUT)
    message = str(failed.value)
    assert "exited with -11, signal 11 (SIGSEGV)" in message and str(log) in message
    assert message.endswith("Fatal Python error: Segmentation fault\n")


# ---------------------------------------------------------------------------- the real server
#: A second graph the test adds to its copy of the example: ``hold`` waits until the gate file exists, so a
#: run can be caught in flight and rolled back.
GATED_GRAPH = """
import os
import time
from pathlib import Path

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph

GATE = Path(os.environ["GOT_TEST_GATE"])


def first(state: MessagesState) -> dict:
    return {"messages": [AIMessage(content="first step")]}


def hold(state: MessagesState) -> dict:
    while not GATE.exists():  # a sync node runs in a worker thread: sleeping blocks no event loop
        time.sleep(0.05)
    return {"messages": [AIMessage(content="released")]}


builder = StateGraph(MessagesState)
builder.add_node("first", first)
builder.add_node("hold", hold)
builder.add_edge(START, "first")
builder.add_edge("first", "hold")
builder.add_edge("hold", END)
graph = builder.compile()
"""


@contextmanager
def _example_server(tmp_path: Path, extra_env: dict[str, str] | None = None) -> Iterator[tuple[str, Path, Path, Path]]:
    """``langgraph dev`` serving a copy of the example (the cookbook's ``serve``), the repository outside it.

    Yields ``(url, gitdir, log, gate)``; ``extra_env`` goes to the server (e.g. ``GOT_AES_KEY``). A second
    call in the same ``tmp_path`` restarts the server on the same folder and repository."""
    if not Path(sys.executable).with_name("langgraph").exists():
        pytest.skip("the langgraph CLI is not installed (extra 'server')")
    app = tmp_path / "app"
    if not app.exists():
        shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api", "demo.py"))
        (app / "gated.py").write_text(GATED_GRAPH, encoding="utf-8")
        config = json.loads((app / "langgraph.json").read_text(encoding="utf-8"))
        config["graphs"]["gated"] = "./gated.py:graph"
        (app / "langgraph.json").write_text(json.dumps(config), encoding="utf-8")
    gitdir = tmp_path / "data" / "agent.git"
    log = tmp_path / "server.log"
    gate = tmp_path / "gate"
    env = {"GOT_TEST_GATE": str(gate), **(extra_env or {})}
    with _load("demo").serve(app, gitdir, log, timeout=TEST_TIMEOUT, extra_env=env) as url:
        try:
            yield url, gitdir, log, gate
        finally:
            gate.write_text("open")  # a failed test must not leave a node holding the server's shutdown


@pytest.fixture
def agent_server(tmp_path: Path) -> Iterator[tuple[str, Path, Path, Path]]:
    """``langgraph dev`` serving a copy of the example, no key: what it saves is readable with ``git``."""
    with _example_server(tmp_path) as served:
        yield served


@pytest.mark.slow
async def test_agent_server_keeps_its_threads_in_git(agent_server: tuple[str, Path, Path, Path]) -> None:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph_sdk import get_client

    from got_integrations.langgraph import GitCheckpointSaver

    url, gitdir, log, gate = agent_server
    client = get_client(url=url, timeout=TEST_TIMEOUT)

    # The server's start-up capability check found every extended capability of the saver.
    started = log.read_text(errors="replace")
    assert "Using custom checkpointer: GitCheckpointSaver" in started
    assert "Using custom store" in started and "GitStore" in started
    assert "Custom checkpointer missing" not in started
    # (the server warns for each of these the saver leaves to BaseCheckpointSaver; it overrides them all)
    extended = ("adelete_thread", "adelete_for_runs", "acopy_thread", "aprune")
    assert [m for m in extended if getattr(GitCheckpointSaver, m) is getattr(BaseCheckpointSaver, m)] == []

    # A run stops at the review interrupt; resuming it finishes the graph.
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "agent", input={"messages": [{"role": "user", "content": "a trip to Lisbon"}]})
    paused = await client.threads.get_state(tid)
    assert paused["next"] == ["review"]
    assert [i["value"]["plan"] for i in paused["interrupts"]] == [
        "Plan for a trip to Lisbon: 1. research 2. draft 3. check"
    ]
    done = await client.runs.wait(tid, "agent", command={"resume": "approve"})
    assert done["messages"][-1]["content"] == "Approved. Plan for a trip to Lisbon: 1. research 2. draft 3. check"

    # Every checkpoint of the history is a commit on the thread's head ref (git reads the trailers).
    history = await client.threads.get_history(tid, limit=100)
    ids = [state["checkpoint"]["checkpoint_id"] for state in history]
    assert [state["next"] for state in history] == [[], ["finish"], ["review"], ["draft"], ["__start__"]]
    head = f"refs/got/threads/{encode_component(tid)}/root/head"
    assert head in _thread_refs(gitdir, tid)
    commits = _checkpoint_commits(gitdir, head)
    assert list(commits) == ids  # newest first, one commit per checkpoint, nothing else on the line
    assert json.loads(git(gitdir, "show", f"{commits[ids[0]]}:checkpoint.json"))["checkpoint"]["id"] == ids[0]

    # update_state from an old checkpoint (the paused one) forks: the new checkpoint is a commit whose parent
    # is that checkpoint's commit; it is the latest, so it takes `head`, and the line it left keeps a fork ref.
    old = next(state for state in history if state["next"] == ["review"])
    forked = await client.threads.update_state(
        tid,
        {"messages": [{"role": "user", "content": "also a day in Sintra"}]},
        checkpoint_id=old["checkpoint"]["checkpoint_id"],
    )
    new_id = forked["checkpoint"]["checkpoint_id"]
    head_commits = _checkpoint_commits(gitdir, head)
    assert next(iter(head_commits)) == new_id
    assert git(gitdir, "rev-parse", f"{head_commits[new_id]}^").strip() == commits[old["checkpoint"]["checkpoint_id"]]
    forks = [r for r in _thread_refs(gitdir, tid) if "/root/forks/" in r]
    assert len(forks) == 1
    assert _checkpoint_commits(gitdir, forks[0]) == commits  # the finished line is kept whole
    latest = await client.threads.get_state(tid)
    assert latest["checkpoint"]["checkpoint_id"] == new_id and latest["next"] == ["review"]
    assert latest["values"]["messages"][-1]["content"] == "also a day in Sintra"

    # Copy the thread: the copy's refs hold the same checkpoints.
    copy = await client.threads.copy(tid)
    cid = copy["thread_id"]
    assert cid != tid
    copy_head = f"refs/got/threads/{encode_component(cid)}/root/head"
    assert set(_checkpoint_commits(gitdir, copy_head)) == set(head_commits)
    copied_state = await client.threads.get_state(cid)
    assert copied_state["values"] == latest["values"]

    # Delete the copy: its refs are gone, the original's stay.
    await client.threads.delete(cid)
    assert _thread_refs(gitdir, cid) == []
    assert head in _thread_refs(gitdir, tid)

    # The store: the graph's own write and one through the API, both commits on refs/got/store.
    await client.store.put_item(["users", "alice"], "prefs", {"language": "pt"})
    found = await client.store.search_items(["users"], filter={"language": "pt"})
    assert [(tuple(i["namespace"]), i["key"], i["value"]) for i in found["items"]] == [
        (("users", "alice"), "prefs", {"language": "pt"})
    ]
    plans = await client.store.search_items(["plans"])
    assert [i["value"]["plan"] for i in plans["items"]] == ["Plan for a trip to Lisbon: 1. research 2. draft 3. check"]
    files = git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    assert item_path(("users", "alice"), "prefs") in files
    prefs = json.loads(git(gitdir, "show", "refs/got/store:" + item_path(("users", "alice"), "prefs")))
    assert "pt" in json.dumps(prefs)
    assert int(git(gitdir, "rev-list", "--count", "refs/got/store").strip()) >= 2

    # Prune with "keep_latest": the in-memory runtime of `langgraph dev` refuses it itself, before any
    # checkpointer is asked (langgraph_runtime_inmem/ops.py, Threads.prune: HTTP 422); nothing is touched.
    # Our saver does it on the same repository while the server runs; the server reads the pruned thread.
    before = {r: git(gitdir, "rev-parse", r).strip() for r in _thread_refs(gitdir, tid)}
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.threads.prune([tid], strategy="keep_latest")
    assert refused.value.response.status_code == 422
    assert "keep_latest strategy is not supported in in-memory runtime" in refused.value.response.text
    assert {r: git(gitdir, "rev-parse", r).strip() for r in _thread_refs(gitdir, tid)} == before
    own = GitCheckpointSaver(str(gitdir))
    try:
        await own.aprune([tid], strategy="keep_latest")
    finally:
        own.close()
    assert list(_checkpoint_commits(gitdir, head)) == [new_id]  # only the latest checkpoint is left on head
    assert git(gitdir, "rev-list", "--count", head).strip() == "1"
    kept = await client.threads.get_state(tid)
    assert kept["checkpoint"]["checkpoint_id"] == new_id and kept["values"] == latest["values"]
    assert [s["checkpoint"]["checkpoint_id"] for s in await client.threads.get_history(tid, limit=100)] == [new_id]

    # Prune with "delete" goes through the saver (Threads.delete -> adelete_thread): the thread's refs go,
    # the store stays.
    pruned = await client.threads.prune([tid])
    assert pruned["pruned_count"] == 1
    assert _thread_refs(gitdir, tid) == []
    assert (
        item_path(("users", "alice"), "prefs") in git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    )

    # A run rolled back while in flight (multitask_strategy="rollback") leaves no commit: the server calls the
    # saver's adelete_for_runs, which drops the run's checkpoints from the thread's refs.
    gated = (await client.threads.create())["thread_id"]
    held = await client.runs.create(gated, "gated", input={"messages": [{"role": "user", "content": "go"}]})
    deadline = time.monotonic() + TEST_TIMEOUT
    while (await client.threads.get_state(gated))["next"] != ["hold"]:
        assert time.monotonic() < deadline, "the gated run never reached its hold step"
        await asyncio.sleep(0.2)
    assert held["run_id"] in _run_trailers(gitdir, gated)  # its first checkpoints are commits
    second = await client.runs.create(
        gated, "gated", input={"messages": [{"role": "user", "content": "again"}]}, multitask_strategy="rollback"
    )
    gate.write_text("open")  # let the held node finish (its result is discarded: the run was rolled back)
    await client.runs.join(gated, second["run_id"])
    runs = _run_trailers(gitdir, gated)
    assert held["run_id"] not in runs and second["run_id"] in runs
    final = await client.threads.get_state(gated)
    assert [m["content"] for m in final["values"]["messages"]] == ["again", "first step", "released"]

    clean, report = fsck_clean(gitdir)
    assert clean, report
    # The server never reloaded: the repository sits outside the directory it watches.
    assert log.read_text(errors="replace").count("Application started up") == 1


@pytest.mark.slow
async def test_agent_server_with_a_key_keeps_nothing_readable_at_rest_and_reads_it_back(tmp_path: Path) -> None:
    """``GOT_AES_KEY`` set for the server: no object in the repository holds a message, answer or store
    value in the clear (``git cat-file`` over every object), and the server reads all of it back."""
    from langgraph_sdk import get_client

    plan = "Sail to Tromsoe, then hike the Lyngen Alps"  # the reviewer's correction: messages, answer, store
    note = "also pack the crampons"  # a message sent through update_state
    pref = "Kvæfjord cake"  # a store value sent through the API
    with _example_server(tmp_path, {"GOT_AES_KEY": "0123456789abcdef0123456789abcdef"}) as (url, gitdir, log, _):
        client = get_client(url=url, timeout=TEST_TIMEOUT)
        tid = (await client.threads.create())["thread_id"]
        await client.runs.wait(tid, "agent", input={"messages": [{"role": "user", "content": "a trip"}]})
        paused = await client.threads.get_state(tid)
        assert paused["next"] == ["review"] and "research" in paused["interrupts"][0]["value"]["plan"]
        done = await client.runs.wait(tid, "agent", command={"resume": plan})
        assert done["messages"][-1]["content"] == f"Approved. {plan}"
        await client.threads.update_state(tid, {"messages": [{"role": "user", "content": note}]})
        await client.store.put_item(["users", "alice"], "prefs", {"dessert": pref})

        # Read back through the server: state, history, store get / search (a value filter decrypts).
        state = await client.threads.get_state(tid)
        contents = [m["content"] for m in state["values"]["messages"]]
        assert contents[-3:] == [f"Use this plan instead: {plan}", f"Approved. {plan}", note]
        history = await client.threads.get_history(tid, limit=100)
        ids = [h["checkpoint"]["checkpoint_id"] for h in history]
        head = f"refs/got/threads/{encode_component(tid)}/root/head"
        assert list(_checkpoint_commits(gitdir, head)) == ids  # still one commit per checkpoint
        assert [i["value"]["plan"] for i in (await client.store.search_items(["plans"]))["items"]] == [plan]
        assert (await client.store.get_item(["users", "alice"], "prefs"))["value"] == {"dessert": pref}
        found = await client.store.search_items(["users"], filter={"dessert": pref})
        assert [i["key"] for i in found["items"]] == ["prefs"]
        assert log.read_text(errors="replace").count("Application started up") == 1

    # At rest: every object of the repository, loose or packed, as git prints it.
    dump = subprocess.run(
        ["git", f"--git-dir={gitdir}", "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
        timeout=TEST_TIMEOUT,
    ).stdout
    assert b"refs/got/store" in git(gitdir, "for-each-ref").encode() and len(dump) > 0
    for text in (plan, note, pref, "Approved", "research", "Tromsoe", "crampons"):
        assert text.encode() not in dump, text
    clean, report = fsck_clean(gitdir)
    assert clean, report

    # A fresh server process on the same repository and key decrypts what the first one wrote.
    with _example_server(tmp_path, {"GOT_AES_KEY": "0123456789abcdef0123456789abcdef"}) as (url, _, _, _):
        client = get_client(url=url, timeout=TEST_TIMEOUT)
        again = await client.threads.get_state(tid)
        assert again["checkpoint"]["checkpoint_id"] == ids[0] and again["values"] == state["values"]
        assert (await client.store.get_item(["users", "alice"], "prefs"))["value"] == {"dessert": pref}


@pytest.mark.slow
def test_a_repository_inside_the_watched_folder_stops_the_server_with_a_clear_error(tmp_path: Path) -> None:
    """No reload loop: the server refuses to start, says why and what to do, and writes nothing there."""
    if not Path(sys.executable).with_name("langgraph").exists():
        pytest.skip("the langgraph CLI is not installed (extra 'server')")
    demo = _load("demo")
    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api", "demo.py"))
    log = tmp_path / "server.log"
    proc = demo.start(app, Path("agent.git"), log, demo.free_port())  # relative: inside the folder it watches
    try:
        deadline = time.monotonic() + TEST_TIMEOUT
        while "Application startup failed" not in log.read_text(errors="replace"):
            assert proc.poll() is None or "Application startup failed" in log.read_text(errors="replace"), (
                log.read_text(errors="replace")
            )
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.5)
    finally:
        demo.stop(proc)
    text = log.read_text(errors="replace")
    assert "ConfigError" in text and "GOT_ALLOW_REPO_IN_WATCHED_DIR=1" in text
    assert text.count("Application startup failed") == 1  # it did not restart over and over
    assert not (app / "agent.git").exists()


async def test_a_store_ttl_setting_runs_a_sweeper_while_the_factory_is_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from got_integrations.langgraph import server

    gitdir = tmp_path / "agent.git"
    monkeypatch.setenv("GOT_REPO", str(gitdir))
    monkeypatch.setenv("GOT_STORE_TTL_MINUTES", "0.02")  # the server runs no sweeper for a custom store: ours does
    async with server.store() as store:
        assert store.ttl_config == {"default_ttl": 0.02, "refresh_on_read": True, "sweep_interval_minutes": 0.02}
        await store.aput(("notes",), "brief", {"text": "expires"})
        assert item_path(("notes",), "brief") in git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split()
        deadline = time.monotonic() + TEST_TIMEOUT
        while item_path(("notes",), "brief") in git(gitdir, "ls-tree", "-r", "--name-only", "refs/got/store").split():
            assert time.monotonic() < deadline, "the expired item was never swept"
            await asyncio.sleep(0.5)
    monkeypatch.setenv("GOT_STORE_TTL_MINUTES", "soon")
    with pytest.raises(ConfigError, match="GOT_STORE_TTL_MINUTES"):
        async with server.store():
            pass
