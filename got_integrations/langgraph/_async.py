"""The async twins of :class:`~got_integrations.langgraph.GitCheckpointSaver`'s methods.

Each runs its sync method in a worker thread: git I/O never blocks the event loop (the
Agent Server refuses any blocking call there, a ref file read included). The workers are
the saver's own (a thread pool per saver, started on first use, sized like asyncio's default
executor), not the loop's default executor: that one is shared with every other
``asyncio.to_thread`` of the application (on a 2-core machine it has 6 threads), so a
super-step no longer waits behind unrelated blocking work, and a hop skips the context
copy ``to_thread`` makes (the saver reads no context variable): 10-20 us less at the
median, and a shorter tail. One runs inline, where a thread hop would cost more than the
work: a running graph's ``aput_writes``, which only serialises and queues the writes for
the next checkpoint (no I/O). The sync and async paths share one implementation, its caches
and its group commit of pending writes (async graphs run parallel tasks' ``aput_writes`` at
once).
"""

from __future__ import annotations

import asyncio
import builtins
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

__all__ = ["WORKERS", "AsyncOps"]

#: Worker threads of a saver's pool (as asyncio's default executor: parallel graphs' calls run at once).
WORKERS = min(32, (os.cpu_count() or 1) + 4)
_POOL_LOCK = threading.Lock()
_T = TypeVar("_T")


def _set_result(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # the awaiting task may have been cancelled
        future.set_result(result)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    setter: Callable[[asyncio.Future[Any], Any], None],
    future: asyncio.Future[Any],
    value: Any,
) -> None:
    """Set ``future`` from a worker thread (nothing to do once its loop closed)."""
    try:
        loop.call_soon_threadsafe(setter, future, value)
    except RuntimeError:  # the loop is closed: no one awaits the answer any more
        pass


class AsyncOps:
    """Mixin of the async saver methods."""

    _workers: tuple[int, ThreadPoolExecutor] | None = None  # (the process that started it, the pool)

    async def _in_worker(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in one of the saver's worker threads."""
        workers = self._workers
        if workers is None or workers[0] != os.getpid():  # a forked child has none of its parent's threads
            with _POOL_LOCK:
                workers = self._workers
                if workers is None or workers[0] != os.getpid():
                    workers = self._workers = (os.getpid(), ThreadPoolExecutor(WORKERS, thread_name_prefix="got-saver"))
        # the worker hands the result to an asyncio future itself: run_in_executor's chained
        # concurrent future (a Condition, done callbacks, a state copy) costs ~60k instructions a
        # hop, a third of the hop (callgrind, 2026-12)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()

        def run() -> None:
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the awaiting task, as run_in_executor does
                _hand_back(loop, _set_exception, future, exc)
            else:
                _hand_back(loop, _set_result, future, result)

        job = workers[1].submit(run)
        try:
            return await future
        except asyncio.CancelledError:
            job.cancel()  # not started yet: it never runs, as with run_in_executor's chained future
            raise

    def _close_workers(self) -> None:
        """Let the worker threads end (without waiting: ``close`` may run in the event loop).
        A later async call starts a new pool."""
        with _POOL_LOCK:
            workers, self._workers = self._workers, None
        if workers is not None and workers[0] == os.getpid():
            workers[1].shutdown(wait=False)

    if TYPE_CHECKING:  # what the mixin needs from its host, GitCheckpointSaver

        def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None: ...
        def list(
            self,
            config: RunnableConfig | None,
            *,
            filter: dict[str, Any] | None = None,
            before: RunnableConfig | None = None,
            limit: int | None = None,
        ) -> Iterator[CheckpointTuple]: ...
        def put(
            self,
            config: RunnableConfig,
            checkpoint: Checkpoint,
            metadata: CheckpointMetadata,
            new_versions: ChannelVersions,
        ) -> RunnableConfig: ...
        def put_writes(
            self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
        ) -> None: ...
        def delete_thread(self, thread_id: str) -> None: ...
        def _put_writes(
            self,
            config: RunnableConfig,
            writes: Sequence[tuple[str, Any]],
            task_id: str,
            task_path: str,
            *,
            publish: bool,
        ) -> bool: ...
        def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None: ...
        def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None: ...
        def delete_for_runs(self, run_ids: Sequence[str]) -> None: ...

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple` (in a worker thread: git I/O never blocks the event loop)."""
        return await self._in_worker(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        items = await self._in_worker(
            lambda: builtins.list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return await self._in_worker(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Async :meth:`put_writes` (inline when it only queues the writes for the next checkpoint)."""
        # handing the writes to the next checkpoint only serialises and queues: cheaper than a thread hop
        if not self._put_writes(config, writes, task_id, task_path, publish=False):
            await self._in_worker(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self._in_worker(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self._in_worker(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        await self._in_worker(lambda: self.prune(thread_ids, strategy=strategy))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self._in_worker(self.delete_for_runs, run_ids)
