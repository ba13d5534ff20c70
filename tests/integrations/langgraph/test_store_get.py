"""``GitStore.get`` answers a single read without building a batch, exactly as the batch does.

Issue 13 (``get`` at 100k items against SqliteStore): a get is one indexed row, so what
it costs beyond that row is the Python around it; ``get`` skips the batch machinery
(the list of operations, the put bookkeeping) and keeps everything a batch of one get
does: the same checks and errors, one snapshot, the held rows of our latest writes, and
the TTL refresh (written as a commit, as the batch writes it). What is checked here:
every answer and every error of ``get`` equals the batch's, under TTL with a fake
clock, right after our own writes and after another process's; a subclass that
overrides ``batch`` still sees every read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from gitcli import git
from langgraph.store.base import GetOp, InvalidNamespaceError

from got_integrations.langgraph import GitStore
from got_integrations.langgraph.store import InvalidStoreNameError


def same(store: GitStore, namespace: tuple[str, ...], key: str, refresh_ttl: bool | None = None) -> object:
    """``store.get`` and the batch of the same get give equal items (or both None)."""
    refresh = (
        refresh_ttl
        if refresh_ttl is not None
        else store.ttl_config.get("refresh_on_read", True)
        if store.ttl_config
        else True
    )
    via_batch = store.batch([GetOp(namespace, key, refresh)])[0]
    direct = store.get(namespace, key, refresh_ttl=refresh_ttl)
    if via_batch is None or direct is None:
        assert via_batch is direct is None
        return None
    assert direct.dict() == via_batch.dict()
    return direct


def test_get_answers_as_the_batch_right_after_writes_and_after_another_store(tmp_path):
    store = GitStore.from_path(tmp_path / "s.git")
    assert same(store, ("a", "b"), "missing") is None
    store.put(("a", "b"), "k", {"v": 1})
    assert same(store, ("a", "b"), "k").value == {"v": 1}  # from the rows held in memory
    item = store.get(("a", "b"), "k")
    item.value["v"] = 99  # the caller's copy
    assert store.get(("a", "b"), "k").value == {"v": 1}
    other = GitStore.from_path(tmp_path / "s.git")
    other.put(("a", "b"), "k", {"v": 2})
    other.put(("a",), "k", {"v": 3})
    other.close()
    assert same(store, ("a", "b"), "k").value == {"v": 2}
    assert same(store, ("a",), "k").value == {"v": 3}
    store.delete(("a", "b"), "k")
    assert same(store, ("a", "b"), "k") is None
    store.close()


def test_get_refreshes_a_ttl_as_the_batch_does(tmp_path):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore.from_path(tmp_path / "t.git", ttl={"refresh_on_read": False}, clock=lambda: now[0])
    store.put(("s",), "short", {"v": 1}, ttl=1.0)
    commits = int(git(tmp_path / "t.git", "rev-list", "--count", "refs/got/store"))
    now[0] += timedelta(minutes=0.9)
    assert store.get(("s",), "short") is not None  # the store's default: no refresh
    assert int(git(tmp_path / "t.git", "rev-list", "--count", "refs/got/store")) == commits
    now[0] += timedelta(minutes=0.05)
    assert store.get(("s",), "short", refresh_ttl=True) is not None  # refreshed: now expires at 1.95
    assert int(git(tmp_path / "t.git", "rev-list", "--count", "refs/got/store")) == commits + 1
    now[0] += timedelta(minutes=0.5)
    assert same(store, ("s",), "short", refresh_ttl=False) is not None
    now[0] += timedelta(minutes=0.6)
    assert same(store, ("s",), "short") is None
    store.close()


def test_get_refuses_what_the_batch_refuses_and_reads_keys_as_the_batch_reads_them(tmp_path):
    store = GitStore.from_path(tmp_path / "e.git")
    store.put(("n",), "5", {"v": 5})
    assert store.get(("n",), 5).value == {"v": 5}  # type: ignore[arg-type]  # BaseStore.get's str(key)
    for namespace in [(), ("a.b",), ("",), ("a\x00",)]:
        with pytest.raises(InvalidNamespaceError):
            store.get(namespace, "k")
    with pytest.raises(InvalidStoreNameError):
        store.get(("n",), "")
    with pytest.raises(InvalidStoreNameError):
        store.get(("n",), b"k")  # type: ignore[arg-type]
    with pytest.raises(InvalidStoreNameError):
        store.get(["n"], "k")  # type: ignore[arg-type]
    store.close()


def test_a_subclass_that_overrides_batch_sees_every_get(tmp_path):
    seen: list[object] = []

    class Watched(GitStore):
        def batch(self, ops):  # type: ignore[no-untyped-def]
            ops = list(ops)
            seen.extend(ops)
            return super().batch(ops)

    store = Watched.from_path(tmp_path / "w.git")
    store.put(("n",), "k", {"v": 1})
    assert store.get(("n",), "k").value == {"v": 1}
    assert [type(op).__name__ for op in seen] == ["PutOp", "GetOp"]
    store.close()
