"""Where benchmark tasks run: the executor seam (``--executor local|ray|dbos``).

:func:`got_core.bench.runner.run_tasks` hands an executor the unfinished tasks of a run
as :class:`Job` s (plain dicts that cross process boundaries) and an *entry* function —
``entry(task, spec, run_dir, steps=None) -> record``, which solves one task in its own
repository and pushes the result to ``central.git``. The executor decides where that
runs:

* ``local`` — inline (one worker) or a local process pool;
* ``ray`` — a Ray cluster (or a local instance);
* ``dbos`` — durable execution on DBOS (§6.4 of arXiv 2606.14470): each task is a DBOS
  workflow and **each reasoning node a durable step** (the solver's step seam,
  :mod:`got_core.solver.steps`; judge, verifier and lesson calls are steps too). A run
  killed at any point resumes from DBOS's record: finished nodes are replayed from it,
  not run again (no model call), and their commits are re-derived on the deterministic
  clock, so the resumed results equal an uninterrupted run's. Tasks run concurrently
  (``workers`` threads); the nodes of one task run in order (a workflow's steps are
  ordered: that order is what recovery replays).

Why nodes and not tasks: a task already resumes at task granularity without any engine
(its result ref in ``central.git``); the paper dispatches each node, and a node is what a
crash would otherwise lose.

DBOS keeps its record in a SQLite system database under the run directory,
``RUN_DIR/dbos/system.sqlite3`` (or PostgreSQL: ``database_url``). Every value is stored
as JSON (DBOS's portable serializer), never pickled; before DBOS opens a database, every
row is checked to be JSON-serialised, so a planted pickle is refused
(:func:`check_system_database`), not loaded.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol

from got_core.errors import ConfigError, GotRuntimeError, MissingExtraError, UntrustedContentError

__all__ = [
    "DBOS_WORKFLOW",
    "EXECUTORS",
    "DBOSExecutor",
    "Entry",
    "Executor",
    "ExecutorError",
    "Job",
    "LocalExecutor",
    "RayExecutor",
    "check_system_database",
    "get_executor",
    "recorded_steps",
    "system_database_path",
    "workflow_id",
]

EXECUTORS = ("local", "ray", "dbos")
#: The name the task workflow is registered under in DBOS.
DBOS_WORKFLOW = "got.bench.task"
#: The one serialization this project lets DBOS read (its portable JSON).
_PORTABLE = "portable_json"
#: DBOS recovers a workflow only under the application version that started it: bump this
#: when the steps a solve records change (their names and values), so an old record is not replayed.
_APP_VERSION = "gitofthoughts-steps-1"

#: ``entry(task_dict, spec_dict, run_dir, steps=None) -> result record``.
Entry = Callable[..., dict[str, Any]]


class ExecutorError(GotRuntimeError):
    """A task failed inside an executor (the message names the task and the cause)."""


@dataclass(frozen=True)
class Job:
    """One task for an executor: its key (``<arm>/<problem>``) and its plain-dict arguments."""

    key: str
    task: dict[str, Any]
    spec: dict[str, Any]
    run_dir: str


class Executor(Protocol):
    """Runs jobs through ``entry`` and calls ``tick()`` once per finished job.

    Raises:
        ExecutorError: a job raised; the others are cancelled where the engine allows.
    """

    name: str

    def run(self, jobs: Sequence[Job], entry: Entry, tick: Callable[[], None]) -> None:
        """Run every job (in any order); return when all finished."""
        ...


# ----------------------------------------------------------------------------- local


class LocalExecutor:
    """Inline (``workers <= 1``) or in a local process pool of ``workers`` processes."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, int(workers))

    def run(self, jobs: Sequence[Job], entry: Entry, tick: Callable[[], None]) -> None:
        """See :class:`Executor`."""
        if self.workers <= 1:
            for job in jobs:
                entry(job.task, job.spec, job.run_dir)
                tick()
            return
        # spawn, not fork: the driver may hold threads (the stand-in server, the progress bar).
        with ProcessPoolExecutor(max_workers=min(self.workers, len(jobs)), mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(entry, job.task, job.spec, job.run_dir): job for job in jobs}
            _drain(futures, tick)


def _drain(futures: dict[Any, Job], tick: Callable[[], None]) -> None:
    pending = set(futures)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        for fut in finished:
            exc = fut.exception()
            if exc is not None:
                for other in pending:
                    other.cancel()
                raise ExecutorError(f"task {futures[fut].key} failed: {type(exc).__name__}: {exc}") from exc
            tick()


# ----------------------------------------------------------------------------- ray


