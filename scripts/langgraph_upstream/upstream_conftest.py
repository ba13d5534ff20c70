"""Fixtures for running LangGraph's own test suite against ``GitCheckpointSaver``.

``scripts/langgraph_upstream_tests.sh`` extracts the ``tests/`` directory of the installed
``langgraph`` release (its PyPI sdist) into a scratch directory and puts this file in place
of LangGraph's ``tests/conftest.py``: the same fixtures, without the Postgres and Redis
services (``NO_DOCKER``), with our savers added beside LangGraph's reference savers:

* ``sync_checkpointer``:  ``sqlite``, ``sqlite_aes`` (LangGraph's) and ``git``, ``git_aes`` (ours)
* ``async_checkpointer``: ``sqlite_aio`` (LangGraph's) and ``git_aio`` (ours)

``GOT_UPSTREAM_SAVERS`` (comma-separated) picks a subset, e.g. ``git,git_aio``.
``scripts/langgraph_upstream/compare.py`` then checks that every test passing with a
reference saver passes with ours.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from uuid import UUID

import pytest
from langgraph.cache.base import BaseCache
from langgraph.cache.memory import InMemoryCache
from langgraph.cache.sqlite import SqliteCache
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Durability
from pytest_mock import MockerFixture

from got_integrations.langgraph import GitCheckpointSaver

pytest.register_assert_rewrite("tests.memory_assert")

from tests.memory_assert import MemorySaverAssertImmutable  # noqa: E402

NO_DOCKER = True
AES_KEY = b"1234567890123456"  # LangGraph's own test key
SYNC = ["memory", "sqlite", "sqlite_aes", "git", "git_aes"]
ASYNC = ["memory", "sqlite_aio", "git_aio"]
_chosen = [
    s.strip()
    for s in os.getenv("GOT_UPSTREAM_SAVERS", "sqlite,sqlite_aes,git,git_aes,sqlite_aio,git_aio").split(",")
    if s.strip()
]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture()
def deterministic_uuids(mocker: MockerFixture) -> MockerFixture:
    side_effect = (UUID(f"00000000-0000-4000-8000-{i:012}", version=4) for i in range(10000))
    return mocker.patch("uuid.uuid4", side_effect=side_effect)


@pytest.fixture(params=["sync", "async", "exit"])
def durability(request: pytest.FixtureRequest) -> Durability:
    return request.param


@pytest.fixture(scope="function", params=["sqlite", "memory"])
def cache(request: pytest.FixtureRequest) -> Iterator[BaseCache]:
    yield SqliteCache(path=":memory:") if request.param == "sqlite" else InMemoryCache()


@pytest.fixture(scope="function", params=["in_memory"])
def sync_store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    yield InMemoryStore()


@pytest.fixture(scope="function", params=["in_memory"])
async def async_store(request: pytest.FixtureRequest) -> AsyncIterator[BaseStore]:
    yield InMemoryStore()


@contextmanager
def _git(request: pytest.FixtureRequest, *, aes: bool) -> Iterator[GitCheckpointSaver]:
    path = request.getfixturevalue("tmp_path") / "checkpoints.git"
    serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY) if aes else None
    with GitCheckpointSaver.from_conn_string(str(path), serde=serde) as saver:
        yield saver


@pytest.fixture(scope="function", params=[s for s in SYNC if s in _chosen] or ["git"])
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[BaseCheckpointSaver]:
    name = request.param
    if name == "memory":
        yield MemorySaverAssertImmutable()
    elif name in ("sqlite", "sqlite_aes"):
        with SqliteSaver.from_conn_string(":memory:") as saver:
            if name == "sqlite_aes":
                saver.serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY)
            yield saver
    elif name in ("git", "git_aes"):
        with _git(request, aes=name == "git_aes") as saver:
            yield saver
    else:
        raise NotImplementedError(f"Unknown checkpointer: {name}")


@pytest.fixture(scope="function", params=[s for s in ASYNC if s in _chosen] or ["git_aio"])
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[BaseCheckpointSaver]:
    name = request.param
    if name == "memory":
        yield MemorySaverAssertImmutable()
    elif name == "sqlite_aio":
        async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
            yield saver
    elif name == "git_aio":
        with _git(request, aes=False) as saver:
            yield saver
    else:
        raise NotImplementedError(f"Unknown checkpointer: {name}")
