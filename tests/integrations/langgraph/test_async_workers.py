"""The async saver's hops: a running graph's super-step is one thread hop, on the saver's own
worker threads, never on the event loop's default executor (shared with every other
``asyncio.to_thread`` of the application: on a 2-core machine six threads)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

from got_integrations.langgraph import GitCheckpointSaver


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting what it is handed."""

    def __init__(self) -> None:
        super().__init__(2, thread_name_prefix="default")
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def _graph(saver: GitCheckpointSaver) -> Any:
    async def agent(
        state: MessagesState,
    ) -> dict[str, Any]:  # async: LangGraph runs a sync node in the default executor
        return {"messages": [AIMessage(content=f"answer {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


async def test_a_super_step_is_one_hop_on_the_saver_s_own_workers(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    default = CountingExecutor()
    loop.set_default_executor(default)
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    where: dict[str, list[str]] = {"put": [], "put_writes": [], "get_tuple": []}
    for name in where:
        real = getattr(saver, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            where[_name].append(threading.current_thread().name)
            return _real(*args, **kwargs)

        setattr(saver, name, spy)
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    for turn in range(3):
        await graph.ainvoke({"messages": [HumanMessage(f"question {turn}")]}, config, durability="sync")
    state = await graph.aget_state(config)
    assert [m.content for m in state.values["messages"]][-2:] == ["question 2", "answer 5"]
    # every blocking call ran in the saver's threads; the default executor got none of them
    assert default.submitted == 0
    assert where["put"] and all(n.startswith("got-saver") for n in where["put"] + where["get_tuple"])
    # a running graph's regular writes were queued inline (no hop): one hop per super-step, the put's
    assert where["put_writes"] == []
    # the sync twin still answers the same state
    assert saver.get_tuple(config) is not None
    saver.close()
    default.shutdown()


async def test_closing_the_saver_lets_its_worker_threads_end_and_a_later_call_starts_new_ones(tmp_path: Path) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"messages": [HumanMessage("question")]}, config, durability="sync")
    workers = [t for t in threading.enumerate() if t.name.startswith("got-saver")]
    assert workers
    async with saver:
        pass  # __aexit__ closes
    for thread in workers:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in workers)
    # the saver still answers async calls after close, on a new pool
    state = await graph.aget_state(config)
    assert [m.content for m in state.values["messages"]] == ["question", "answer 1"]
    saver.close()


async def test_a_call_cancelled_before_a_worker_takes_it_never_runs(tmp_path: Path) -> None:
    """A task cancelled while its saver call still waits for a worker (every worker busy): the
    call is dropped, as ``run_in_executor`` drops it, and does not run later."""
    from got_integrations.langgraph._async import WORKERS

    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    release = threading.Event()
    started = threading.Semaphore(0)

    def busy() -> None:
        started.release()
        release.wait()

    blockers = [asyncio.ensure_future(saver._in_worker(busy)) for _ in range(WORKERS)]
    for _ in range(WORKERS):  # every worker holds a blocker
        await asyncio.to_thread(started.acquire)
    ran: list[int] = []
    late = asyncio.ensure_future(saver._in_worker(ran.append, 1))
    await asyncio.sleep(0)  # the call is submitted, queued behind the blockers
    late.cancel()
    try:
        await late
    except asyncio.CancelledError:
        pass
    release.set()
    await asyncio.gather(*blockers)
    after = asyncio.ensure_future(saver._in_worker(ran.append, 2))  # queued behind the cancelled one, if it were kept
    await after
    assert ran == [2]
    assert late.cancelled()
    saver.close()
