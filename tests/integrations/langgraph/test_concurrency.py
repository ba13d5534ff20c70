"""Concurrency: many graph threads on one saver from a thread pool, and two processes
sharing one repository (checkpoints, pending writes and store items). Nothing may be
lost and ``git fsck`` must stay clean."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gitcli import fsck_clean
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from timeouts import TEST_TIMEOUT

from got_integrations.langgraph import GitCheckpointSaver, GitStore
from got_integrations.langgraph.cli import build_demo_graph

QUESTIONS = ["What is 1+2?", "What is 3*4?", "What is 2**8?"]


def _run_thread(graph, thread_id: str) -> list[tuple[str, object]]:
    config = {"configurable": {"thread_id": thread_id}}
    for q in QUESTIONS:
        graph.invoke({"messages": [HumanMessage(q)]}, config)
    return [(m.type, m.content) for m in graph.get_state(config).values["messages"]]


def test_many_threads_in_parallel_on_one_saver(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "pool.git")
    graph = build_demo_graph(saver)
    reference = _run_thread(build_demo_graph(InMemorySaver()), "ref")
    thread_ids = [f"t{i}" for i in range(16)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(zip(thread_ids, pool.map(lambda t: _run_thread(graph, t), thread_ids)))
    assert all(messages == reference for messages in results.values())
    assert saver.threads() == sorted(thread_ids)
    fresh = GitCheckpointSaver.from_path(tmp_path / "pool.git")  # what is on disk, not in caches
    for thread_id in thread_ids:
        history = list(fresh.list({"configurable": {"thread_id": thread_id}}))
        assert len(history) == 5 * len(QUESTIONS)
        assert sum(len(t.pending_writes) for t in history) > 0
    ok, out = fsck_clean(tmp_path / "pool.git")
    assert ok, out


def test_concurrent_writes_to_one_checkpoint_are_all_kept(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "writes.git")
    config = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
    checkpoint = {
        "v": 4,
        "id": "1f0a",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
        "updated_channels": None,
    }
    stored = saver.put(config, checkpoint, {"source": "loop", "step": 0}, {})
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(lambda i: saver.put_writes(stored, [("out", i), ("log", f"task {i}")], f"task-{i:02d}"), range(24))
        )
    writes = GitCheckpointSaver.from_path(tmp_path / "writes.git").get_tuple(stored).pending_writes
    assert sorted(w for w in writes if w[1] == "out") == sorted((f"task-{i:02d}", "out", i) for i in range(24))
    assert len(writes) == 48


_WORKER = textwrap.dedent("""
    import sys
    from langchain_core.messages import HumanMessage
    from got_integrations.langgraph import GitCheckpointSaver, GitStore
    from got_integrations.langgraph.cli import build_demo_graph

    repo, name = sys.argv[1], sys.argv[2]
    saver = GitCheckpointSaver.from_path(repo)
    graph = build_demo_graph(saver)
    store = GitStore.from_path(repo)
    shared = {"configurable": {"thread_id": "shared", "checkpoint_ns": "", "checkpoint_id": sys.argv[3]}}
    for i in range(4):
        config = {"configurable": {"thread_id": f"{name}-{i}"}}
        graph.invoke({"messages": [HumanMessage(f"What is {i}+1?")]}, config)
        for j in range(10):
            store.put(("items", name), f"{i}-{j}", {"by": name, "i": i, "j": j})
            saver.put_writes(shared, [("note", f"{name} {i} {j}")], f"{name}-{i}-{j}")
    print("done", name)
""")


def test_two_processes_share_one_repository(tmp_path):
    repo = tmp_path / "shared.git"
    saver = GitCheckpointSaver.from_path(repo)
    checkpoint = {
        "v": 4,
        "id": "1f0b",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
        "updated_channels": None,
    }
    saver.put(
        {"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}, checkpoint, {"source": "input", "step": -1}, {}
    )
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(repo), name, "1f0b"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(Path(__file__).parent),
        )
        for name in ("alpha", "beta")
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=TEST_TIMEOUT)
        assert proc.returncode == 0, err.decode()[-3000:]
        assert b"done" in out
    fresh = GitCheckpointSaver.from_path(repo)
    threads = fresh.threads()
    assert threads == sorted(["shared"] + [f"{n}-{i}" for n in ("alpha", "beta") for i in range(4)])
    for thread in threads:
        if thread != "shared":
            state = fresh.get_tuple({"configurable": {"thread_id": thread}})
            assert state.checkpoint["channel_values"]["messages"][-1].content.startswith("The answer is")
            assert len(list(fresh.list({"configurable": {"thread_id": thread}}))) == 5
    notes = fresh.get_tuple({"configurable": {"thread_id": "shared", "checkpoint_ns": ""}}).pending_writes
    assert len(notes) == 80
    store = GitStore.from_path(repo)
    for name in ("alpha", "beta"):
        assert len(store.search(("items", name), limit=100)) == 40
    ok, out = fsck_clean(repo)
    assert ok, out
