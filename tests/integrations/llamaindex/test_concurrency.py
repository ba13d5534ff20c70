"""Concurrent writers on one session lose nothing: threads and processes, with and without window cuts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

import pytest
from gitcli import fsck_clean
from llama_index.core.base.llms.types import ChatMessage
from timeouts import TEST_TIMEOUT

from got_integrations.llamaindex import GitMemory

ROOT = Path(__file__).resolve().parents[3]


def _check(repo_path: Path, session: str, expected: set[str], commits, writes: int) -> GitMemory:
    memory = GitMemory.from_defaults(path=repo_path, session_id=session)
    contents = Counter(m.content for m in memory.get_all())
    assert set(contents) == expected and all(n == 1 for n in contents.values())  # nothing lost or doubled
    assert commits(repo_path, session) == writes
    ok, out = fsck_clean(repo_path)
    assert ok, out
    return memory


@pytest.mark.parametrize("shared", [True, False], ids=["one-object", "object-per-thread"])
@pytest.mark.parametrize("token_limit", [30_000, 40], ids=["no-cut", "cutting"])
def test_threads_writing_one_session(repo_path, commits, shared, token_limit):
    shared_memory = GitMemory.from_defaults(path=repo_path, session_id="s", token_limit=token_limit)
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        memory = (
            shared_memory
            if shared
            else GitMemory.from_defaults(path=repo_path, session_id="s", token_limit=token_limit)
        )
        try:
            for i in range(12):
                if i % 3 == 2:
                    memory.put_messages(
                        [
                            ChatMessage(role="user", content=f"t{t}-{i}-q"),
                            ChatMessage(role="assistant", content=f"t{t}-{i}-a"),
                        ]
                    )
                else:
                    memory.put(ChatMessage(role="user", content=f"t{t}-{i}"))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    expected = {f"t{t}-{i}" for t in range(6) for i in range(12) if i % 3 != 2}
    expected |= {f"t{t}-{i}-{x}" for t in range(6) for i in range(12) if i % 3 == 2 for x in "qa"}
    memory = _check(repo_path, "s", expected, commits, writes=6 * 12)
    if token_limit == 40:
        window = memory.get()
        assert window[0].role.value == "user" and len(window) < len(expected)


def test_processes_writing_one_session(repo_path, commits):
    child = textwrap.dedent("""
        import sys
        from llama_index.core.base.llms.types import ChatMessage
        from got_integrations.llamaindex import GitMemory
        path, tag = sys.argv[1], sys.argv[2]
        memory = GitMemory.from_defaults(path=path, session_id="shared", token_limit=60)
        for i in range(15):
            memory.put(ChatMessage(role="user", content=f"{tag}-{i}"))
    """)
    GitMemory.from_defaults(path=repo_path, session_id="warmup").put(ChatMessage(role="user", content="x"))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", child, str(repo_path), f"p{n}"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=TEST_TIMEOUT)
        assert p.returncode == 0, err.decode()
    expected = {f"p{n}-{i}" for n in range(3) for i in range(15)}
    _check(repo_path, "shared", expected, commits, writes=45)