class RayExecutor:
    """Tasks on a Ray cluster (``address``), or on a local instance (``"local"``)."""

    name = "ray"

    def __init__(self, address: str = "local", workers: int = 1) -> None:
        self.address = address
        self.workers = max(1, int(workers))

    def run(self, jobs: Sequence[Job], entry: Entry, tick: Callable[[], None]) -> None:
        """See :class:`Executor`."""
        try:
            import ray
        except ImportError as exc:
            raise MissingExtraError("running benchmarks on Ray (--executor ray)", "ray", exc) from None
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        started = not ray.is_initialized()
        if started:
            if self.address == "local":
                ray.init(
                    num_cpus=self.workers,
                    include_dashboard=False,
                    log_to_driver=False,
                    object_store_memory=100 * 1024 * 1024,
                )
            else:
                ray.init(address=self.address, log_to_driver=False)
        try:
            # ray.remote takes only a plain function; an entry with bound arguments (a partial) is wrapped.
            fn = entry if inspect.isfunction(entry) else _call_entry(entry)
            remote: Any = ray.remote(num_cpus=1, max_retries=1)(fn)
            queue = list(jobs)
            pending: dict[Any, Job] = {}  # ray object ref -> its job
            while queue or pending:
                while queue and len(pending) < self.workers:
                    job = queue.pop(0)
                    pending[remote.remote(job.task, job.spec, job.run_dir)] = job
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    job = pending.pop(ref)
                    try:
                        ray.get(ref)
                    except Exception as exc:
                        raise ExecutorError(f"task {job.key} failed on Ray: {exc}") from exc
                    tick()
        finally:
            if started:
                ray.shutdown()


def _call_entry(entry: Entry) -> Entry:
    def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return entry(*args, **kwargs)

    return call


# ----------------------------------------------------------------------------- dbos


def system_database_path(run_dir: str | os.PathLike[str]) -> Path:
    """Where the DBOS executor keeps its SQLite system database: ``RUN_DIR/dbos/system.sqlite3``."""
    return Path(run_dir) / "dbos" / "system.sqlite3"


def workflow_id(key: str) -> str:
    """The DBOS workflow id of a task (its key, hashed: ids are opaque, keys may be long)."""
    return "got-task-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _connect_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def check_system_database(path: str | os.PathLike[str]) -> None:
    """Refuse a DBOS system database that holds anything but JSON-serialised values.

    DBOS unpickles a row marked with its pickle serializer whatever the configuration
    says; this project never writes one, so such a row (or a schedule, whose context
    DBOS also decodes) means the file was tampered with. A missing file is fine (DBOS
    creates it).

    Raises:
        UntrustedContentError: a row is marked with another serialization, or the file is
            not a SQLite database.
    """
    path = Path(path)
    if not path.exists():
        return
    try:
        with _connect_read_only(path) as db:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                columns = {r[1] for r in db.execute(f'PRAGMA table_info("{table}")')}
                if "serialization" in columns:
                    bad = db.execute(
                        f'SELECT serialization, COUNT(*) FROM "{table}" '
                        "WHERE serialization IS NOT NULL AND serialization != ? GROUP BY serialization LIMIT 3",
                        (_PORTABLE,),
                    ).fetchall()
                    if bad:
                        kinds = ", ".join(f"{n} row(s) as {str(k)[:40]!r}" for k, n in bad)
                        raise UntrustedContentError(
                            f"the DBOS system database {path} holds values that are not JSON in table "
                            f"{table!r} ({kinds}); this project writes none, so the file was altered. "
                            "Delete it (the run resumes from central.git at task granularity)"
                        )
            if "workflow_schedules" in tables and db.execute("SELECT COUNT(*) FROM workflow_schedules").fetchone()[0]:
                raise UntrustedContentError(
                    f"the DBOS system database {path} holds workflow schedules; this project writes none. "
                    "Delete the file (the run resumes from central.git at task granularity)"
                )
    except sqlite3.DatabaseError as exc:
        raise UntrustedContentError(
            f"{path} is not a readable DBOS system database ({exc}); delete it to start the durable record afresh"
        ) from None


def recorded_steps(run_dir: str | os.PathLike[str], key: str) -> list[dict[str, Any]]:
    """The steps DBOS recorded for one task of a run (``function_id``, ``name``, ``error``), in order.

    Read straight from the SQLite system database (read-only); empty when there is none.
    """
    path = system_database_path(run_dir)
    if not path.exists():
        return []
    check_system_database(path)
    with _connect_read_only(path) as db:
        rows = db.execute(
            "SELECT function_id, function_name, error IS NOT NULL FROM operation_outputs "
            "WHERE workflow_uuid = ? ORDER BY function_id",
            (workflow_id(key),),
        ).fetchall()
    return [{"function_id": int(f), "name": str(n), "error": bool(e)} for f, n, e in rows]


