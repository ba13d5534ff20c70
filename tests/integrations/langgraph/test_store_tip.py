"""A store batch is applied only on the tip it was planned on (issue 13: no lost writes).

A batch reads the store at one tip (which items have expired, the row a TTL refresh
rewrites, the ``created_at`` a put keeps) and builds its commit from what it read. When
another writer moves the ref in between, the compare-and-swap fails and the builder is
called again on the new tip; a builder that applied the old plan there would undo the
other writer's work. Each test makes a second ``GitStore`` (its own lock and index
snapshot, as another process has) write at exactly that moment, from inside the first
store's own plan, and checks what stock ``git`` holds afterwards. Each fails on the code
before: the sweep deleted the item just put again, the refresh wrote the old value back,
the put stamped the live item with a new ``created_at``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from gitcli import fsck_clean, store_items

from got_core.errors import ConcurrentUpdateError
from got_integrations.langgraph import GitStore, _store_write

NS = ("users", "u1")


class Clock:
    """A clock the test moves; each reading is one microsecond after the last."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(microseconds=1)
        return self.now


def _pair(gitdir: Path, clock: Clock, **kw: Any) -> tuple[GitStore, GitStore]:
    first = GitStore(gitdir, clock=clock, **kw)
    first.put(NS, "seed", {"v": 0})  # creates the repository and the ref
    return first, GitStore(gitdir, clock=clock, **kw)


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done: list[bool] = []

    def run() -> None:
        if not done:
            done.append(True)
            action()

    return run


def _before_write(store: GitStore, action: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``action`` each time ``store`` is about to commit a batch it has planned."""
    real = store._write

    def then_write(*args: Any, **kw: Any) -> None:
        action()
        real(*args, **kw)

    monkeypatch.setattr(store, "_write", then_write)


def test_a_sweep_never_deletes_an_item_another_writer_put_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitdir = tmp_path / "s.git"
    clock = Clock()
    a, b = _pair(gitdir, clock)
    a.put(NS, "k", {"v": "old"}, ttl=1.0)
    clock.now += timedelta(minutes=5)  # "k" has expired
    again = _once(lambda: b.put(NS, "k", {"v": "new"}))  # another writer puts it again, with no TTL
    real = a.index.expired_by_namespace

    def expired_then_put(now_us: int) -> Any:
        found = real(now_us)
        again()
        return found

    monkeypatch.setattr(a.index, "expired_by_namespace", expired_then_put)
    a.sweep_ttl()
    monkeypatch.undo()
    assert store_items(gitdir)[(NS, "k")] == {"v": "new"}  # the code before: deleted
    for store in (a, b, GitStore(gitdir)):
        item = store.get(NS, "k")
        assert item is not None and item.value == {"v": "new"}
    assert a.sweep_ttl() == 0
    assert fsck_clean(gitdir)[0]


def test_a_ttl_refresh_never_writes_back_a_value_another_writer_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitdir = tmp_path / "r.git"
    clock = Clock()
    a, b = _pair(gitdir, clock, ttl={"refresh_on_read": True})
    a.put(NS, "k", {"v": "old"}, ttl=10.0)
    _before_write(a, _once(lambda: b.put(NS, "k", {"v": "new"}, ttl=10.0)), monkeypatch)
    item = a.get(NS, "k")  # reads "old", then refreshes its TTL
    monkeypatch.undo()
    assert item is not None and item.value == {"v": "new"}  # the batch was read again on the new tip
    assert store_items(gitdir)[(NS, "k")] == {"v": "new"}  # the code before: {"v": "old"} written back
    again = GitStore(gitdir, clock=clock).get(NS, "k", refresh_ttl=False)
    assert again is not None and again.value == {"v": "new"}
    assert fsck_clean(gitdir)[0]


def test_a_put_keeps_the_created_at_of_the_item_another_writer_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitdir = tmp_path / "c.git"
    clock = Clock()
    a, b = _pair(gitdir, clock)
    _before_write(a, _once(lambda: b.put(NS, "k", {"v": "b"})), monkeypatch)
    a.put(NS, "k", {"v": "a"})  # planned when "k" did not exist
    monkeypatch.undo()
    seen_by_b = b.get(NS, "k")
    assert seen_by_b is not None and seen_by_b.value == {"v": "a"}
    fresh = GitStore(gitdir).get(NS, "k")
    assert fresh is not None
    assert fresh.value == {"v": "a"}
    # "k" was alive when a's put landed, so it keeps the created_at of b's put, and a's put is later
    assert store_items(gitdir)[(NS, "k")] == {"v": "a"}
    assert fresh.created_at < fresh.updated_at  # the code before: a new created_at equal to updated_at
    assert fsck_clean(gitdir)[0]


def test_a_ref_that_keeps_moving_raises_a_typed_error_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitdir = tmp_path / "m.git"
    clock = Clock()
    a, b = _pair(gitdir, clock)
    monkeypatch.setattr(_store_write, "REPLANS", 3)
    count = [0]

    def another_put() -> None:
        count[0] += 1
        b.put(NS, f"other{count[0]}", {"n": count[0]})

    _before_write(a, another_put, monkeypatch)
    with pytest.raises(ConcurrentUpdateError):
        a.put(NS, "k", {"v": "a"})
    monkeypatch.undo()
    items = store_items(gitdir)
    assert count[0] == 3
    assert (NS, "k") not in items  # never applied on a tip it was not planned on
    assert {items[(NS, f"other{i}")]["n"] for i in (1, 2, 3)} == {1, 2, 3}  # type: ignore[index]
    a.put(NS, "k", {"v": "a"})  # the store still works
    assert store_items(gitdir)[(NS, "k")] == {"v": "a"}
    assert fsck_clean(gitdir)[0]
