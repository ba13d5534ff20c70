"""A running graph's ``put_writes`` hands its writes to the next ``put`` (one ref transaction a
super-step), and nothing LangGraph relies on is lost: interrupts and errors are stored
before ``put_writes`` returns, queued writes before any read, on close, at exit and within
``HAND_OVER_S``; a process killed mid-run resumes without re-running a stored task.
"""

from __future__ import annotations

import asyncio
import operator
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from gitcli import fsck_clean, git
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from got_integrations.langgraph import GitCheckpointSaver

TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))
RUNNING = "__pregel_runtime"  # the key LangGraph's loop puts in every config it hands a saver


class Counted(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    n: int


def loop_graph(steps: int) -> StateGraph:
    """One node that runs ``steps`` times in a row (a super-step each)."""

    def work(state: Counted) -> dict[str, Any]:
        n = state.get("n", 0) + 1
        return {"log": [f"step {n}"], "n": n}

    builder = StateGraph(Counted)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", lambda s: END if s["n"] >= steps else "work")
    return builder


def running(thread: str, checkpoint_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": checkpoint_id, RUNNING: 1}}


def first_checkpoint(saver: GitCheckpointSaver, thread: str) -> str:
    checkpoint = {
        "v": 4,
        "id": "1f0aaaaa-0000-6000-8000-000000000001",
        "ts": "2026-12-01T00:00:00+00:00",
        "channel_values": {"n": 1},
        "channel_versions": {"n": "1"},
        "versions_seen": {},
        "updated_channels": ["n"],
    }
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, checkpoint, {"source": "input", "step": -1}, {"n": "1"})["configurable"]["checkpoint_id"]


# ---------------------------------------------------------------------------- one transaction a step
def test_a_graph_step_publishes_its_writes_with_the_next_checkpoint(tmp_path, monkeypatch):
    from got_integrations.langgraph import _pending

    monkeypatch.setattr(_pending, "HAND_OVER_S", TIMEOUT)  # a busy machine's pause must not fire the timer
    saver = GitCheckpointSaver.from_path(tmp_path / "g.git")
    single, multi = [], []
    repo = saver.repo
    plain, several = repo.update_ref, repo.update_refs

    def update_ref(ref, *args, **kwargs):  # a spy on our own primitive: which refs move alone
        single.append(ref)
        return plain(ref, *args, **kwargs)

    def update_refs(refs, *args, **kwargs):
        multi.append(list(refs))
        return several(refs, *args, **kwargs)

    repo.update_ref, repo.update_refs = update_ref, update_refs
    graph = loop_graph(6).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"n": 0}, config, durability="sync")
    assert not [r for r in single if "/pending/" in r], single  # no pending ref moved on its own
    # a step's writes ride in the next checkpoint's tree: one ref a super-step, no pending/ refs at all
    assert len(multi) >= 6 and all(refs == ["refs/got/threads/t/root/head"] for refs in multi), multi
    assert not git(tmp_path / "g.git", "for-each-ref", "refs/got/threads/t/root/pending/")
    carried = git(tmp_path / "g.git", "ls-tree", "-r", "--name-only", "refs/got/threads/t/root/head~1")
    assert "parent~writes/" in carried, carried  # stock git sees the previous step's writes there
    # what a fresh saver reads from git is what InMemorySaver holds, writes included
    memory = InMemorySaver()
    loop_graph(6).compile(checkpointer=memory).invoke({"n": 0}, config, durability="sync")
    fresh = GitCheckpointSaver.from_path(tmp_path / "g.git")

    def history(s: Any) -> list[tuple[Any, ...]]:
        return [
            (t.checkpoint["channel_values"], sorted((c, repr(v)) for _, c, v in t.pending_writes or []))
            for t in s.list(config)
        ]

    assert history(fresh) == history(memory)
    ok, out = fsck_clean(tmp_path / "g.git")
    assert ok, out