_DBOS_LOCK = threading.Lock()  # DBOS is one instance per process: one durable run at a time


class DBOSExecutor:
    """Each task a DBOS workflow, each reasoning node a durable step (see the module docstring).

    Args:
        workers: tasks in flight (threads of this process).
        database_url: the system database (default: SQLite under the run directory);
            a ``postgresql://`` URL uses PostgreSQL instead.
        app_name: the DBOS application name.
    """

    name = "dbos"

    def __init__(self, workers: int = 1, *, database_url: str | None = None, app_name: str = "gitofthoughts") -> None:
        self.workers = max(1, int(workers))
        self.database_url = database_url
        self.app_name = app_name

    def run(self, jobs: Sequence[Job], entry: Entry, tick: Callable[[], None]) -> None:
        """See :class:`Executor`; recovers this run's interrupted workflows first."""
        if not jobs:
            return
        try:
            from dbos import DBOS, SetWorkflowID
            from dbos._serialization import DBOSPortableJSON
        except ImportError as exc:
            raise MissingExtraError("durable execution on DBOS (--executor dbos)", "durable", exc) from None
        run_dirs = {job.run_dir for job in jobs}
        if len(run_dirs) != 1:
            raise ConfigError("a DBOS run takes the jobs of one run directory")
        url = self.database_url
        if url is None:
            path = system_database_path(run_dirs.pop())
            check_system_database(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{path}"
        if not _DBOS_LOCK.acquire(blocking=False):
            raise ConfigError("another DBOS run is active in this process; run one durable run at a time")
        try:
            DBOS(
                config={
                    "name": self.app_name,
                    "system_database_url": url,
                    "serializer": DBOSPortableJSON,  # JSON only: nothing is pickled
                    # Recovery replays a workflow only under the code version that wrote it.
                    "application_version": _APP_VERSION,
                    "log_level": "WARNING",
                }
            )

            def step(name: str, body: Callable[[], Any]) -> Any:
                return DBOS.run_step({"name": name}, body)

            @DBOS.workflow(name=DBOS_WORKFLOW)
            def task_workflow(task: dict[str, Any], spec: dict[str, Any], run_dir: str) -> dict[str, Any]:
                return entry(task, spec, run_dir, steps=step)

            DBOS.launch()  # starts recovering this run's interrupted workflows in the background

            def one(job: Job) -> None:
                wid = workflow_id(job.key)
                status = DBOS.get_workflow_status(wid)
                state = status.status if status is not None else None
                try:
                    if state is None:
                        with SetWorkflowID(wid):
                            task_workflow(job.task, job.spec, job.run_dir)
                    elif state in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
                        # e.g. the model server went away: carry on from the last finished step
                        DBOS.resume_workflow(wid).get_result()
                    elif state == "SUCCESS":
                        # finished, but central.git lacks its result: the task's repository has it
                        entry(job.task, job.spec, job.run_dir)
                    else:  # PENDING / ENQUEUED: being recovered since launch
                        DBOS.retrieve_workflow(wid).get_result()
                except Exception as exc:
                    raise ExecutorError(f"task {job.key} failed under DBOS: {type(exc).__name__}: {exc}") from exc

            with ThreadPoolExecutor(max_workers=min(self.workers, len(jobs)), thread_name_prefix="got-dbos") as pool:
                _drain({pool.submit(one, job): job for job in jobs}, tick)
        finally:
            try:
                DBOS.destroy(destroy_registry=True)
            finally:
                _DBOS_LOCK.release()


# ----------------------------------------------------------------------------- choosing


def get_executor(
    name: str | None = None,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    database_url: str | None = None,
) -> LocalExecutor | RayExecutor | DBOSExecutor:
    """The executor called ``name`` (default: ``ray`` when ``ray_address`` is given, else ``local``).

    Raises:
        ConfigError: an unknown name, or ``ray_address`` with another executor.
    """
    name = name or ("ray" if ray_address else "local")
    if name not in EXECUTORS:
        raise ConfigError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    if ray_address and name != "ray":
        raise ConfigError(f"a Ray address was given with --executor {name}; drop one of them")
    if name == "ray":
        return RayExecutor(ray_address or "local", workers)
    if name == "dbos":
        return DBOSExecutor(workers, database_url=database_url)
    return LocalExecutor(workers)
