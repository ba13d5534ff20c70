"""GitStore against InMemoryStore: random operation sequences (hypothesis), semantic search on
real MiniLM embeddings, batch semantics, hostile names, TTL with a fake clock, the sweeper."""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from timeouts import TEST_TIMEOUT, deadline

from got_core.errors import GotUserError, InvalidInputError
from got_core.memory.embeddings import MINILM_DIMS, embed
from got_integrations.langgraph import GitStore
from got_integrations.langgraph.store import InvalidStoreNameError

TEXTS = [
    "The cat sat on the warm windowsill.",
    "Quarterly revenue grew by twelve percent.",
    "Use a binary search to find the insertion point.",
    "The recipe needs two cups of flour and an egg.",
    "Photosynthesis turns light into chemical energy.",
    "A kitten napped in the sunny window.",
    "The sorted array lets us bisect in logarithmic time.",
    "Profits rose sharply in the last quarter.",
]


@cache
def _vector(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in embed([text])[0])


def minilm(texts: list[str]) -> list[list[float]]:
    """Real all-MiniLM-L6-v2 embeddings (got_core.memory.embeddings), memoised per text."""
    return [list(_vector(t)) for t in texts]


INDEX = {"dims": MINILM_DIMS, "embed": minilm, "fields": ["text"]}

LABELS = st.sampled_from(["users", "docs", "a", "b-1", "x y", "ü", "sl/ash", "-rf", "%41"])
NAMESPACES = st.lists(LABELS, min_size=1, max_size=3).map(tuple)
KEYS = st.sampled_from(["k1", "k2", "..", "../../etc/passwd", "a/b", "nul\x00key", "x" * 400, "Ω"])
VALUES = st.fixed_dictionaries(
    {"text": st.sampled_from(TEXTS), "n": st.integers(0, 5)},
    optional={
        "tags": st.lists(st.sampled_from(["red", "blue"]), max_size=2),
        "nested": st.fixed_dictionaries({"k": st.integers(0, 2)}),
    },
)
FILTERS = st.one_of(
    st.none(),
    st.builds(lambda n: {"n": n}, st.integers(0, 5)),
    st.builds(lambda n: {"n": {"$gt": n}}, st.integers(0, 5)),
    st.builds(lambda k: {"nested": {"k": k}}, st.integers(0, 2)),
    st.just({"tags": ["red"]}),
)


def _key(item):
    return (tuple(item.namespace), item.key)


def _plain(items):
    return sorted((tuple(i.namespace), i.key, repr(sorted(i.value.items()))) for i in items)