def test_a_graph_step_reads_and_moves_only_its_own_refs(tmp_path, monkeypatch):
    from got_core.storage.git import GitRepo
    from got_integrations.langgraph import _pending

    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    reads: list[str] = []
    moves: list[list[str]] = []
    read, cas = GitRepo.ref_target, GitRepo.cas_refs

    def ref_target(self, name):  # a spy on our own git handle: every ref read, passed on
        reads.append(name)
        return read(self, name)

    def cas_refs(self, updates):  # and every ref transaction
        moves.append(sorted(updates))
        return cas(self, updates)

    monkeypatch.setattr(GitRepo, "ref_target", ref_target)
    monkeypatch.setattr(GitRepo, "cas_refs", cas_refs)
    monkeypatch.setattr(_pending, "HAND_OVER_S", TIMEOUT)  # a busy machine's pause must not fire the timer
    steps = 8
    config = {"configurable": {"thread_id": "t"}}
    loop_graph(steps).compile(checkpointer=saver).invoke({"n": 0}, config, durability="sync")
    run = list(reads)
    assert saver.get_tuple(config).checkpoint["channel_values"]["n"] == steps  # a read of what it wrote
    saver.close()
    monkeypatch.undo()
    checkpoints = len(list(GitCheckpointSaver.from_path(tmp_path / "r.git").list(config)))
    # one ref transaction a super-step, and one more for the last step's writes (stored on close)
    assert len(moves) <= checkpoints + 1, moves
    # the ref of an earlier saver's writes is never read for checkpoints this saver wrote itself,
    # and a step's writes ride in the next checkpoint: no pending/ ref is read or moved in the run
    assert not [name for name in reads if name.endswith("/writes")], reads
    assert not [name for name in run if "/pending/" in name], run
    assert all(refs == ["refs/got/threads/t/root/head"] for refs in moves), moves
    assert reads, "the spy saw no ref reads"


def test_outside_a_graph_put_writes_is_stored_when_it_returns(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "o.git")
    cid = first_checkpoint(saver, "t")
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cid}}
    saver.put_writes(config, [("log", ["x"])], "task-1")
    other = GitCheckpointSaver.from_path(tmp_path / "o.git")  # reads git only
    assert [(t, c) for t, c, _ in other.get_tuple(config).pending_writes] == [("task-1", "log")]


def test_hand_over_writes_false_stores_a_running_graphs_write_before_it_returns(tmp_path):
    import threading

    saver = GitCheckpointSaver.from_path(tmp_path / "strict.git", hand_over_writes=False)
    cid = first_checkpoint(saver, "t")
    moved: list[tuple[int, str]] = []  # (thread, ref) of every ref move, a spy on our own primitives
    plain, several = saver.repo.update_ref, saver.repo.update_refs

    def update_ref(ref, *args, **kwargs):
        moved.append((threading.get_ident(), ref))
        return plain(ref, *args, **kwargs)

    def update_refs(refs, *args, **kwargs):
        refs = list(refs)
        moved.extend((threading.get_ident(), ref) for ref in refs)
        return several(refs, *args, **kwargs)

    saver.repo.update_ref, saver.repo.update_refs = update_ref, update_refs
    saver.put_writes(running("t", cid), [("log", ["x"])], "task-1")
    here = [ref for thread, ref in moved if thread == threading.get_ident()]
    assert any(f"/pending/{cid}" in ref for ref in here), moved  # stored by the call itself, not later
    other = GitCheckpointSaver.from_path(tmp_path / "strict.git")  # reads git only
    assert [(t, c) for t, c, _ in other.get_tuple(running("t", cid)).pending_writes] == [("task-1", "log")]


