"""What a single ``GitStore.put`` costs, counted (objects read back, trees parsed), never timed.

Issue 13 (``put`` at or below SqliteStore): a put is one commit, one pack and one ref move;
what it costs beyond those is the Python that builds the commit. Each test fails on the code
before the change it names; each also checks that git holds exactly what was put (stock
``git`` reads it, and an index rebuilt from git alone answers the same).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gitcli import fsck_clean, git, store_items
from langgraph.store.base import PutOp

from got_core.storage import packs
from got_core.storage.git._handle import _Handle
from got_integrations.langgraph import GitStore

NAMESPACES = 24
PER_NAMESPACE = 40  # namespace directories the writer's TreeCache keeps parsed (16 entries or more)


def _value(i: int) -> dict[str, object]:
    return {"text": f"memory {i}: " + "likes tea, " * (1 + i % 5), "kind": ["fact", "pref"][i % 2], "n": i}


def _filled(gitdir: Path) -> GitStore:
    store = GitStore(gitdir)
    n = NAMESPACES * PER_NAMESPACE
    store.batch([PutOp(("mem", f"u{i % NAMESPACES}"), f"m{i}", _value(i)) for i in range(n)])
    return store


def _truth(gitdir: Path) -> dict[tuple[tuple[str, ...], str], object]:
    return store_items(gitdir)


def test_a_put_reads_no_tree_back_and_parses_no_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every commit builds its trees from the writer's copies (the raw trees it wrote, the namespace
    # directories it parsed); on the code before, a put below the bulk size went through libgit2's
    # handle, which read each base tree of another namespace back from the object database and
    # parsed the namespace's directory again
    gitdir = tmp_path / "s.git"
    store = _filled(gitdir)
    store.put(("mem", "u0"), "warm", {"w": 1})
    reads: list[str] = []
    real_read = _Handle._odb_read
    monkeypatch.setattr(_Handle, "_odb_read", lambda self, oid: reads.append(oid) or real_read(self, oid))
    parsed: list[str] = []
    real_parse = packs._read_tree
    monkeypatch.setattr(packs, "_read_tree", lambda read_raw, oid: parsed.append(oid) or real_parse(read_raw, oid))
    for i in range(NAMESPACES):
        u = (i * 7) % NAMESPACES  # a namespace the last put did not touch
        store.put(("mem", f"u{u}"), f"new{i}", _value(i))
    assert reads == []  # 3-4 a put on the code before
    assert parsed == []  # one (the namespace's directory) a put on the code before
    monkeypatch.undo()
    assert fsck_clean(gitdir)[0]
    truth = _truth(gitdir)
    assert len(truth) == NAMESPACES * PER_NAMESPACE + 1 + NAMESPACES
    assert truth[(("mem", "u7"), "new1")] == _value(1)
    path = GitStore.namespace_path(("mem", "u7"))
    assert json.loads(git(gitdir, "cat-file", "blob", f"refs/got/store:{path}/new1.json"))["value"] == _value(1)
    store.close()
    for f in (gitdir / "got").glob("store-*.sqlite3*"):
        f.unlink()  # rebuilt from git alone
    again = GitStore(gitdir)
    assert {(i.namespace, i.key): i.value for i in again.search((), limit=10_000)} == truth
    again.close()


def test_puts_build_the_trees_libgit2_builds(tmp_path: Path) -> None:
    # the same puts give the same tree, built by the store's writer or by libgit2 (no staging:
    # GOT_PACK_WRITES=0 writes loose objects through libgit2's tree builder), deletes included
    trees = []
    for name, env in (("packed", "1"), ("loose", "0")):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GOT_PACK_WRITES", env)
            if env == "0":  # the writer would still build Python trees: make the loose builder write
                mp.setattr("got_integrations.langgraph._store_bulk.BulkWriter.wanted", lambda self, *a, **k: False)
            store = GitStore(tmp_path / f"{name}.git", clock=lambda: __import__("datetime").datetime(2026, 1, 1))
            for i in range(30):
                store.put(("mem", f"u{i % 5}"), f"k{i}", _value(i))
            store.delete(("mem", "u1"), "k1")
            store.put(("mem", "u2", "deep"), "k", {"x": 1})
            for i in range(6, 30, 5):
                store.delete(("mem", "u1"), f"k{i}")  # the namespace's directory disappears
            trees.append(git(tmp_path / f"{name}.git", "rev-parse", "refs/got/store^{tree}").strip())
            assert fsck_clean(tmp_path / f"{name}.git")[0]
            store.close()
    assert trees[0] == trees[1]


def test_async_puts_share_one_worker_and_one_git_handle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every batch runs under the store's lock, so its async twin runs in the store's own worker
    # thread: one libgit2 handle (``repo.git`` is per thread) keeps its caches and ref hints; on
    # the code before, asyncio.to_thread spread concurrent aputs over the default executor's
    # threads, each opening a handle of its own
    import asyncio
    import threading

    from got_core.storage.git import GitRepo

    gitdir = tmp_path / "a.git"
    store = GitStore(gitdir)
    store.put(("mem", "u"), "first", {"i": -1})
    opened: list[str] = []
    real_init = GitRepo.__init__

    def spy(self: GitRepo, *args: object, **kwargs: object) -> None:
        opened.append(threading.current_thread().name)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(GitRepo, "__init__", spy)

    async def main() -> list[object]:
        for r in range(4):
            await asyncio.gather(*(store.aput(("mem", f"u{j}"), f"k{r}", {"r": r, "j": j}) for j in range(8)))
        return await asyncio.gather(*(store.aget(("mem", f"u{j}"), "k3") for j in range(8)))

    items = asyncio.run(main())
    assert len(opened) <= 1, opened  # one handle per default-executor thread used on the code before
    assert [item.value for item in items] == [{"r": 3, "j": j} for j in range(8)]
    monkeypatch.undo()
    store.close()  # ends the worker; a later async call starts another
    again = GitStore(gitdir)
    assert asyncio.run(again.aget(("mem", "u5"), "k2")).value == {"r": 2, "j": 5}
    assert len(_truth(gitdir)) == 1 + 4 * 8
    again.close()
