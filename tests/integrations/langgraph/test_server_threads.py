"""The Agent Server's saver and store under many threads of one process (the server's shape).

``langgraph dev`` serves every run from one process: an event loop whose saver and store
calls go to a thread pool (``asyncio.to_thread``), while other requests read the same
repository. Each thread gets its own libgit2 handle (``RepoBase.git``), ref moves write
their objects as one pack each, and once more than ``MAX_PACKS`` packs pile up a writer
merges the small ones and removes them while other threads read through libgit2. Here the
factories of ``got_integrations.langgraph.server`` open one saver and one store on one
repository, as the server does, and many runs, store writes and readers go at once: every
run must end right, every checkpoint and store item must read back, packs must have been
merged during the runs, and ``git fsck`` must find the repository whole.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from gitcli import fsck_clean, git
from timeouts import TEST_TIMEOUT

from got_core.names import encode_component
from got_core.storage.git._packing import MAX_PACKS

pytest.importorskip("langgraph")
pytest.importorskip("platformdirs")

EXAMPLE = Path(__file__).resolve().parents[3] / "cookbooks" / "agent_server"
RUNS = 24  # threads of the graph, each run to its review interrupt and resumed
READERS = 6  # plain threads reading the same saver and store meanwhile


def _agent() -> Any:
    spec = importlib.util.spec_from_file_location("agent_server_agent_hammer", EXAMPLE / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _packs(gitdir: Path) -> int:
    return sum(1 for p in (gitdir / "objects" / "pack").glob("pack-*.idx"))


@pytest.mark.slow
async def test_one_saver_and_one_store_under_many_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph.types import Command

    from got_integrations.langgraph import server

    gitdir = tmp_path / "agent.git"
    monkeypatch.setenv("GOT_REPO", str(gitdir))
    monkeypatch.delenv("GOT_PACK_WRITES", raising=False)
    agent = _agent()
    stop = threading.Event()
    seen_packs: list[int] = []
    errors: list[BaseException] = []

    async with server.checkpointer() as saver, server.store() as store:
        graph = agent.builder.compile(checkpointer=saver, store=store)

        def read_all(n: int) -> int:
            """A reader thread: lists and reads checkpoints and searches the store until the runs end."""
            reads = 0
            try:
                while not stop.is_set():
                    for i in range(n, RUNS, READERS):
                        config = {"configurable": {"thread_id": f"t{i}"}}
                        tup = saver.get_tuple(config)
                        if tup is not None:
                            assert tup.config["configurable"]["thread_id"] == f"t{i}"
                        for item in saver.list(config, limit=3):
                            assert item.checkpoint["id"]
                        reads += 1
                    store.search(("plans",), limit=100)
                    store.get(("notes", f"r{n}"), "seen")
                    seen_packs.append(_packs(gitdir))
            except BaseException as exc:  # reported by the test, not lost in the thread
                errors.append(exc)
            return reads

        async def one_run(i: int) -> str:
            config = {"configurable": {"thread_id": f"t{i}"}}
            await graph.ainvoke({"messages": [{"role": "user", "content": f"trip {i}"}]}, config)
            await store.aput(("notes", f"r{i % READERS}"), "seen", {"run": i})
            done = await graph.ainvoke(Command(resume="approve"), config)
            return str(done["messages"][-1].content)

        with ThreadPoolExecutor(max_workers=READERS) as pool:
            readers = [pool.submit(read_all, n) for n in range(READERS)]
            try:
                answers = await asyncio.wait_for(asyncio.gather(*(one_run(i) for i in range(RUNS))), TEST_TIMEOUT)
            finally:
                stop.set()
            reads = [r.result(timeout=TEST_TIMEOUT) for r in readers]
        assert errors == []
        assert all(n > 0 for n in reads)
        assert answers == [f"Approved. Plan for trip {i}: 1. research 2. draft 3. check" for i in range(RUNS)]

        # Everything reads back through the same saver and store, and from a fresh saver.
        plans = await store.asearch(("plans",), limit=100)
        assert sorted(item.namespace[1] for item in plans) == sorted(f"trip {i}" for i in range(RUNS))
        for i in range(RUNS):
            history = [c async for c in saver.alist({"configurable": {"thread_id": f"t{i}"}})]
            assert [c.metadata.get("step") for c in history] == [3, 2, 1, 0, -1]

    # The runs made far more ref moves (each one pack) than packs are left: small packs were merged while
    # the readers read, and no reader ever missed an object of a merged-away pack.
    head = git(gitdir, "for-each-ref", "--format=%(refname)", f"refs/got/threads/{encode_component('t0')}/")
    assert f"refs/got/threads/{encode_component('t0')}/root/head" in head.split()
    moves = int(git(gitdir, "rev-list", "--all", "--count").strip())
    assert moves > 4 * MAX_PACKS
    assert _packs(gitdir) < moves // 4  # unmerged, there would be about one pack per commit
    assert seen_packs  # the readers read while the packs came and went
    clean, report = fsck_clean(gitdir)
    assert clean, report