# ---------------------------------------------------------------------------- what stores queued writes
def test_queued_writes_are_read_by_this_saver_and_stored_on_close(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "q.git")
    cid = first_checkpoint(saver, "t")
    saver.put_writes(running("t", cid), [("log", ["a"])], "task-1")
    assert [(t, c) for t, c, _ in saver.get_tuple(running("t", cid)).pending_writes] == [("task-1", "log")]
    saver.put_writes(running("t", cid), [("log", ["b"])], "task-2")
    saver.close()
    other = GitCheckpointSaver.from_path(tmp_path / "q.git")
    assert sorted(t for t, _, _ in other.get_tuple(running("t", cid)).pending_writes) == ["task-1", "task-2"]


def test_queued_writes_are_stored_in_the_background_when_no_checkpoint_comes(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "b.git")
    cid = first_checkpoint(saver, "t")
    saver.put_writes(running("t", cid), [("log", ["a"])], "task-1")
    deadline = time.monotonic() + TIMEOUT
    refs = ""
    while time.monotonic() < deadline:  # the real git binary, another process: only what is on disk
        refs = git(tmp_path / "b.git", "for-each-ref", "--format=%(refname)", "refs/got/threads/")
        if "/pending/" in refs:
            break
        time.sleep(0.02)
    assert "/pending/" in refs
    saver.close()


def test_the_background_thread_waits_for_the_next_steps_writes_instead_of_starting_again(tmp_path, monkeypatch):
    from got_integrations.langgraph import _pending

    monkeypatch.setattr(_pending, "LINGER_S", TIMEOUT, raising=False)  # longer than any pause of a busy machine
    saver = GitCheckpointSaver.from_path(tmp_path / "l.git")
    cid = first_checkpoint(saver, "t")
    ns = saver._ns("t", "")
    threads = set()
    deadline = time.monotonic() + TIMEOUT

    def wait_until(what, predicate):
        while not predicate():
            assert time.monotonic() < deadline, f"gave up waiting until {what}"
            time.sleep(0.001)

    for n in range(3):  # a step's writes, no checkpoint after them: the timer stores them
        saver.put_writes(running("t", cid), [("log", [f"w{n}"])], f"task-{n}")
        flusher = saver._flusher
        threads.add(flusher._thread)
        wait_until("the writes are stored", lambda n=n: ns.pending_tips.get(cid) and not ns.pending)
        wait_until("the timer found nothing left", lambda: not flusher.waiting())
        wait_until("the thread ended or waits", lambda: flusher._thread is None or flusher._idle)
    assert len(threads) == 1, threads  # one thread served every step
    other = GitCheckpointSaver.from_path(tmp_path / "l.git")
    assert sorted(t for t, _, _ in other.get_tuple(running("t", cid)).pending_writes) == ["task-0", "task-1", "task-2"]
    saver.close()


def test_an_interrupt_is_stored_with_the_queue_before_put_writes_returns(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "i.git")
    cid = first_checkpoint(saver, "t")
    saver.put_writes(running("t", cid), [("log", ["a"])], "task-1")  # queued
    saver.put_writes(running("t", cid), [("__interrupt__", ["stop"])], "task-2")  # stored with the queue
    saver.put_writes(running("t", cid), [("log", ["c"])], "task-3")  # after an interrupt: stored at once
    other = GitCheckpointSaver.from_path(tmp_path / "i.git")
    got = sorted((t, c) for t, c, _ in other.get_tuple(running("t", cid)).pending_writes)
    assert got == [("task-1", "log"), ("task-2", "__interrupt__"), ("task-3", "log")]
    saver.close()


def test_async_put_writes_inside_a_graph_is_read_back(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "a.git")
    cid = first_checkpoint(saver, "t")

    async def main() -> list[str]:
        await saver.aput_writes(running("t", cid), [("log", ["a"])], "task-1")
        found = await saver.aget_tuple(running("t", cid))
        return [t for t, _, _ in found.pending_writes]

    assert asyncio.run(main()) == ["task-1"]
    saver.close()