class StoreMachine(RuleBasedStateMachine):
    """The same operations on both stores; every observation must agree."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="gitstore-")
        self.ref = InMemoryStore(index=INDEX)
        self.git = GitStore.from_path(f"{self.dir}/store.git", index=INDEX)
        self.other = GitStore.from_path(f"{self.dir}/store.git", index=INDEX)  # another writer, one index file

    def teardown(self) -> None:
        self.git.close()
        self.other.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(ns=NAMESPACES, key=KEYS, value=VALUES)
    def put(self, ns, key, value):
        self.ref.put(ns, key, value)
        self.git.put(ns, key, value)

    @rule(ns=NAMESPACES, key=KEYS)
    def delete(self, ns, key):
        self.ref.delete(ns, key)
        self.git.delete(ns, key)

    @rule(ns=NAMESPACES, key=KEYS, value=st.one_of(st.none(), VALUES))
    def another_store_writes(self, ns, key, value):
        # the derived index must learn what another store (connection) wrote
        if value is None:
            self.ref.delete(ns, key)
            self.other.delete(ns, key)
        else:
            self.ref.put(ns, key, value)
            self.other.put(ns, key, value)

    @rule()
    def drop_the_index(self):
        # the index is derived: delete it and open again; nothing may change
        self.git.close()
        for path in Path(self.dir, "store.git", "got").glob("store-*.sqlite3*"):
            path.unlink()
        self.git = GitStore.from_path(f"{self.dir}/store.git", index=INDEX)

    @rule(ns=NAMESPACES, key=KEYS)
    def get(self, ns, key):
        a, b = self.ref.get(ns, key), self.git.get(ns, key)
        assert (a is None) == (b is None)
        if a is not None:
            assert (a.value, a.key, a.namespace) == (b.value, b.key, b.namespace)

    @rule(prefix=st.lists(LABELS, max_size=2).map(tuple), filter=FILTERS)
    def search(self, prefix, filter):
        a = self.ref.search(prefix, filter=filter, limit=1000)
        b = self.git.search(prefix, filter=filter, limit=1000)
        assert _plain(a) == _plain(b)

    @rule(prefix=st.lists(LABELS, max_size=1).map(tuple), query=st.sampled_from(TEXTS), filter=FILTERS)
    def semantic_search(self, prefix, query, filter):
        a = self.ref.search(prefix, query=query, filter=filter, limit=1000)
        b = self.git.search(prefix, query=query, filter=filter, limit=1000)
        assert sorted(map(_key, a)) == sorted(map(_key, b))
        scores = {_key(i): i.score for i in a}
        for item in b:
            assert math.isclose(item.score, scores[_key(item)], abs_tol=1e-5)
        assert [i.score for i in b] == sorted((i.score for i in b), reverse=True)

    @rule(
        prefix=st.lists(st.one_of(LABELS, st.just("*")), max_size=2).map(tuple),
        suffix=st.lists(LABELS, max_size=1).map(tuple),
        depth=st.one_of(st.none(), st.integers(1, 3)),
    )
    def list_namespaces(self, prefix, suffix, depth):
        # InMemoryStore keeps namespaces it has merely read or emptied; compare live ones only
        for ns in [ns for ns, items in self.ref._data.items() if not items]:
            del self.ref._data[ns]
        kwargs = {"prefix": prefix or None, "suffix": suffix or None, "max_depth": depth, "limit": 1000}
        assert self.ref.list_namespaces(**kwargs) == self.git.list_namespaces(**kwargs)

    @invariant()
    def same_content(self):
        assert _plain(self.ref.search((), limit=10000)) == _plain(self.git.search((), limit=10000))


StoreMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_store_matches_in_memory_store = StoreMachine.TestCase


# ---------------------------------------------------------------------------- targeted behaviour
def test_semantic_search_ranks_by_meaning(tmp_path):
    store = GitStore.from_path(tmp_path / "s.git", index=INDEX)
    for i, text in enumerate(TEXTS):
        store.put(("docs",), f"d{i}", {"text": text})
    hits = store.search(("docs",), query="a small cat sleeping by the window", limit=2)
    assert {h.value["text"] for h in hits} == {TEXTS[0], TEXTS[5]} and hits[0].score > 0.5
    # the vectors are derived data: a fresh store rebuilds them from git (and its cache file)
    (tmp_path / "s.git" / "got" / "store-vectors.sqlite3").unlink()
    again = GitStore.from_path(tmp_path / "s.git", index=INDEX).search(("docs",), query="profit growth", limit=2)
    assert {h.value["text"] for h in again} == {TEXTS[1], TEXTS[7]}


def test_a_batch_reads_before_its_writes_and_commits_once(tmp_path):
    git_store, ref = GitStore.from_path(tmp_path / "b.git"), InMemoryStore()
    ops = [
        PutOp(("n",), "k", {"v": 1}),
        GetOp(("n",), "k"),
        PutOp(("n",), "k", {"v": 2}),
        PutOp(("n",), "other", {"v": 3}),
        SearchOp(("n",)),
    ]
    assert list(git_store.batch(ops)) == list(ref.batch(ops)) == [None, None, None, None, []]
    assert git_store.get(("n",), "k").value == ref.get(("n",), "k").value == {"v": 2}
    assert git(tmp_path / "b.git", "rev-list", "--count", "refs/got/store").strip() == "1"
    git_store.batch([PutOp(("n",), "k", None), PutOp(("n",), "other", None), GetOp(("n",), "k")])
    assert git(tmp_path / "b.git", "rev-list", "--count", "refs/got/store").strip() == "2"
    assert git_store.search(("n",)) == [] and git_store.list_namespaces() == []


def test_hostile_names_are_encoded_and_nothing_is_lost(tmp_path):
    store = GitStore.from_path(tmp_path / "h.git")
    long_label, long_key = "L" * 10_000, "K" * 10_000
    cases = [
        (("a/b", "-rf"), "../../x"),
        (("%2E%2E", "sp ace"), "nul\x00byte"),
        (("ü", long_label), long_key),
        (("x",), ".."),
        (("x",), ".git"),
        (("y",), "a" * 250),
    ]
    for i, (ns, key) in enumerate(cases):
        store.put(ns, key, {"i": i})
    for i, (ns, key) in enumerate(cases):
        assert store.get(ns, key).value == {"i": i}
    assert sorted(store.list_namespaces()) == sorted({ns for ns, _ in cases})
    paths = git(tmp_path / "h.git", "ls-tree", "-r", "--name-only", "-z", "refs/got/store").split("\x00")
    assert len([p for p in paths if p]) == len(cases)
    for path in filter(None, paths):
        assert all(part not in ("", ".", "..", ".git") and len(part) < 256 for part in path.split("/"))
    ok, out = fsck_clean(tmp_path / "h.git")
    assert ok, out
    for bad_ns in [("a.b",), ("",), ("nul\x00",), ()]:
        with pytest.raises((InvalidNamespaceError, InvalidStoreNameError)):
            store.put(bad_ns, "k", {"v": 1})
    with pytest.raises(InvalidStoreNameError) as info:
        store.batch([PutOp(("ok",), "", {"v": 1})])
    assert isinstance(info.value, GotUserError) and isinstance(info.value, InvalidNamespaceError)
    for bad_value in ({"x": object()}, {"x": float("nan")}):
        with pytest.raises(InvalidInputError):
            store.put(("ok",), "k", bad_value)


def test_ttl_expiry_refresh_and_sweep_with_a_fake_clock(tmp_path):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore.from_path(tmp_path / "t.git", ttl={"refresh_on_read": True}, clock=lambda: now[0])
    assert store.supports_ttl
    store.put(("s",), "short", {"v": 1}, ttl=1.0)
    store.put(("s",), "forever", {"v": 2})
    now[0] += timedelta(minutes=0.9)
    assert store.get(("s",), "short").value == {"v": 1}  # a read refreshes: now expires at 1.9
    now[0] += timedelta(minutes=0.6)
    assert store.get(("s",), "short", refresh_ttl=False) is not None
    now[0] += timedelta(minutes=0.5)  # 2.0: past 1.9
    assert store.get(("s",), "short") is None
    assert [i.key for i in store.search(("s",))] == ["forever"]
    assert store.sweep_ttl() == 1 and store.sweep_ttl() == 0
    files = git(tmp_path / "t.git", "ls-tree", "-r", "--name-only", "refs/got/store").split()
    assert files == [GitStore.namespace_path(("s",)) + "/forever.json"]
    assert "sweep 1 expired" in git(tmp_path / "t.git", "log", "-1", "--format=%s", "refs/got/store")


def test_background_sweeper_removes_expired_items(tmp_path):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore.from_path(tmp_path / "w.git", ttl={"sweep_interval_minutes": 1}, clock=lambda: now[0])
    store.put(("s",), "gone", {"v": 1}, ttl=0.5)
    now[0] += timedelta(minutes=1)
    future = store.start_ttl_sweeper(sweep_interval_minutes=0.001)
    until = deadline()
    while time.monotonic() < until:
        if not git(tmp_path / "w.git", "ls-tree", "-r", "--name-only", "refs/got/store").strip():
            break
        time.sleep(0.05)
    assert not git(tmp_path / "w.git", "ls-tree", "-r", "--name-only", "refs/got/store").strip()
    assert store.stop_ttl_sweeper(timeout=TEST_TIMEOUT) and future.done()


def test_async_batch_matches_sync(tmp_path):
    store = GitStore.from_path(tmp_path / "a.git", index=INDEX)

    async def scenario():
        await store.aput(("docs",), "cat", {"text": TEXTS[0]})
        await store.aput(("docs",), "money", {"text": TEXTS[1]})
        got = await store.aget(("docs",), "cat")
        hits = await store.asearch(("docs",), query="kitten by a window", limit=1)
        spaces = await store.alist_namespaces()
        await store.adelete(("docs",), "money")
        return got, hits, spaces

    got, hits, spaces = asyncio.run(scenario())
    assert got.value == store.get(("docs",), "cat").value and hits[0].key == "cat" and spaces == [("docs",)]
    assert [h.key for h in store.search(("docs",))] == ["cat"]
