"""Hostile peers, fetched refs and bundles: built with raw object writes, refused whole.

Every attack is a real repository or bundle file whose trees hold what our own writer
refuses (``..``, spellings of ``.git``, ``/`` inside a name, bad modes, huge blobs, deep
nesting). Each test shows what the victim keeps: its refs and every file of its git
directory unchanged, no new object, ``git fsck --strict`` clean, nothing executed (the
peer's and the victim's planted hooks and config would create a sentinel file), and a
typed error from our tree only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest
from gitcli import fsck_clean, git

from got_core import (
    CorruptRepositoryError,
    GotError,
    Identity,
    Node,
    ReasoningRepo,
    RemoteError,
    UntrustedContentError,
)
from got_core.cli import main
from got_core.repo.sharing import InboundLimits, merge, unbundle, verify_bundle

TREE = pygit2.enums.ObjectType.TREE
HOOKS = (
    "pre-receive",
    "update",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-checkout",
    "post-merge",
    "pre-push",
    "fsmonitor-watchman",
    "post-index-change",
)


# ---------------------------------------------------------------------------- builders
def raw_tree(r: pygit2.Repository, entries: list[tuple[bytes, bytes, str]]) -> str:
    """A tree object written byte for byte (mode, name, oid): no name or mode checks at all."""
    data = b"".join(mode + b" " + name + b"\x00" + bytes.fromhex(oid) for mode, name, oid in entries)
    return str(r.odb.write(TREE, data))


def raw_commit(r: pygit2.Repository, tree: str, parents: list[str], message: str) -> str:
    """A commit object written byte for byte (libgit2 would parse, and refuse, some trees)."""
    who = b"mallory <m@example.org> 1700000000 +0000"
    data = b"tree " + tree.encode() + b"\n" + b"".join(b"parent " + p.encode() + b"\n" for p in parents)
    data += b"author " + who + b"\ncommitter " + who + b"\n\n" + message.encode()
    return str(r.odb.write(pygit2.enums.ObjectType.COMMIT, data))


def plant_traps(gitdir: Path, sentinel: Path) -> None:
    """Hooks and config that would create ``sentinel`` if git ever ran them for us."""
    cmd = f"touch {sentinel}"
    hooks = gitdir / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in HOOKS:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\n{cmd}\n")
        hook.chmod(0o755)
    with (gitdir / "config").open("a") as f:
        f.write(
            f"[core]\n\tfsmonitor = {cmd}\n\thooksPath = {hooks}\n\tsshCommand = {cmd}\n"
            f"\talternateRefsCommand = {cmd}\n\tgitProxy = {cmd}\n"
            f"[uploadpack]\n\tpackObjectsHook = {cmd}\n"
            f"[gc]\n\tauto = 1\n[maintenance]\n\tauto = true\n"
        )


@pytest.fixture
def sentinel(tmp_path):
    path = tmp_path / "SENTINEL-code-ran"
    yield path
    assert not path.exists(), "a planted hook or config command was executed"


def make(tmp_path: Path, name: str) -> ReasoningRepo:
    return ReasoningRepo.init(tmp_path / f"{name}.git", identity=Identity(name, f"{name}@example.org"))


def hostile_peer(tmp_path: Path, sentinel: Path, build, *, ref: str = "refs/heads/memory") -> tuple[ReasoningRepo, str]:
    """A peer with a clean memory branch (also copied to ``clean.git``), then a commit
    (on ``ref``) whose tree ``build(r)`` wrote raw; its hooks and config are booby-trapped."""
    peer = make(tmp_path, "mallory")
    base = peer.commit_files("memory", {"lessons/units.md": "Check units first.\n"}, "lesson: units\n")
    clean = tmp_path / "clean.git"
    git(clean, "init", "-q", "--bare", str(clean))
    peer.push(clean, branches=["memory"])
    r = pygit2.Repository(str(peer.gitdir))
    tree = build(r)
    evil = raw_commit(r, tree, [base] if ref == "refs/heads/memory" else [], "innocent lesson\n")
    r.references.create(ref, evil, force=True)
    plant_traps(peer.gitdir, sentinel)
    return peer, evil


def victim_of(tmp_path: Path, peer: ReasoningRepo, sentinel: Path) -> ReasoningRepo:
    """A victim with its own history that already fetched the peer's clean branch
    (``refs/remotes/mallory/memory``); its own hooks and config are booby-trapped too."""
    v = make(tmp_path, "victim")
    v.commit_node(Node("my own thought", scores={"s_comb": 0.6}))
    v.commit_files("memory", {"lessons/mine.md": "Draw the figure.\n"}, "lesson: mine\n")
    v.fetch(tmp_path / "clean.git", name="mallory")
    assert v.git.ref_target("refs/remotes/mallory/memory")
    plant_traps(v.gitdir, sentinel)
    return v


def snapshot(gitdir: Path) -> dict[str, str]:
    """Every file of a git directory -> sha256 of its bytes (refs, objects, packs, config)."""
    return {
        str(p.relative_to(gitdir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(gitdir.rglob("*"))
        if p.is_file()
    }


def assert_untouched(v: ReasoningRepo, before: dict[str, str], evil: str | None = None) -> None:
    assert snapshot(v.gitdir) == before  # refs, packs, loose objects: byte for byte as they were
    if evil is not None:
        assert not v.git.has_object(evil)
    clean, out = fsck_clean(v.gitdir)
    assert clean, out


# ---------------------------------------------------------------------------- hostile trees
def _blob(r, data=b"[core]\n\tfsmonitor = touch pwned\n"):
    return str(r.create_blob(data))


def _nested(r, name: bytes):
    inner = raw_tree(r, [(b"100644", b"config", _blob(r))])
    return raw_tree(r, [(b"40000", name, inner), (b"100644", b"ok.md", _blob(r, b"fine\n"))])


ATTACKS = {
    "dotdot": lambda r: _nested(r, b".."),
    "dot": lambda r: _nested(r, b"."),
    "dotgit": lambda r: _nested(r, b".git"),
    "DOTGIT": lambda r: _nested(r, b".GIT"),
    "Dotgit": lambda r: _nested(r, b".Git"),
    "ntfs-trailing-dot": lambda r: _nested(r, b".git. "),
    "ntfs-shortname": lambda r: _nested(r, b"GIT~1"),
    "ntfs-stream": lambda r: _nested(r, b".git::$INDEX_ALLOCATION"),
    "hfs-ignorable": lambda r: _nested(r, ".g\u200cit".encode()),
    "full-path": lambda r: raw_tree(r, [(b"100644", b"lessons/evil.md", _blob(r))]),
    "absolute": lambda r: raw_tree(r, [(b"100644", b"/etc/evil", _blob(r))]),
    "backslash": lambda r: raw_tree(r, [(b"100644", b"..\\..\\evil", _blob(r))]),
    "long-name": lambda r: raw_tree(r, [(b"100644", b"n" * 300, _blob(r))]),
    "bad-mode": lambda r: raw_tree(r, [(b"100664", b"a.md", _blob(r))]),
    "setuid-mode": lambda r: raw_tree(r, [(b"104755", b"a.md", _blob(r))]),
    "zero-padded-mode": lambda r: raw_tree(r, [(b"040000", b"d", raw_tree(r, [(b"100644", b"a", _blob(r))]))]),
    "duplicate-entries": lambda r: raw_tree(r, [(b"100644", b"a", _blob(r)), (b"100644", b"a", _blob(r))]),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_fetch_refuses_trees_git_fsck_rejects_and_keeps_the_victim_as_it_was(tmp_path, sentinel, attack):
    peer, evil = hostile_peer(tmp_path, sentinel, ATTACKS[attack])
    v = victim_of(tmp_path, peer, sentinel)
    before = snapshot(v.gitdir)
    with pytest.raises(UntrustedContentError) as info:
        v.fetch(peer.gitdir, name="mallory")
    assert "nothing was changed" in str(info.value) and "\n" not in str(info.value)
    assert_untouched(v, before, evil)


def test_fetching_one_clean_branch_takes_nothing_of_a_hostile_one(tmp_path, sentinel):
    # libgit2's local transport sends every object of the peer; only what the fetched
    # refs reach may stay (today the rest lands as dangling objects git fsck rejects).
    peer, evil = hostile_peer(tmp_path, sentinel, ATTACKS["dotdot"], ref="refs/heads/evil")
    v = victim_of(tmp_path, peer, sentinel)
    peer.commit_files("memory", {"lessons/more.md": "More.\n"}, "lesson: more\n")
    v.fetch(peer.gitdir, name="mallory", branches=["memory"], tags=False, notes=False)
    assert v.git.ref_target("refs/remotes/mallory/memory") == peer.tip("memory")
    assert not v.git.has_object(evil)
    clean, out = fsck_clean(v.gitdir)
    assert clean, out


@pytest.mark.parametrize("attack", ["dotdot", "DOTGIT", "full-path", "bad-mode"])
def test_a_hostile_tree_behind_a_tag_or_a_notes_ref_is_refused_too(tmp_path, sentinel, attack):
    for ref in ("refs/tags/success_evil", "refs/notes/got"):
        sub = tmp_path / ref.rsplit("/", 1)[1]
        sub.mkdir()
        peer, evil = hostile_peer(sub, sentinel, ATTACKS[attack], ref=ref)
        v = victim_of(sub, peer, sentinel)
        before = snapshot(v.gitdir)
        with pytest.raises(UntrustedContentError):
            v.fetch(peer.gitdir, name="mallory")
        assert_untouched(v, before, evil)


def test_the_refusal_names_the_path_object_and_rule(tmp_path, sentinel):
    peer, evil = hostile_peer(tmp_path, sentinel, ATTACKS["DOTGIT"])
    v = victim_of(tmp_path, peer, sentinel)
    with pytest.raises(UntrustedContentError) as info:
        v.fetch(peer.gitdir, name="mallory")
    err = info.value
    assert err.path == ".GIT" and err.limit is None and err.oid
    assert ".GIT" in str(err) and f"commit {evil}" in str(err) and "'.git'" in str(err)


def test_a_100_mb_blob_is_refused_naming_the_file_the_limit_and_the_knob(tmp_path, sentinel):
    def build(r):
        return raw_tree(r, [(b"100644", b"weights.bin", str(r.create_blob(bytes(100 * 1024 * 1024))))])

    peer, evil = hostile_peer(tmp_path, sentinel, build)
    v = victim_of(tmp_path, peer, sentinel)
    before = snapshot(v.gitdir)
    with pytest.raises(UntrustedContentError) as info:
        v.fetch(peer.gitdir, name="mallory")
    err = info.value
    assert err.limit == "max_blob_bytes" and err.path == "weights.bin"
    assert "weights.bin" in str(err) and "max_blob_bytes=33,554,432" in str(err) and "--max-blob-bytes" in str(err)
    assert_untouched(v, before, evil)


def test_a_3000_level_tree_is_refused_without_recursing(tmp_path, sentinel):
    def build(r):
        t = raw_tree(r, [(b"100644", b"leaf.md", _blob(r, b"deep\n"))])
        for _ in range(3000):
            t = raw_tree(r, [(b"40000", b"d", t)])
        return t

    peer, evil = hostile_peer(tmp_path, sentinel, build)
    v = victim_of(tmp_path, peer, sentinel)
    before = snapshot(v.gitdir)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the walk must not recurse per level
    try:
        with pytest.raises(UntrustedContentError) as info:
            v.fetch(peer.gitdir, name="mallory")
    finally:
        sys.setrecursionlimit(limit)
    assert info.value.limit == "max_tree_depth" and "max_tree_depth=64" in str(info.value)
    assert_untouched(v, before, evil)


def test_a_deep_tree_shared_many_times_is_walked_once(tmp_path, sentinel):
    # 40 levels, each holding its child twice: 2**40 paths, 40 distinct trees.
    def build(r):
        t = raw_tree(r, [(b"100644", b"leaf.md", _blob(r, b"x\n"))])
        for _ in range(40):
            t = raw_tree(r, [(b"40000", b"a", t), (b"40000", b"b", t)])
        return t

    peer, evil = hostile_peer(tmp_path, sentinel, build)
    v = victim_of(tmp_path, peer, sentinel)
    before = snapshot(v.gitdir)
    with pytest.raises(UntrustedContentError) as info:
        v.fetch(peer.gitdir, name="mallory", limits=InboundLimits(max_tree_depth=40))
    assert info.value.limit == "max_tree_depth"
    assert_untouched(v, before, evil)
    v.fetch(peer.gitdir, name="mallory")  # 41 components, within the default limits: accepted, and quickly
    assert v.git.ref_target("refs/remotes/mallory/memory") == evil


def test_an_over_long_path_is_refused(tmp_path, sentinel):
    def build(r):
        t = raw_tree(r, [(b"100644", b"leaf.md", _blob(r, b"x\n"))])
        for i in range(40):  # 40 components of 120 bytes: a 4,800-byte path, depth within the limit
            t = raw_tree(r, [(b"40000", (b"%03d" % i) * 40, t)])
        return t

    peer, evil = hostile_peer(tmp_path, sentinel, build)
    v = victim_of(tmp_path, peer, sentinel)
    before = snapshot(v.gitdir)
    with pytest.raises(UntrustedContentError) as info:
        v.fetch(peer.gitdir, name="mallory")
    assert info.value.limit == "max_path_bytes" and "--max-path-bytes" in str(info.value)
    assert_untouched(v, before, evil)


def test_object_count_and_byte_limits_stop_the_transfer(tmp_path, sentinel):
    def build(r):
        return raw_tree(r, [(b"100644", b"f%03d.md" % i, _blob(r, os.urandom(2000))) for i in range(50)])

    peer, evil = hostile_peer(tmp_path, sentinel, build)
    v = victim_of(tmp_path, peer, sentinel)
    before = snapshot(v.gitdir)
    for limits, knob in (
        (InboundLimits(max_objects=20), "max_objects"),
        (InboundLimits(max_total_bytes=50_000), "max_total_bytes"),
    ):
        with pytest.raises(UntrustedContentError) as info:
            v.fetch(peer.gitdir, name="mallory", limits=limits)
        assert info.value.limit == knob and knob in str(info.value)
        assert_untouched(v, before, evil)
    # the same peer within the default limits is fine: the knobs are what refused it
    v.fetch(peer.gitdir, name="mallory")
    assert v.git.ref_target("refs/remotes/mallory/memory") == evil
    assert fsck_clean(v.gitdir)[0]


def test_raising_a_limit_lets_a_trusted_big_file_in(tmp_path, sentinel):
    def build(r):
        return raw_tree(r, [(b"100644", b"data.bin", str(r.create_blob(os.urandom(300_000))))])

    peer, evil = hostile_peer(tmp_path, sentinel, build)
    v = victim_of(tmp_path, peer, sentinel)
    with pytest.raises(UntrustedContentError):
        v.fetch(peer.gitdir, name="mallory", limits=InboundLimits(max_blob_bytes=100_000))
    v.fetch(peer.gitdir, name="mallory", limits=InboundLimits(max_blob_bytes=400_000))
    assert v.git.ref_target("refs/remotes/mallory/memory") == evil


def test_names_git_allows_come_in_and_the_victim_owns_every_object(tmp_path, sentinel):
    # Not UTF-8, but valid in git (git fsck --strict accepts it): let in, as git would.
    peer, evil = hostile_peer(
        tmp_path,
        sentinel,
        lambda r: raw_tree(
            r, [(b"100644", b"caf\xe9.md", _blob(r, b"latin-1 name\n")), (b"120000", b"link", _blob(r, b"../../x"))]
        ),
    )
    v = victim_of(tmp_path, peer, sentinel)
    v.fetch(peer.gitdir, name="mallory")
    assert v.git.ref_target("refs/remotes/mallory/memory") == evil
    assert not (v.gitdir / "objects" / "info" / "alternates").exists()
    assert not list(v.gitdir.glob("got-incoming-*"))  # the quarantine is gone
    subprocess.run(["rm", "-rf", str(peer.gitdir)], check=True)
    clean, out = fsck_clean(v.gitdir)  # nothing borrowed from the peer or the quarantine
    assert clean, out


@pytest.mark.parametrize("hops,relative_at", [(1, None), (6, None), (7, None), (2, 0), (2, 1)])
def test_a_peers_alternates_are_followed_no_further_than_git_follows_them(tmp_path, sentinel, hops, relative_at):
    # The peer's refs name a commit that only an alternate object store `hops` links away holds.
    chain = [make(tmp_path, f"store{i}") for i in range(hops + 1)]
    for i in range(hops):
        target = chain[i + 1].gitdir / "objects"
        line = os.path.relpath(target, chain[i].gitdir / "objects") if i == relative_at else str(target)
        (chain[i].gitdir / "objects" / "info" / "alternates").write_text(line + "\n")
    far = chain[-1].commit_files("memory", {"lessons/far.md": "Far away.\n"}, "far\n")
    (chain[0].gitdir / "refs" / "heads" / "memory").write_text(far + "\n")
    plant_traps(chain[0].gitdir, sentinel)
    git_sees = (
        subprocess.run(
            ["git", f"--git-dir={chain[0].gitdir}", "-c", "core.hooksPath=/dev/null", "cat-file", "-e", far],
            capture_output=True,
        ).returncode
        == 0
    )
    v = make(tmp_path, "victim")
    before = snapshot(v.gitdir)
    if git_sees:
        v.fetch(chain[0].gitdir, name="peer")
        assert v.git.ref_target("refs/remotes/peer/memory") == far
        assert not (v.gitdir / "objects" / "info" / "alternates").exists()
        for store in chain:
            subprocess.run(["rm", "-rf", str(store.gitdir)], check=True)
        clean, out = fsck_clean(v.gitdir)  # the victim keeps its own copy of everything
        assert clean, out
    else:
        with pytest.raises(RemoteError):
            v.fetch(chain[0].gitdir, name="peer")
        assert_untouched(v, before, far)
    assert hops < 7 or not git_sees  # git's own limit, which libgit2 shares


def test_fetch_brings_only_new_objects(tmp_path):
    a, b = make(tmp_path, "alice"), make(tmp_path, "bob")
    for i in range(30):
        a.commit_node(Node(f"thought {i}", scores={"s_comb": 0.5}))
    b.fetch(a.gitdir, name="alice")
    git(b.gitdir, "repack", "-adq")
    a.commit_node(Node("one more", scores={"s_comb": 0.5}))
    packs_before = set((b.gitdir / "objects" / "pack").glob("*.pack"))
    b.fetch(a.gitdir, name="alice")
    (new,) = set((b.gitdir / "objects" / "pack").glob("*.pack")) - packs_before
    count = len(git(b.gitdir, "show-index", input=new.with_suffix(".idx").read_bytes()).splitlines())
    assert 0 < count < 15  # the new commit, its tree and blobs, the notes: not 30 commits' worth
    assert b.git.ref_target("refs/remotes/alice/master") == a.git.ref_target("refs/heads/master")


# ---------------------------------------------------------------------------- merge
def local_hostile_branch(v: ReasoningRepo, build, branch="refs/heads/incoming") -> str:
    """A hostile branch already inside the victim (pushed by a worker, written by another tool)."""
    r = pygit2.Repository(str(v.gitdir))
    base = v.tip("memory")
    evil = raw_commit(r, build(r), [base] if base else [], "merge me\n")
    r.references.create(branch, evil, force=True)
    return evil


@pytest.mark.parametrize("attack", ["dotdot", "DOTGIT", "hfs-ignorable", "full-path", "bad-mode"])
@pytest.mark.parametrize("diverged", [True, False])
def test_merging_a_hostile_branch_is_a_typed_refusal(tmp_path, sentinel, attack, diverged):
    v = make(tmp_path, "victim")
    v.commit_files("memory", {"lessons/units.md": "Check units.\n"}, "lesson\n")
    local_hostile_branch(v, ATTACKS[attack])
    if diverged:  # a real three-way merge (else: a fast-forward)
        v.commit_files("memory", {"lessons/mine.md": "Mine.\n"}, "mine\n")
    plant_traps(v.gitdir, sentinel)
    tip = v.tip("memory")
    with pytest.raises(UntrustedContentError) as info:
        v.merge("refs/heads/incoming", into="memory", strategy="theirs")
    assert "to merge refs/heads/incoming into memory" in str(info.value) and info.value.path
    assert v.tip("memory") == tip
    assert not isinstance(info.value, pygit2.GitError)


def test_merge_limits_are_a_knob(tmp_path):
    v = make(tmp_path, "victim")
    v.commit_files("memory", {"lessons/units.md": "Check units.\n"}, "lesson\n")

    def build(r):
        t = raw_tree(r, [(b"100644", b"leaf.md", _blob(r, b"x\n"))])
        for _ in range(10):
            t = raw_tree(r, [(b"40000", b"d", t)])
        return t

    local_hostile_branch(v, build)
    with pytest.raises(UntrustedContentError) as info:
        merge(v, "refs/heads/incoming", into="memory", limits=InboundLimits(max_tree_depth=5))
    assert info.value.limit == "max_tree_depth"
    assert merge(v, "refs/heads/incoming", into="memory").status == "fast-forward"


def test_merge_of_a_branch_missing_objects_is_a_typed_error(tmp_path):
    v = make(tmp_path, "victim")
    v.commit_files("memory", {"lessons/units.md": "Check units.\n"}, "lesson\n")
    r = pygit2.Repository(str(v.gitdir))
    missing = "1" * 40
    tree = raw_tree(r, [(b"40000", b"lessons", missing)])
    v.commit_files("memory", {"lessons/mine.md": "Mine.\n"}, "mine\n")
    evil = raw_commit(r, tree, [v.log("memory")[-1].oid], "broken\n")
    r.references.create("refs/heads/broken", evil)
    tip = v.tip("memory")
    with pytest.raises(GotError) as info:
        v.merge("refs/heads/broken", into="memory")
    assert isinstance(info.value, (UntrustedContentError, CorruptRepositoryError))
    assert v.tip("memory") == tip


# ---------------------------------------------------------------------------- bundles
@pytest.fixture
def good_bundle(tmp_path):
    a = make(tmp_path, "alice")
    for i in range(5):
        a.commit_node(Node(f"thought {i}", scores={"s_comb": 0.5}))
    a.commit_files("memory", {"lessons/units.md": "Check units.\n"}, "lesson\n")
    return a.bundle(tmp_path / "good.bundle")


def _header_end(data: bytes) -> int:
    return data.index(b"\n\n") + 2


@pytest.mark.parametrize("cut", ["in-signature", "in-ref-list", "before-blank-line", "after-header", "in-pack"])
def test_a_truncated_bundle_never_verifies_and_imports_nothing(tmp_path, good_bundle, sentinel, cut):
    data = good_bundle.read_bytes()
    end = _header_end(data)
    at = {
        "in-signature": 8,
        "in-ref-list": 50,
        "before-blank-line": end - 1,
        "after-header": end,
        "in-pack": (end + len(data)) // 2,
    }[cut]
    broken = tmp_path / "broken.bundle"
    broken.write_bytes(data[:at])
    with pytest.raises(CorruptRepositoryError) as info:
        verify_bundle(broken)
    assert "\n" not in str(info.value)
    v = make(tmp_path, "victim")
    v.commit_files("memory", {"lessons/mine.md": "Mine.\n"}, "mine\n")
    plant_traps(v.gitdir, sentinel)
    before = snapshot(v.gitdir)
    with pytest.raises(CorruptRepositoryError):
        v.unbundle(broken)
    assert_untouched(v, before)


def _bundle_of(peer: ReasoningRepo, path: Path) -> Path:
    git(peer.gitdir, "bundle", "create", str(path), "--all")  # git bundle create runs no fsck
    return path


@pytest.mark.parametrize("attack", ["dotdot", "dotgit", "ntfs-shortname", "full-path", "bad-mode", "duplicate-entries"])
def test_unbundle_refuses_hostile_trees(tmp_path, sentinel, attack):
    peer, evil = hostile_peer(tmp_path, sentinel, ATTACKS[attack])
    bundle = _bundle_of(peer, tmp_path / "evil.bundle")
    with pytest.raises(UntrustedContentError):
        verify_bundle(bundle)
    v = make(tmp_path, "victim")
    v.commit_files("memory", {"lessons/mine.md": "Mine.\n"}, "mine\n")
    plant_traps(v.gitdir, sentinel)
    before = snapshot(v.gitdir)
    with pytest.raises(UntrustedContentError):
        v.unbundle(bundle)
    assert_untouched(v, before, evil)


def test_unbundle_enforces_limits_with_a_knob(tmp_path, sentinel):
    peer, evil = hostile_peer(
        tmp_path, sentinel, lambda r: raw_tree(r, [(b"100644", b"big.bin", str(r.create_blob(os.urandom(200_000))))])
    )
    bundle = _bundle_of(peer, tmp_path / "big.bundle")
    v = make(tmp_path, "victim")
    before = snapshot(v.gitdir)
    for limits, knob in (
        (InboundLimits(max_blob_bytes=100_000), "max_blob_bytes"),
        (InboundLimits(max_objects=3), "max_objects"),
        (InboundLimits(max_total_bytes=10_000), "max_total_bytes"),
    ):
        with pytest.raises(UntrustedContentError) as info:
            unbundle(v, bundle, limits=limits)
        assert info.value.limit == knob
        assert_untouched(v, before, evil)
    unbundle(v, bundle)
    assert v.git.ref_target("refs/heads/memory") == evil


# ---------------------------------------------------------------------------- the traps are real
def test_the_planted_traps_do_fire_when_git_runs_them(tmp_path):
    # The sentinel checks above mean something: plain `git push` into a trapped repository
    # runs its hooks (as today's `unbundle` did, through `git fetch` in the victim).
    armed = tmp_path / "armed"
    a = make(tmp_path, "a")
    a.commit_files("memory", {"x.md": "x\n"}, "x\n")
    target = make(tmp_path, "target")
    plant_traps(target.gitdir, armed)
    git(a.gitdir, "push", "-q", str(target.gitdir), "refs/heads/memory:refs/heads/memory")
    assert armed.exists()


def test_push_to_a_trapped_peer_runs_nothing_of_it(tmp_path, sentinel):
    a = make(tmp_path, "a")
    a.commit_files("memory", {"lessons/x.md": "x\n"}, "x\n")
    peer = make(tmp_path, "peer")
    plant_traps(peer.gitdir, sentinel)
    a.push(peer.gitdir)
    assert peer.git.ref_target("refs/heads/memory") == a.tip("memory")


def test_run_git_ignores_a_trapped_repositorys_hooks_and_fsmonitor(tmp_path, sentinel):
    v = make(tmp_path, "victim")
    v.commit_node(Node("x", scores={"s_comb": 0.5}))
    plant_traps(v.gitdir, sentinel)
    out = v.bundle(tmp_path / "v.bundle")
    verify_bundle(out)
    v.maintenance()
    assert v.fsck()[0]
    c = make(tmp_path, "copy")
    plant_traps(c.gitdir, sentinel)
    c.unbundle(out)  # today: `git fetch` inside the victim ran its reference-transaction hook
    assert c.git.list_refs() == dict(v.git.list_refs().items())


# ---------------------------------------------------------------------------- the command line
def run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, " ".join(out.err.split())


def test_got_unbundle_of_a_truncated_bundle_fails_and_creates_nothing(tmp_path, capsys, good_bundle):
    data = good_bundle.read_bytes()
    broken = tmp_path / "broken.bundle"
    broken.write_bytes(data[:60])  # cut inside the ref list: `git bundle verify` accepts it
    new = tmp_path / "new.git"
    code, out, err = run(capsys, "unbundle", broken, "-r", new)
    assert code == 1 and out == ""
    assert err.startswith("failed:") and err.count("failed:") == 1 and "cut short" in err and "Traceback" not in err
    assert not new.exists()
    code, out, err = run(capsys, "unbundle", good_bundle, "-r", new)
    assert code == 0 and "refs/heads/memory" in out


def test_got_fetch_refuses_a_hostile_peer_and_takes_the_limit_flags(tmp_path, capsys, sentinel):
    peer, evil = hostile_peer(tmp_path, sentinel, ATTACKS["DOTGIT"])
    v = victim_of(tmp_path, peer, sentinel)
    before = snapshot(v.gitdir)
    code, _, err = run(capsys, "fetch", peer.gitdir, "--name", "mallory", "-r", v.gitdir)
    assert code == 1 and err.startswith("failed: refusing") and ".GIT" in err and "Traceback" not in err
    assert_untouched(v, before, evil)
    big, _ = hostile_peer(
        tmp_path / "big",
        sentinel,
        lambda r: raw_tree(r, [(b"100644", b"data.bin", str(r.create_blob(os.urandom(50_000))))]),
    )
    code, _, err = run(capsys, "fetch", big.gitdir, "--name", "big", "-r", v.gitdir, "--max-blob-bytes", 10_000)
    assert code == 1 and "max_blob_bytes=10,000" in err and "data.bin" in err
    assert_untouched(v, before)
    code, out, _ = run(capsys, "fetch", big.gitdir, "--name", "big", "-r", v.gitdir, "--max-blob-bytes", 100_000)
    assert code == 0 and "refs/remotes/big/memory" in out


def test_got_merge_of_a_hostile_peer_or_branch_exits_1_and_keeps_ours(tmp_path, capsys, sentinel):
    peer, _evil = hostile_peer(tmp_path, sentinel, ATTACKS["dotdot"])
    v = victim_of(tmp_path, peer, sentinel)
    tip = v.tip("memory")
    code, _, err = run(capsys, "merge", peer.gitdir, "-r", v.gitdir)
    assert code == 1 and "refusing" in err and "Traceback" not in err
    local_hostile_branch(v, ATTACKS["DOTGIT"])
    code, _, err = run(capsys, "merge", "refs/heads/incoming", "-s", "theirs", "-r", v.gitdir)
    assert code == 1 and "refusing to merge" in err and "'.GIT'" in err
    assert v.tip("memory") == tip


def test_got_unbundle_of_a_hostile_bundle_keeps_an_existing_repository(tmp_path, capsys, sentinel):
    peer, evil = hostile_peer(tmp_path, sentinel, ATTACKS["full-path"])
    bundle = _bundle_of(peer, tmp_path / "evil.bundle")
    v = make(tmp_path, "victim")
    v.commit_files("memory", {"lessons/mine.md": "Mine.\n"}, "mine\n")
    before = snapshot(v.gitdir)
    code, _, err = run(capsys, "unbundle", bundle, "-r", v.gitdir)
    assert code == 1 and "lessons/evil.md" in err
    assert_untouched(v, before, evil)
    new = tmp_path / "fresh.git"
    code, _, err = run(capsys, "unbundle", bundle, "-r", new)
    assert code == 1 and not new.exists()