def test_async_graph_matches_in_memory_saver(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "ag.git")
    config = {"configurable": {"thread_id": "t"}}

    async def run(s: Any) -> list[Any]:
        graph = loop_graph(5).compile(checkpointer=s)
        await graph.ainvoke({"n": 0}, config)
        return [
            (t.checkpoint["channel_values"], sorted((c, repr(v)) for _, c, v in t.pending_writes or []))
            async for t in s.alist(config)
        ]

    assert asyncio.run(run(saver)) == asyncio.run(run(InMemorySaver()))
    saver.close()


# ---------------------------------------------------------------------------- interrupts across processes
INTERRUPTED = textwrap.dedent(
    """
    import operator, sys
    from pathlib import Path
    from typing import Annotated, TypedDict
    from langgraph.graph import START, StateGraph
    from langgraph.types import Command, interrupt
    from got_integrations.langgraph import GitCheckpointSaver

    class S(TypedDict, total=False):
        log: Annotated[list[str], operator.add]

    runs = Path(sys.argv[2])

    def fast(state):
        with runs.open("a") as f:
            f.write("fast\\n")
        return {"log": ["fast"]}

    def ask(state):
        return {"log": ["answer " + interrupt("question?")]}

    b = StateGraph(S)
    b.add_node("fast", fast)
    b.add_node("ask", ask)
    b.add_edge(START, "fast")
    b.add_edge(START, "ask")
    graph = b.compile(checkpointer=GitCheckpointSaver.from_path(sys.argv[1]))
    config = {"configurable": {"thread_id": "t"}}
    if sys.argv[3] == "start":
        out = graph.invoke({"log": []}, config)
        print("interrupted" if "__interrupt__" in out else "done")
    else:
        print(sorted(graph.invoke(Command(resume="yes"), config)["log"]))
    import os
    os._exit(0)  # no close, no atexit: only what put_writes stored before it returned counts
    """
)


def test_an_interrupted_run_resumes_in_another_process_without_rerunning_a_task(tmp_path):
    script, runs = tmp_path / "run.py", tmp_path / "runs.txt"
    script.write_text(INTERRUPTED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(mode: str) -> str:
        proc = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "x.git"), str(runs), mode],
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert run("start") == "interrupted"
    assert run("resume") == "['answer yes', 'fast']"
    assert runs.read_text() == "fast\n"  # fast's writes were stored: it did not run again


# ---------------------------------------------------------------------------- killed mid-run
KILLED = textwrap.dedent(
    """
    import operator, os, signal, subprocess, sys, time
    from pathlib import Path
    from typing import Annotated, TypedDict
    from langgraph.graph import END, START, StateGraph
    from got_integrations.langgraph import GitCheckpointSaver

    class S(TypedDict, total=False):
        log: Annotated[list[str], operator.add]
        n: int

    gitdir, runs, mode, timeout = sys.argv[1], Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])

    def pending_refs():
        return subprocess.run(["git", "--git-dir=" + gitdir, "for-each-ref", "--format=%(refname)",
                               "refs/got/threads/"], capture_output=True, text=True).stdout.count("/pending/")

    def step(state):
        n = state.get("n", 0) + 1
        if n == 5 and mode == "kill-step":
            os.kill(os.getpid(), signal.SIGKILL)  # between super-steps: some writes only queued
        return {"log": ["step %d" % n], "n": n}

    def fast(state):
        with runs.open("a") as f:
            f.write("fast\\n")
        return {"log": ["fast"]}

    def slow(state):
        if mode == "kill-parallel":
            # the writes of the steps before rode in the checkpoints after them: the only pending
            # ref is this step's, which fast's writes create (slow's would be the ones that come after)
            deadline = time.monotonic() + timeout
            while pending_refs() < 1 and time.monotonic() < deadline:
                time.sleep(0.01)  # until fast's writes are on disk (the background store)
            os.kill(os.getpid(), signal.SIGKILL)
        return {"log": ["slow"]}

    b = StateGraph(S)
    b.add_node("step", step)
    b.add_node("fast", fast)
    b.add_node("slow", slow)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: ["fast", "slow"] if s["n"] >= 8 else "step")
    b.add_edge("fast", END)
    b.add_edge("slow", END)
    graph = b.compile(checkpointer=GitCheckpointSaver.from_path(gitdir))
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    out = graph.invoke({"n": 0} if mode != "resume" else None, config, durability="sync")
    print(out["n"], sorted(out["log"]))
    """
)


