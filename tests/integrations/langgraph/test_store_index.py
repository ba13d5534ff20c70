"""GitStore's derived item index: reads answered without blobs, writes without re-listing,
an index that follows other stores, other processes and stock git, is rebuildable, holds
nothing readable for encrypted stores, and whose SQL filters never drop a match."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from gitcli import fsck_clean, git, unpack_all
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, PutOp, SearchOp

from got_core.errors import CorruptRepositoryError
from got_integrations.langgraph import GitStore
from got_integrations.langgraph._store_doc import item_path, matches_filter


def _tree(gitdir: Path, rev: str = "refs/got/store") -> dict[str, str]:
    """path -> blob id of every file on ``rev``, by the git binary."""
    out = {}
    for entry in filter(None, git(gitdir, "ls-tree", "-r", "-z", rev).split("\x00")):
        meta, path = entry.split("\t", 1)
        out[path] = meta.split()[2]
    return out


def _truth(gitdir: Path, rev: str = "refs/got/store") -> dict[tuple[tuple[str, ...], str], dict]:
    """(namespace, key) -> value of every item on ``rev``, read by the git binary (no TTL in use)."""
    out = {}
    for path, blob in _tree(gitdir, rev).items():
        if path.endswith(".json"):
            doc = json.loads(git(gitdir, "cat-file", "blob", blob))
            out[(tuple(doc["namespace"]), doc["key"])] = doc["value"]
    return out


def _answers(store: GitStore) -> dict[tuple[tuple[str, ...], str], dict]:
    return {(i.namespace, i.key): i.value for i in store.search((), limit=100_000)}


def _remove_objects(gitdir: Path, shas: set[str]) -> None:
    for sha in shas:
        path = gitdir / "objects" / sha[:2] / sha[2:]
        path.chmod(0o644)
        path.unlink()


def _fill(store: GitStore, users: int = 6, per_user: int = 5) -> None:
    store.batch(
        [
            PutOp(("users", f"u{u}", "memories"), f"m{i}", {"kind": "pref" if i % 2 else "fact", "n": i, "u": u})
            for u in range(users)
            for i in range(per_user)
        ]
    )


# ---------------------------------------------------------------------------- answered from structure
def test_reads_sweeps_and_puts_need_no_item_blob(tmp_path):
    gitdir = tmp_path / "s.git"
    store = GitStore(gitdir, ttl={}, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    _fill(store)
    store.put(("users", "u0", "memories"), "short", {"kind": "pref", "n": 99}, ttl=1.0)
    expected = _truth(gitdir)
    store.close()  # its index file holds every row (a store holds its latest puts' rows until then)
    # every item file's blob is gone from the object database: nothing below may read one
    unpack_all(gitdir)  # writes land in packs: make each object a file of its own first
    _remove_objects(gitdir, set(_tree(gitdir).values()))
    store = GitStore(gitdir, ttl={}, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))  # never saw the packs
    assert store.get(("users", "u3", "memories"), "m1").value == {"kind": "pref", "n": 1, "u": 3}
    assert store.list_namespaces(prefix=("users",), max_depth=2) == [("users", f"u{u}") for u in range(6)]
    assert len(store.list_namespaces()) == 6
    hits = store.search(("users",), filter={"kind": "pref", "n": {"$gte": 3}}, limit=100)
    assert sorted((h.namespace[1], h.key) for h in hits) == sorted(
        [(f"u{u}", "m3") for u in range(6)] + [("u0", "short")]
    )
    assert _answers(store) == expected
    # a put (new key, or over an existing one) reads no blob and lists no tree
    store.put(("users", "u9", "memories"), "m0", {"kind": "fact"})
    store.put(("users", "u3", "memories"), "m1", {"kind": "fact", "n": 1})
    assert store.get(("users", "u3", "memories"), "m1").value == {"kind": "fact", "n": 1}
    # the TTL sweep reads the expiry index, not every document
    store.clock = lambda: datetime(2026, 1, 1, 0, 2, tzinfo=UTC)
    assert store.sweep_ttl() == 1
    assert "users/u0/memories/short.json" not in _tree(gitdir)


def test_namespaces_whose_items_all_expired_are_not_listed(tmp_path):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    store = GitStore(tmp_path / "t.git", clock=lambda: now[0])
    store.put(("a",), "k", {"v": 1}, ttl=1.0)
    store.put(("a",), "k2", {"v": 2}, ttl=3.0)
    store.put(("b",), "k", {"v": 3})
    now[0] += timedelta(minutes=2)
    assert store.list_namespaces() == [("a",), ("b",)]
    now[0] += timedelta(minutes=2)
    assert store.list_namespaces() == [("b",)]
    store.put(("a",), "k", {"v": 4})  # alive again, created anew (the old one had expired)
    item = store.get(("a",), "k")
    assert store.list_namespaces() == [("a",), ("b",)] and item.created_at == now[0]


# ---------------------------------------------------------------------------- following git
def test_the_index_follows_another_store_and_stock_git(tmp_path):
    gitdir = tmp_path / "f.git"
    a, b = GitStore(gitdir), GitStore(gitdir)  # two connections to one index file
    a.put(("docs",), "x", {"v": 1})
    assert b.get(("docs",), "x").value == {"v": 1}
    b.delete(("docs",), "x")
    b.put(("docs", "deep"), "y", {"v": 2})
    assert a.get(("docs",), "x") is None and a.list_namespaces() == [("docs", "deep")]
    first = a.repo.tip(a.ref)
    # stock git adds an item file and a README (which is no item) through plumbing
    doc = {
        "namespace": ["ops"],
        "key": "z",
        "value": {"v": 3},
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "ttl": None,
        "expires_at": None,
        "index": None,
    }
    blob = git(gitdir, "hash-object", "-w", "--stdin", input=json.dumps(doc).encode()).strip()
    readme = git(gitdir, "hash-object", "-w", "--stdin", input=b"notes\n").strip()
    listing = git(gitdir, "ls-tree", "-r", first) + f"100644 blob {blob}\tops/z.json\n100644 blob {readme}\tREADME\n"
    tree = _tree_from_listing(gitdir, listing)
    who = ["-c", "user.name=Stock Git", "-c", "user.email=git@example.org"]
    commit = git(gitdir, *who, "commit-tree", tree, "-p", first, "-m", "by hand", input=b"").strip()
    git(gitdir, "update-ref", "refs/got/store", commit, first)
    for store in (a, b):
        assert store.get(("ops",), "z").value == {"v": 3}
        assert store.list_namespaces() == [("docs", "deep"), ("ops",)]
        assert _answers(store) == _truth(gitdir)
    # a rewound ref: the index goes back with it; a deleted ref: an empty store
    git(gitdir, "update-ref", "refs/got/store", first)
    assert a.get(("ops",), "z") is None and _answers(b) == _truth(gitdir)
    git(gitdir, "update-ref", "-d", "refs/got/store")
    assert a.search(()) == [] and b.list_namespaces() == []
    a.put(("new",), "k", {"v": 4})
    assert _answers(b) == {(("new",), "k"): {"v": 4}}


def _tree_from_listing(gitdir: Path, listing: str) -> str:
    """A tree from ``ls-tree -r`` lines, through a throwaway index file (stock git plumbing)."""
    index = gitdir.parent / "plumbing.index"
    env_git = ["git", f"--git-dir={gitdir}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_INDEX_FILE": str(index), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    subprocess.run([*env_git, "read-tree", "--empty"], env=env, check=True)
    subprocess.run([*env_git, "update-index", "--index-info"], env=env, input=listing.encode(), check=True)
    out = subprocess.run([*env_git, "write-tree"], env=env, check=True, capture_output=True).stdout.decode().strip()
    index.unlink()
    return out


def test_the_index_is_derived_delete_it_or_rebuild_it(tmp_path):
    gitdir = tmp_path / "d.git"
    store = GitStore(gitdir)
    _fill(store, users=3, per_user=4)
    files = sorted((gitdir / "got").glob("store-*.sqlite3"))
    assert len(files) == 1  # beside the core's index, in the git directory, never in a tree
    assert not any(p.endswith(".sqlite3") for p in _tree(gitdir))
    expected = _answers(store)
    store.close()
    for f in (gitdir / "got").glob("store-*.sqlite3*"):
        f.unlink()
    fresh = GitStore(gitdir)
    assert _answers(fresh) == expected == _truth(gitdir)
    assert fresh.list_namespaces() == [("users", f"u{u}", "memories") for u in range(3)]
    fresh.reindex()
    assert _answers(fresh) == expected


def test_a_planted_or_moved_item_file_is_a_typed_error(tmp_path):
    store = GitStore(tmp_path / "p.git")
    store.put(("docs",), "a", {"v": 1})
    data = store.repo.read_file(store.repo.tip(store.ref), item_path(("docs",), "a"))
    planted = item_path(("docs",), "b")
    store.repo.commit_files(store.ref, {planted: data}, "moved by hand\n")  # claims to be docs/a
    fresh = GitStore(tmp_path / "p.git")
    for read in (lambda: fresh.get(("docs",), "a"), lambda: fresh.search(()), lambda: fresh.list_namespaces()):
        with pytest.raises(CorruptRepositoryError, match="b.json"):
            read()
    store.repo.commit_files(store.ref, {planted: None}, "undo\n")
    assert fresh.get(("docs",), "a").value == {"v": 1}  # nothing stored was lost


_WRITER = textwrap.dedent(
    """
    import sys
    from got_integrations.langgraph import GitStore
    store = GitStore(sys.argv[1])
    for i in range(int(sys.argv[3])):
        store.put(("w", sys.argv[2]), f"k{i % 7}", {"i": i, "who": sys.argv[2]})
        if i % 5 == 4:
            store.delete(("w", sys.argv[2]), f"k{(i * 3) % 7}")
    """
)


@pytest.mark.slow
def test_readers_racing_writer_processes_agree_with_git(tmp_path):
    gitdir = tmp_path / "race.git"
    reader = GitStore(gitdir)
    reader.put(("w", "seed"), "k", {"i": -1})
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(gitdir), name, "60"]) for name in ("p1", "p2")]
    checked = 0
    while any(w.poll() is None for w in writers) or not checked:
        before = reader.repo.tip(reader.ref)
        answer = _answers(reader)
        namespaces = reader.list_namespaces()
        if reader.repo.tip(reader.ref) == before:  # nothing moved during the reads: compare with git
            truth = _truth(gitdir, before)
            assert answer == truth
            assert namespaces == sorted({ns for ns, _ in truth})
            checked += 1
    assert all(w.wait() == 0 for w in writers)
    assert _answers(reader) == _truth(gitdir) and _answers(GitStore(gitdir)) == _truth(gitdir)
    ok, out = fsck_clean(gitdir)
    assert ok, out


# ---------------------------------------------------------------------------- encryption at rest
def test_an_encrypted_store_index_holds_no_value_and_filters_still_work(tmp_path):
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16)
    secret = "tangerine-7Qz-secret"
    for name, options in (("plain", {}), ("sealed", {"serde": serde})):
        gitdir = tmp_path / f"{name}.git"
        store = GitStore(gitdir, **options)
        store.batch([PutOp(("team", f"t{i}"), "note", {"text": secret, "n": i}) for i in range(4)])
        hits = store.search(("team",), filter={"n": {"$gt": 1}, "text": secret})
        assert sorted(h.namespace for h in hits) == [("team", "t2"), ("team", "t3")]
        assert store.list_namespaces() == [("team", f"t{i}") for i in range(4)]
        index = b"".join(p.read_bytes() for p in (gitdir / "got").glob("store-*.sqlite3*"))
        assert (secret.encode() in index) == (name == "plain"), name  # the scan can fail
    assert GitStore(tmp_path / "sealed.git", serde=serde).get(("team", "t1"), "note").value["n"] == 1


# ---------------------------------------------------------------------------- SQL filters are a superset
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.1, 0.30000000000000004, 2.5, 1e16, -0.0, 2**53 + 1, 10**20]),
    st.sampled_from(["", "3", " 2 ", "inf", "1_0", "a", "ü", "[1]", "true"]),
)
VALUES = st.one_of(
    SCALARS,
    SCALARS,
    st.lists(SCALARS, max_size=2),
    st.dictionaries(st.sampled_from("ab"), SCALARS, max_size=2),
    st.dictionaries(st.sampled_from("ab"), st.lists(SCALARS, max_size=2), max_size=1),
)
OPS = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])
WANTED = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=2),
    st.dictionaries(OPS, SCALARS, min_size=1, max_size=2),
    st.dictionaries(OPS, SCALARS, min_size=1, max_size=2),
    st.dictionaries(st.sampled_from("ab"), SCALARS | st.dictionaries(OPS, SCALARS, min_size=1), max_size=2),
)
FIELDS = st.sampled_from(["x", "y", "we-ird key"])


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.dictionaries(FIELDS, VALUES, max_size=3), min_size=8, max_size=16),
    filters=st.lists(st.dictionaries(FIELDS, WANTED, min_size=1, max_size=2), min_size=4, max_size=10),
)
def test_sql_filters_never_drop_a_match(tmp_path_factory, values, filters):
    store = GitStore(tmp_path_factory.mktemp("f") / "f.git")
    store.batch([PutOp(("n", f"s{i % 2}"), f"k{i}", v) for i, v in enumerate(values)])
    for wanted in filters:
        expected = sorted(f"k{i}" for i, v in enumerate(values) if _python_match(v, wanted))
        for prefix in ((), ("n",), ("n", "s0")):
            got = sorted(h.key for h in store.search(prefix, filter=wanted, limit=100))
            want = [k for k in expected if len(prefix) < 2 or int(k[1:]) % 2 == 0]
            assert got == want, (wanted, prefix)


_EDGE_SCALARS = [None, True, False, 0, 1, -2, 3, 0.1, 0.30000000000000004, 2.5, 1e16, -0.0, 2**53 + 1, 10**20]
_EDGE_SCALARS += ["", "3", " 2 ", "inf", "1_0", "a", "ü", "[1]", "true", "1"]
_EDGE_VALUES = [*_EDGE_SCALARS, [1], [1, "a"], [], {"a": 1}, {"a": "3"}, {"a": None}, {}, [[1]]]


def test_sql_filters_agree_with_python_on_every_edge_value():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        store = GitStore(Path(tmp) / "e.git")
        ops = [PutOp(("e",), f"k{i}", {"x": v}) for i, v in enumerate(_EDGE_VALUES)]
        store.batch([*ops, PutOp(("e",), "missing", {"y": 1})])
        values = {op.key: op.value for op in ops} | {"missing": {"y": 1}}
        wanted_list = [{"x": v} for v in _EDGE_VALUES]
        wanted_list += [{"x": {op: v}} for op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte") for v in _EDGE_SCALARS]
        wanted_list += [{"x": {"a": {"$gt": 2}}}, {"x": {"$gt": 0, "$lt": 3}}, {"x": [1, "a"]}, {"x": {}}]
        for wanted in wanted_list:
            expected = sorted(k for k, v in values.items() if _python_match(v, wanted))
            got = sorted(h.key for h in store.search(("e",), filter=wanted, limit=1000))
            assert got == expected, wanted


def _python_match(value, wanted):
    try:
        return matches_filter(json.loads(json.dumps(value)), wanted)
    except OverflowError:
        return False


def test_a_batch_of_reads_sees_one_tip(tmp_path):
    store = GitStore(tmp_path / "b.git")
    _fill(store, users=2, per_user=3)
    ops = [GetOp(("users", "u0", "memories"), "m1"), SearchOp(("users",), limit=100), PutOp(("x",), "k", {"v": 1})]
    got, hits, _ = store.batch(ops)
    assert got.value["n"] == 1 and len(hits) == 6 and store.get(("x",), "k").value == {"v": 1}
