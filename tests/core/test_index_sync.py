"""The derived index syncs once per query, incrementally, and never disagrees with git.

Issue 13, part A. What is checked here, against real repositories and the real ``git``:

* a query syncs at most once; a query after our own write applies that write without
  listing every ref, re-peeling every tag or rewriting the tags table; a new process's
  first query does not resync at all when nothing moved;
* our own writes are learnt from the write itself (even where directory stamps would
  not show them), changes by stock git from the refs observation, ``packed-refs``
  rewrites by a line diff; a change within the file system's clock resolution is not
  missed (the racy-git rule);
* processes writing through our API and through stock git race readers in another
  process; every answer a reader got while the refs held still is compared with a
  fresh index built on a snapshot of exactly those refs.

The SQL each sync runs is observed with SQLite's own trace hook.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from got_core import Node, ReasoningRepo
from got_core.storage.git import GitRepo
from got_core.storage.index import DerivedIndex

TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))
ENV = {
    "GIT_AUTHOR_NAME": "stock",
    "GIT_AUTHOR_EMAIL": "stock@example.org",
    "GIT_COMMITTER_NAME": "stock",
    "GIT_COMMITTER_EMAIL": "stock@example.org",
}


def node(thought: str, score: float = 0.5, outcome: str = "success") -> Node:
    return Node(thought, scores={"s_comb": score}, problem_id="p", outcome=outcome, trace=[{"step": 1}])


def stock(gitdir: Path, *args: str, input: bytes | None = None) -> str:
    """The real git, with an identity (for commit-tree, tag, notes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(ENV, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    proc = subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, env=env, input=input)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def traced(repo: ReasoningRepo) -> list[str]:
    """Every SQL statement the repository's index runs from now on."""
    repo.grep("open the index")
    index = repo._index
    assert index is not None
    statements: list[str] = []
    index.db.set_trace_callback(statements.append)
    return statements


def answers(repo: ReasoningRepo) -> dict[str, object]:
    """What the index answers: greps, a ranked search, pickaxe, tags, a node-id lookup."""
    hits = repo.search("alpha beta", k=5)
    out: dict[str, object] = {
        "grep": sorted([c.oid, sorted(c.tags), c.score] for c in repo.grep("alpha")),
        "grep_stock": sorted(c.oid for c in repo.grep("stock", refs=["stock"])) if "stock" in repo.branches() else [],
        "search": [[h.oid, h.score, h.tag, h.rho] for h in hits],
        "search_master": [[h.oid, h.rho] for h in repo.search("beta gamma", k=5, refs=["master"])],
        "pickaxe": sorted(c.oid for c in repo.pickaxe("gamma")),
        "tagged": sorted(c.oid for c in repo.tagged("success_")),
        "marks": sorted(c.oid for c in repo.tagged("mark-")),
    }
    out["node"] = [repo.resolve(h.node_id) for h in hits[:2] if h.node_id]
    return out


def snapshot_repo(source: Path, refs: dict[str, str], where: Path) -> ReasoningRepo:
    """A repository holding exactly ``refs``, reading ``source``'s objects (git alternates)."""
    init = ReasoningRepo.init(where)
    (where / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (where / "objects" / "info" / "alternates").write_text(str(source / "objects") + "\n")
    lines = "".join(f"{oid} {name}\n" for name, oid in sorted(refs.items()))
    (where / "packed-refs").write_text("# pack-refs with: sorted \n" + lines)
    init.close()
    return ReasoningRepo(where)


def agrees_with_fresh_index(repo: ReasoningRepo, tmp_path: Path, label: str) -> None:
    fresh = snapshot_repo(repo.gitdir, repo.refs(), tmp_path / f"fresh-{label}.git")
    assert answers(repo) == answers(fresh), label
    fresh.close()


# ---------------------------------------------------------------- one sync, incremental


def test_a_query_after_a_write_syncs_once_and_touches_only_what_moved(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(40):
        repo.commit_node(node(f"alpha history {i}", i / 40))
    repo.maintenance()  # 40 tags packed: a full resync would list and peel them all
    statements = traced(repo)
    repo.grep("alpha")
    assert not any(s.startswith("BEGIN") for s in statements), "a query with nothing moved must not resync"

    statements.clear()
    repo.commit_node(node("alpha fresh thought", 0.9))  # syncs in the write: a query ran since the last
    assert [c.message.split("\n")[0] for c in repo.grep("fresh")] != []
    begins = [s for s in statements if s.startswith("BEGIN")]
    assert begins == ["BEGIN IMMEDIATE"], "exactly one sync per write and query"
    assert not any(s.startswith("DELETE FROM tags") for s in statements), "the tags table is never rewritten"
    assert sum(s.startswith("INSERT OR REPLACE INTO tags") for s in statements) == 1
    assert "SELECT name, oid FROM refs" not in statements, "our own write must not list every ref"
    assert sum(s.startswith("INSERT INTO commits") for s in statements) == 1

    statements.clear()
    repo.search("alpha fresh", k=3)  # may look again at a stamp the clock had not passed, applies nothing
    assert not any(s.startswith(("INSERT INTO commits", "INSERT OR REPLACE INTO tags", "DELETE")) for s in statements)
    assert sum(s.startswith("BEGIN") for s in statements) <= 1
    agrees_with_fresh_index(repo, tmp_path, "after-write")


def test_a_query_after_our_own_write_reads_no_object_from_git(tmp_path, monkeypatch):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(5):
        repo.commit_node(node(f"alpha history {i}", i / 10))
    repo.grep("alpha")
    index = repo._index
    assert index is not None
    reads: list[str] = []
    for name in ("read_commit", "peel_to_commit", "read_blob", "blob_size", "walk", "changed_tree_paths"):
        real = getattr(index.git, name)

        def spy(*args: object, _real=real, _name=name) -> object:  # counts, then runs the real read
            reads.append(_name)
            return _real(*args)

        monkeypatch.setattr(index.git, name, spy)
    fresh = repo.commit_node(node("alpha fresh thought", 0.9)).oid  # a commit, its note and its tag
    repo.set_notes({fresh: {"s_comb": 0.75}})  # a second notes commit, a new note blob
    found = {c.oid: (c.score, c.tags) for c in repo.grep("fresh")}
    assert reads == [], "the sync after our own write learns the commit, note and tag from the write"
    assert found == {fresh: (0.75, (f"success_{repo.read_node(fresh).node_id}",))}
    monkeypatch.undo()
    agrees_with_fresh_index(repo, tmp_path, "no-reads")


def test_a_new_process_first_query_does_not_resync_when_nothing_moved(tmp_path):
    path = tmp_path / "r.git"
    repo = ReasoningRepo.init(path)
    for i in range(10):
        repo.commit_node(node(f"alpha cold {i}"))
    repo.grep("alpha")
    repo.close()
    index = DerivedIndex(GitRepo(path, create=False), "refs/notes/got")  # what a new process opens
    statements: list[str] = []
    index.db.set_trace_callback(statements.append)
    index.sync()
    assert not any(s.startswith("BEGIN") for s in statements), statements
    assert len(index.grep("alpha", fixed=True, ignore_case=False, refs=None)) == 10
    index.close()


def test_a_new_process_after_a_pack_compares_packed_refs_digests_not_every_ref(tmp_path):
    path = tmp_path / "r.git"
    repo = ReasoningRepo.init(path)
    repo.grep("alpha")  # the index is open: it hears of the writes
    for i in range(80):  # 80 loose tags: the next sync packs them (more than 64 in one directory)
        repo.commit_node(node(f"alpha packed {i}"))
    repo.grep("alpha")  # this process exits right after the sync that packed
    assert (path / "packed-refs").exists()
    repo.close()

    def first_sync(label: str) -> list[str]:
        index = DerivedIndex(GitRepo(path, create=False), "refs/notes/got")  # what a new process opens
        statements: list[str] = []
        index.db.set_trace_callback(statements.append)
        index.sync()
        assert len(index.grep("alpha", fixed=True, ignore_case=False, refs=None)) == 80 + extra, label
        index.close()
        return statements

    extra = 0
    full_listing = "SELECT name, oid FROM refs"
    assert full_listing not in first_sync("after our pack")
    stock(path, "tag", "mark-a", "master")
    stock(path, "pack-refs", "--all")  # packed-refs with bytes no sync has read
    assert full_listing in first_sync("after stock git packed")  # then every ref is compared once
    assert full_listing not in first_sync("nothing new")
    reopened = ReasoningRepo(path)
    agrees_with_fresh_index(reopened, tmp_path, "digest")
    reopened.close()


def test_own_writes_are_learnt_from_the_write_even_when_directory_stamps_hide_them(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(node("alpha before"))
    dirs = [repo.gitdir / "refs", *(repo.gitdir / "refs" / d for d in ("heads", "notes", "tags"))]
    old = 1_600_000_000_000_000_000  # long ago: the stamps are trusted
    for d in dirs:
        os.utime(d, ns=(old, old))
    assert len(repo.grep("alpha")) == 1  # the observation now holds these stamps
    written = repo.commit_node(node("alpha after", 0.7))
    for d in dirs:  # a file system whose directory mtimes did not move (coarse, or lying)
        os.utime(d, ns=(old, old))
    assert written.oid in {c.oid for c in repo.grep("alpha after")}, "the write reported itself"
    assert written.oid in {c.oid for c in repo.tagged("success_")}
    assert repo.search("alpha after", k=1)[0].score == 0.7
    agrees_with_fresh_index(repo, tmp_path, "own-write")


def test_a_change_within_the_clock_resolution_is_not_missed(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    base = repo.commit_node(node("alpha base")).oid
    heads = repo.gitdir / "refs" / "heads"
    future = (os.stat(heads).st_mtime_ns // 10**9 + 3600) * 10**9
    os.utime(heads, ns=(future, future))  # a stamp the clock has not passed: racy
    assert len(repo.grep("alpha")) == 1
    stamp = os.stat(heads)
    # another writer, in the same clock tick: the directory's stamp does not change
    stock(repo.gitdir, "update-ref", "refs/heads/side", base)
    os.utime(heads, ns=(future, future))
    assert (os.stat(heads).st_ino, os.stat(heads).st_size) == (stamp.st_ino, stamp.st_size)
    side = stock(repo.gitdir, "commit-tree", "-p", base, "-m", "alpha from the side", f"{base}^{{tree}}").strip()
    stock(repo.gitdir, "update-ref", "refs/heads/side", side, base)
    os.utime(heads, ns=(future, future))
    assert {c.oid for c in repo.grep("from the side", refs=["side"])} == {side}


def test_stock_git_changes_are_applied_incrementally_tags_included(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    oids = [repo.commit_node(node(f"alpha gamma {i}", outcome="success" if i % 2 else "")).oid for i in range(12)]
    repo.grep("alpha")  # this process reads packed-refs from here on
    statements = traced(repo)
    steps = [
        ("tag", lambda: stock(repo.gitdir, "tag", "mark-a", oids[3])),
        ("annotated", lambda: stock(repo.gitdir, "tag", "-a", "-m", "why", "mark-b", oids[4])),
        ("pack", lambda: stock(repo.gitdir, "pack-refs", "--all")),
        ("delete-packed", lambda: stock(repo.gitdir, "tag", "-d", "mark-a")),
        ("branch", lambda: stock(repo.gitdir, "update-ref", "refs/heads/x/y", oids[5])),
        ("rewind", lambda: stock(repo.gitdir, "update-ref", "refs/heads/master", oids[8])),
        ("note", lambda: stock(repo.gitdir, "notes", "--ref=got", "add", "-f", "-m", '{"s_comb": 0.99}', oids[2])),
        ("repack", lambda: repo.maintenance()),
    ]
    for label, change in steps:
        change()
        statements.clear()
        agrees_with_fresh_index(repo, tmp_path, label)
        assert not any(s.startswith("DELETE FROM tags") and "WHERE" not in s for s in statements), label
        assert "SELECT name, oid FROM refs" not in statements, f"{label}: every ref was listed"
    assert {c.oid for c in repo.tagged("mark-")} == {oids[4]}
    assert repo.note_json(oids[2]) == {"s_comb": 0.99}
    assert oids[10] not in {c.oid for c in repo.grep("alpha", refs=["master"])}


def test_files_of_new_commits_are_indexed_when_pickaxe_first_asks(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(node("alpha gamma before"))
    assert len(repo.pickaxe("gamma before")) == 1
    statements = traced(repo)
    ours = repo.commit_node(node("alpha gamma ours")).oid
    base = repo.refs()["refs/heads/master"]
    blob = stock(repo.gitdir, "hash-object", "-w", "--stdin", input=b"gamma from stock\n").strip()
    listing = stock(repo.gitdir, "ls-tree", base) + f"100644 blob {blob}\tstock.txt\n"  # base's files, and one
    tree = stock(repo.gitdir, "mktree", input=listing.encode()).strip()
    theirs = stock(repo.gitdir, "commit-tree", "-p", base, "-m", "alpha stock", tree).strip()
    stock(repo.gitdir, "update-ref", "refs/heads/stock", theirs)
    assert {c.oid for c in repo.grep("alpha")} >= {ours, theirs}
    assert not any(s.startswith(("INSERT INTO changes", "INSERT INTO blobs")) for s in statements), (
        "a sync indexes messages, refs, tags and notes; files wait for pickaxe"
    )
    assert {c.oid for c in repo.pickaxe("gamma ours")} == {ours}
    assert {c.oid for c in repo.pickaxe("gamma from stock")} == {theirs}
    assert any(s.startswith("INSERT INTO changes") for s in statements)
    agrees_with_fresh_index(repo, tmp_path, "deferred-files")


def test_grep_sees_messages_waiting_for_the_trigram_batch_and_after_it(tmp_path):
    from got_core.storage.index_write import TRI_BATCH

    repo = ReasoningRepo.init(tmp_path / "r.git")
    statements = traced(repo)
    for n in range(TRI_BATCH + 3):
        repo.commit_node(node(f"alpha needle-{n:03d} gamma"))
        hits = {c.oid for c in repo.grep(f"needle-{n:03d}")}
        assert hits == set(stock(repo.gitdir, "log", "--all", "-F", f"--grep=needle-{n:03d}", "--format=%H").split())
        assert len(hits) == 1, n
    assert len(repo.grep("needle-")) == TRI_BATCH + 3
    inserts = [s for s in statements if s.startswith("INSERT INTO msg_tri")]
    assert len(inserts) == 1, "one batch, not a trigram segment per sync"
    index = repo._index
    assert index is not None
    assert index.db.execute("SELECT COUNT(*) FROM untri").fetchone()[0] < TRI_BATCH
    agrees_with_fresh_index(repo, tmp_path, "trigram-batch")


def test_our_notes_commits_are_applied_without_diffing_notes_trees(tmp_path, monkeypatch):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    oids = [repo.commit_node(node(f"alpha beta {i}", i / 10)).oid for i in range(4)]
    repo.grep("alpha")
    index = repo._index
    assert index is not None
    diffs: list[tuple[str | None, str]] = []
    real = index.git.changed_tree_paths

    def counted(old_tree: str | None, new_tree: str) -> list[tuple[str, str | None, str | None]]:
        diffs.append((old_tree, new_tree))
        return real(old_tree, new_tree)

    monkeypatch.setattr(index.git, "changed_tree_paths", counted)  # a spy: the real diff still runs
    fresh = repo.commit_node(node("alpha beta fresh", 0.95)).oid
    repo.set_notes({oids[1]: {"s_comb": 0.05}})
    assert repo.search("alpha beta fresh", k=1)[0].score == 0.95
    assert diffs == [], "our own notes commits carry their changes; the sync does not diff trees"
    # stock git writes a note between ours: the chain of known commits breaks, the trees are diffed
    stock(repo.gitdir, "notes", "--ref=got", "add", "-f", "-m", '{"s_comb": 0.5}', oids[2])
    repo.set_notes({oids[3]: {"s_comb": 0.25}})
    assert {c.oid: c.score for c in repo.grep("alpha beta")}[oids[2]] == 0.5
    assert diffs, "a notes commit we did not write is diffed"
    assert {c.oid: c.score for c in repo.grep("alpha beta")}[fresh] == 0.95
    agrees_with_fresh_index(repo, tmp_path, "notes-hints")


def test_a_query_word_sqlite_splits_is_no_error(tmp_path):
    # U+19B0 is a letter to Python and a mark to SQLite's tokenizer: the word is two tokens
    # there, and a phrase of two tokens is an error for the word index (detail=none); its
    # document frequency is 0 (no indexed term holds it), so it never reaches MATCH;
    # search still finds the commit by the text of its files
    repo = ReasoningRepo.init(tmp_path / "r.git")
    oid = repo.commit_node(node("alpha a\u19b0b beta")).oid
    assert [h.oid for h in repo.search("a\u19b0b alpha", k=3)] == [oid]
    assert [h.oid for h in repo.search("a\u19b0b", k=3)] == [oid]  # found by its text (pickaxe)


def test_a_writing_process_packs_loose_refs_before_directories_grow_long(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(90):  # every node gets a tag; the limit is 64 loose refs per directory here
        repo.commit_node(node(f"alpha tagged {i}"))
        repo.grep("tagged")
    loose = [p for p in (repo.gitdir / "refs" / "tags").iterdir() if not p.name.endswith(".lock")]
    assert (repo.gitdir / "packed-refs").exists()
    assert len(loose) <= 65, len(loose)
    assert len(repo.tagged("success_")) == 90
    agrees_with_fresh_index(repo, tmp_path, "packed")


# ---------------------------------------------------------------- racing writers and readers

#: Writers pause after each round until the test has seen every reader answer at the
#: still repository (``go-<round>`` in the barrier directory), then race on.
BARRIER = textwrap.dedent("""
    import os, time
    def barrier(where, who, rnd):
        open(os.path.join(where, f"{who}-{rnd}"), "w").close()
        while not os.path.exists(os.path.join(where, f"go-{rnd}")):
            time.sleep(0.01)
""")

OUR_WRITER = BARRIER + textwrap.dedent("""
    import sys
    from got_core import Node, ReasoningRepo
    path, worker, rounds, per, where = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    repo = ReasoningRepo(path)
    for rnd in range(rounds):
        for j in range(per):
            i = rnd * per + j
            ref = "master" if i % 3 == 0 else f"agents/{worker}"
            text = f"worker {worker} step {i} alpha{i % 7} beta" + (" gamma" if i % 4 == 0 else "")
            n = repo.commit_node(Node(text, scores={"s_comb": (i % 10) / 10}, problem_id=f"w{worker}",
                                      outcome=("success", "failed", "")[i % 3], trace=[{"i": i}]), ref=ref)
            if i % 4 == 1:
                repo.set_note(n.oid, {"s_comb": 0.05 * (i % 20)})
            if i % 5 == 2:
                repo.tag(f"mark-{worker}-{i}", n.oid)
            if i % 6 == 5:
                repo.grep("alpha")  # writers read too (their own moves, and everyone else's)
        barrier(where, f"w{worker}", rnd)
""")

STOCK_WRITER = BARRIER + textwrap.dedent("""
    import subprocess, sys
    path, rounds, per, where = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="s", GIT_AUTHOR_EMAIL="s@x", GIT_COMMITTER_NAME="s", GIT_COMMITTER_EMAIL="s@x",
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    def git(*args, check=True):
        p = subprocess.run(["git", f"--git-dir={path}", *args], capture_output=True, env=env, text=True)
        if check and p.returncode:
            raise SystemExit(p.stderr)
        return p.stdout.strip()
    tree = git("hash-object", "-t", "tree", "-w", "/dev/null")  # the empty tree
    tip = None
    for rnd in range(rounds):
        for j in range(per):
            i = rnd * per + j
            msg = f"stock commit {i} alpha{i % 5} beta gamma"
            tip = git("commit-tree", tree, "-m", msg, *(["-p", tip] if tip else []))
            git("update-ref", "refs/heads/stock", tip)
            heads = git("for-each-ref", "--format=%(objectname)", "refs/heads/agents/").split()
            if heads and i % 2 == 0:
                git("tag", "-f", f"mark-stock-{i % 4}", heads[i % len(heads)])
            if i % 7 == 3:
                git("tag", "-d", f"mark-stock-{(i + 1) % 4}", check=False)
            if i % 9 == 4:
                git("pack-refs", "--all", check=False)  # may meet a writer's lock: git then gives up
        barrier(where, "stock", rnd)
""")

READER = textwrap.dedent("""
    import json, os, sys
    from got_core import ReasoningRepo
    from got_core.storage.git import GitRepo
    # ANSWERS
    path, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
    repo = ReasoningRepo(path)  # this process never writes: it learns every move from the refs observation
    refs = GitRepo(path, create=False)
    with open(out, "w") as f:
        while True:
            done = os.path.exists(stop)
            before = refs.list_refs()
            got = answers(repo)
            if refs.list_refs() == before:  # the refs held still while it asked
                f.write(json.dumps({"refs": before, "answers": got}) + "\\n")
                f.flush()
            if done:
                break
""").replace("# ANSWERS", inspect.getsource(answers))  # the same questions as the test asks the fresh index


def _wait_for(check, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def _recorded(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


@pytest.mark.slow
@pytest.mark.parametrize("watch", ["always", "0"], ids=["inotify-watches", "stamps-only"])
def test_racing_writers_and_readers_never_disagree_with_a_fresh_index(tmp_path, monkeypatch, watch):
    monkeypatch.setenv("GOT_REF_WATCH", watch)  # the writers and readers inherit it
    path = tmp_path / "race.git"
    seed = ReasoningRepo.init(path)
    seed.commit_node(node("seed alpha beta gamma"))
    seed.close()
    stop, where = tmp_path / "stop", tmp_path / "barrier"
    where.mkdir()
    rounds, per = 4, 9
    logs = [tmp_path / f"r{n}.jsonl" for n in range(2)]
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(path), str(log), str(stop)]) for log in logs]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", OUR_WRITER, str(path), str(w), str(rounds), str(per), str(where)],
            stderr=subprocess.PIPE,
        )
        for w in range(3)
    ]
    writers.append(
        subprocess.Popen(
            [sys.executable, "-c", STOCK_WRITER, str(path), str(rounds), str(per), str(where)], stderr=subprocess.PIPE
        )
    )
    who = [f"w{w}" for w in range(3)] + ["stock"]
    refs = GitRepo(path, create=False)
    for rnd in range(rounds):
        _wait_for(
            lambda: all((where / f"{x}-{rnd}").exists() for x in who) or any(p.poll() for p in writers),
            f"the writers to finish round {rnd}",
        )
        failed = [p for p in writers if p.poll()]
        assert not failed, failed[0].communicate()[1].decode() if failed else ""
        still = refs.list_refs()
        for log in logs:  # every reader answers at least once while the repository holds still
            _wait_for(lambda: any(r["refs"] == still for r in _recorded(log)), f"{log.name} at round {rnd}")
        (where / f"go-{rnd}").touch()
    for p in writers:
        _out, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, err.decode()
    stop.touch()
    for p in readers:
        assert p.wait(timeout=TIMEOUT) == 0

    records = [rec for log in logs for rec in _recorded(log)]
    distinct: dict[str, dict] = {}
    for rec in records:
        distinct.setdefault(json.dumps(rec["refs"], sort_keys=True), rec)
    assert len(distinct) >= rounds
    states = list(distinct.values())
    sample = [*states[:: max(1, len(states) // 8)], states[-1]]
    for i, rec in enumerate(sample):
        fresh = snapshot_repo(path, rec["refs"], tmp_path / f"snap{i}.git")
        expected = json.loads(json.dumps(answers(fresh)))
        for key, value in expected.items():
            assert rec["answers"][key] == value, (i, key)
        fresh.close()
    # every answer given for the same refs is the same (all of them, not only the sampled ones)
    for rec in records:
        assert rec["answers"] == distinct[json.dumps(rec["refs"], sort_keys=True)]["answers"]