@pytest.mark.parametrize("kill", ["kill-step", "kill-parallel"])
def test_a_process_killed_mid_run_resumes_with_every_stored_write(tmp_path, kill):
    script, runs, gitdir = tmp_path / "run.py", tmp_path / "runs.txt", tmp_path / "k.git"
    script.write_text(KILLED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(mode: str, where: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), str(where), str(runs), mode, str(TIMEOUT)],
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT,
        )

    killed = run(kill, gitdir)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = run("resume", gitdir)
    assert resumed.returncode == 0, resumed.stderr
    expected = "8 " + str(sorted([f"step {n}" for n in range(1, 9)] + ["fast", "slow"]))
    assert resumed.stdout.strip() == expected  # every step once: nothing lost, nothing applied twice
    assert runs.read_text() == "fast\n"  # a task whose writes were stored does not run again
    ok, out = fsck_clean(gitdir)
    assert ok, out


def test_interrupt_inside_graph_with_command_resume(tmp_path):
    """An interrupt in a loop graph: the run stops, get_state shows it at once, resume finishes."""

    def ask(state: Counted) -> dict[str, Any]:
        n = state.get("n", 0) + 1
        answer = interrupt(f"go on at {n}?") if n == 3 else "auto"
        return {"log": [f"{n}:{answer}"], "n": n}

    builder = StateGraph(Counted)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_conditional_edges("ask", lambda s: END if s["n"] >= 4 else "ask")
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"n": 0}, config)
    other = builder.compile(checkpointer=GitCheckpointSaver.from_path(tmp_path / "r.git"))
    assert [i.value for i in other.get_state(config).interrupts] == ["go on at 3?"]
    assert other.invoke(Command(resume="yes"), config)["log"] == ["1:auto", "2:auto", "3:yes", "4:auto"]


def test_async_read_of_a_cached_checkpoint_sees_another_writers_newer_one(tmp_path):
    """A saver that holds a thread's checkpoints in its caches still reads the refs: another writer's newer one wins."""
    mine = GitCheckpointSaver.from_path(tmp_path / "c.git")
    theirs = GitCheckpointSaver.from_path(tmp_path / "c.git")
    config = {"configurable": {"thread_id": "t"}}
    mine_graph, their_graph = loop_graph(2).compile(checkpointer=mine), loop_graph(3).compile(checkpointer=theirs)

    async def main() -> tuple[Any, Any]:
        await mine_graph.ainvoke({"n": 0}, config)
        before = await mine.aget_tuple(config)
        await their_graph.ainvoke({"n": 0}, config)  # another saver moves head past ours
        return before, await mine.aget_tuple(config)

    before, after = asyncio.run(main())
    assert before.checkpoint["channel_values"]["n"] == 2
    assert after.checkpoint["channel_values"]["n"] == 3
    assert after.checkpoint == theirs.get_tuple(config).checkpoint


def test_queued_writes_are_stored_when_the_interpreter_exits(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        from got_integrations.langgraph import GitCheckpointSaver
        saver = GitCheckpointSaver.from_path(sys.argv[1])
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": sys.argv[2],
                                   "__pregel_runtime": 1}}
        saver.put_writes(config, [("log", ["a"])], "task-1")  # queued; the process ends right away
        """
    )
    saver = GitCheckpointSaver.from_path(tmp_path / "e.git")
    cid = first_checkpoint(saver, "t")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "e.git"), cid],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    found = GitCheckpointSaver.from_path(tmp_path / "e.git").get_tuple(running("t", cid))
    assert [(t, c) for t, c, _ in found.pending_writes] == [("task-1", "log")]
