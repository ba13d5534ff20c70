"""The LlamaIndex upstream-test harness (``scripts/llamaindex_upstream/``) itself.

``got_swap`` must build our classes with the semantics of the stock constructors it replaces,
or the comparison reports differences of the harness instead of differences of our classes;
``compare.py`` must fail on an unlisted regression and only then. The pytest runs here are real
subprocesses on test files written for the purpose (nothing of LlamaIndex's is copied).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import TEST_TIMEOUT

from got_integrations.llamaindex import GitChatStore

ROOT = Path(__file__).resolve().parents[3]
HARNESS = ROOT / "scripts" / "llamaindex_upstream"

# Written the way llama-index-core's own tests use the stock classes: each construction
# without a store of its own gets a private database (a fresh in-memory SQLite).
STOCK_SEMANTICS = """
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore


async def test_store_less_memories_share_nothing():
    first = Memory(token_limit=1000, session_id="same")
    await first.aput(ChatMessage(role="user", content="hello"))
    second = Memory(token_limit=1000, session_id="same")
    assert [m.content for m in await first.aget()] == ["hello"]
    assert await second.aget() == []


async def test_store_less_chat_stores_share_nothing():
    uri = "sqlite+aiosqlite:///:memory:"
    first = SQLAlchemyChatStore(table_name="messages", async_database_uri=uri)
    await first.add_message("k", ChatMessage(role="user", content="x"))
    second = SQLAlchemyChatStore(table_name="messages", async_database_uri=uri)
    assert await second.get_messages("k") == []
    assert [m.content for m in await first.get_messages("k")] == ["x"]


async def test_a_shared_store_is_shared():
    store = SQLAlchemyChatStore(table_name="messages")
    first = Memory(token_limit=1000, session_id="same", sql_store=store)
    await first.aput(ChatMessage(role="user", content="hello"))
    second = Memory(token_limit=1000, session_id="same", sql_store=store)
    assert [m.content for m in await second.aget()] == ["hello"]


def test_what_was_built():
    memory = Memory(token_limit=1000, session_id="probe")
    store = SQLAlchemyChatStore(table_name="probe")
    # the chat engine's default memory class is bound as a default argument value
    engine = SimpleChatEngine.from_defaults(llm=MockLLM())
    print("classes:", type(memory).__name__, type(store).__name__, type(engine._memory).__name__)
"""


def run_with_harness(tmp_path: Path, swap: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_semantics.py").write_text(STOCK_SEMANTICS, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )
    path = os.pathsep.join(filter(None, [str(ROOT), str(HARNESS), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "GOT_SWAP": "1" if swap else "0"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "got_swap", "-q", "-s", "test_semantics.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
    )


@pytest.mark.parametrize("swap", [False, True], ids=["stock", "swapped"])
def test_swap_keeps_the_stock_constructors_semantics(tmp_path: Path, swap: bool) -> None:
    done = run_with_harness(tmp_path, swap)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "4 passed" in done.stdout
    if swap:
        # our classes really were the ones exercised, each store-less one on its own repository
        assert "classes: GitMemory GitChatStore GitMemory" in done.stdout
        assert "got_swap: built" in done.stdout
    else:
        assert "classes: Memory SQLAlchemyChatStore Memory" in done.stdout


async def test_chat_store_dump_and_validate_reads_the_same_messages(tmp_path: Path) -> None:
    """What upstream's test_dump_load_store checks beyond the SQL fields (its known failure)."""
    from llama_index.core.base.llms.types import ChatMessage

    store = GitChatStore(tmp_path / "agent.git")
    await store.add_message("dump_user1", ChatMessage(role="user", content="message1"))
    await store.add_message("dump_user2", ChatMessage(role="user", content="message2"))
    dumped = store.model_dump()
    json.dumps(dumped)
    loaded = GitChatStore.model_validate(dumped)
    assert [m.content for m in await loaded.get_messages("dump_user1")] == ["message1"]
    assert [m.content for m in await loaded.get_messages("dump_user2")] == ["message2"]


def junit(path: Path, outcomes: dict[str, str]) -> Path:
    cases = []
    for name, outcome in outcomes.items():
        module, _, test = name.rpartition("::")
        inner = {"failed": "<failure message='x'/>", "skipped": "<skipped/>"}.get(outcome, "")
        cases.append(f"<testcase classname='{module}' name='{test}'>{inner}</testcase>")
    path.write_text(f"<testsuites><testsuite>{''.join(cases)}</testsuite></testsuites>", encoding="utf-8")
    return path


def compare(
    tmp_path: Path, stock: dict[str, str], ours: dict[str, str], listed: str
) -> subprocess.CompletedProcess[str]:
    known = tmp_path / "known.txt"
    known.write_text(listed, encoding="utf-8")
    args = [str(junit(tmp_path / "stock.xml", stock)), str(junit(tmp_path / "ours.xml", ours)), str(known)]
    return subprocess.run(
        [sys.executable, str(HARNESS / "compare.py"), *args], capture_output=True, text=True, timeout=TEST_TIMEOUT
    )


def test_compare_fails_only_on_an_unlisted_regression(tmp_path: Path) -> None:
    stock = {"tests.m::a": "passed", "tests.m::b": "passed", "tests.m::c": "failed", "tests.s::d": "passed"}
    ours = {"tests.m::a": "passed", "tests.m::b": "failed", "tests.m::c": "failed", "tests.s::d": "failed"}
    listed = "tests.s  # the whole module, by design\n"
    done = compare(tmp_path, stock, ours, listed)
    assert done.returncode == 1
    assert "REGRESSION: tests.m::b" in done.stderr
    assert "known failure: tests.s::d" in done.stdout
    assert "tests.m::c" not in done.stderr  # failing stock too: not ours to answer for

    done = compare(tmp_path, stock, ours, listed + "tests.m::b  # why\n")
    assert done.returncode == 0, done.stderr
    assert "0 regressions, 2 known failures" in done.stdout


def test_compare_reports_a_listed_test_that_passes(tmp_path: Path) -> None:
    done = compare(tmp_path, {"tests.m::a": "passed"}, {"tests.m::a": "passed"}, "tests.m::a  # stale\n")
    assert done.returncode == 0
    assert "listed as failing but passed (remove it from the list): tests.m::a" in done.stdout
