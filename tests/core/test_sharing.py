"""Fetch, merge with conflicts as data, selective push, bundles — checked with real git."""

from __future__ import annotations

import pytest
from gitcli import fsck_clean, git

from got_core import (
    Identity,
    InvalidInputError,
    MergeConflictError,
    Node,
    ReasoningRepo,
    RemoteError,
    UntrustedContentError,
)
from got_core.errors import CorruptRepositoryError
from got_core.repo.sharing import verify_bundle
from got_core.storage.inbound import InboundLimits


def make(tmp_path, name):
    return ReasoningRepo.init(tmp_path / f"{name}.git", identity=Identity(name, f"{name}@example.org"))


def lesson(repo, key, text):
    return repo.commit_files("memory", {f"lessons/{key}.md": text + "\n"}, f"lesson: {key}\n\n{text}\n")


@pytest.fixture
def pair(tmp_path):
    a, b = make(tmp_path, "alice"), make(tmp_path, "bob")
    base = lesson(a, "units", "Check units first.")
    b.fetch(a.gitdir, name="alice")
    b.set_ref("memory", "refs/remotes/alice/memory")
    assert b.tip("memory") == base
    return a, b


def test_disjoint_topics_merge_cleanly(pair):
    a, b = pair
    lesson(a, "algebra", "Isolate the variable.")
    lesson(b, "geometry", "Draw the figure.")
    b.fetch(a.gitdir, name="alice")
    result = b.merge("refs/remotes/alice/memory", into="memory")
    assert result.status == "merged" and result.conflicts == ()
    assert sorted(b.files("memory", "lessons")) == ["lessons/algebra.md", "lessons/geometry.md", "lessons/units.md"]
    parents = git(b.gitdir, "log", "-1", "--format=%P", "memory").split()
    assert parents == [result.ours, result.theirs]
    assert fsck_clean(b.gitdir)[0]


def test_contradictions_on_one_key_surface_as_conflicts(pair):
    a, b = pair
    lesson(a, "units", "Always convert to SI units first.")
    lesson(b, "units", "Never convert units; keep the given ones.")
    b.fetch(a.gitdir, name="alice")
    before = b.tip("memory")
    result = b.merge("refs/remotes/alice/memory", into="memory")
    assert result.status == "conflicted" and result.commit is None
    (c,) = result.conflicts
    assert c.path == "lessons/units.md"
    assert "Never convert" in c.ours and "Always convert" in c.theirs and "Check units first" in c.base
    assert b.tip("memory") == before  # nothing committed silently


@pytest.mark.parametrize("strategy,expect", [("ours", "Never"), ("theirs", "Always")])
def test_ours_theirs_strategies_commit_a_merge(pair, strategy, expect):
    a, b = pair
    lesson(a, "units", "Always convert to SI units first.")
    lesson(b, "units", "Never convert units; keep the given ones.")
    b.fetch(a.gitdir, name="alice")
    result = b.merge("refs/remotes/alice/memory", into="memory", strategy=strategy)
    assert result.status == "resolved" and len(result.conflicts) == 1
    assert expect in b.read_file("memory", "lessons/units.md").decode()
    msg = git(b.gitdir, "log", "-1", "--format=%B", "memory")
    assert f"Conflicts resolved ({strategy})" in msg and "lessons/units.md" in msg


def test_resolver_decides_and_can_abstain(pair):
    a, b = pair
    lesson(a, "units", "Always convert.")
    lesson(b, "units", "Never convert.")
    b.fetch(a.gitdir, name="alice")
    seen = []

    def adjudicate(conflict):
        seen.append(conflict.path)
        return "Convert when the formula mixes systems.\n"

    result = b.merge("refs/remotes/alice/memory", into="memory", strategy=adjudicate)
    assert seen == ["lessons/units.md"] and result.status == "resolved"
    assert b.read_file("memory", "lessons/units.md") == b"Convert when the formula mixes systems.\n"

    def abstain(conflict):
        raise MergeConflictError("needs a human", [conflict])

    lesson(a, "units", "Sometimes convert.")
    lesson(b, "units", "Rarely convert.")
    b.fetch(a.gitdir, name="alice")
    tip = b.tip("memory")
    with pytest.raises(MergeConflictError):
        b.merge("refs/remotes/alice/memory", into="memory", strategy=abstain)
    assert b.tip("memory") == tip
    with pytest.raises(InvalidInputError):
        b.merge("refs/remotes/alice/memory", into="memory", strategy="coin-flip")


def test_fast_forward_and_up_to_date(pair):
    a, b = pair
    new = lesson(a, "extra", "More.")
    b.fetch(a.gitdir, name="alice")
    assert b.merge("refs/remotes/alice/memory", into="memory").status == "fast-forward"
    assert b.tip("memory") == new
    assert b.merge("refs/remotes/alice/memory", into="memory").status == "up-to-date"


def test_fetch_brings_tags_and_notes_but_never_moves_our_tags(tmp_path):
    a, b = make(tmp_path, "alice"), make(tmp_path, "bob")
    na = a.commit_node(Node("alice's win", scores={"s_comb": 0.8}, outcome="success"))
    nb = b.commit_node(Node("bob's own", scores={"s_comb": 0.1}))
    b.tag("shared", nb.oid)
    a.tag("shared", na.oid)
    b.fetch(a.gitdir, name="alice")
    assert b.resolve(f"success_{na.node_id}") == na.oid
    assert b.resolve("shared") == nb.oid  # ours kept
    assert b.git.ref_target("refs/notes/remotes/alice/got")


def test_bad_remotes_fail_clearly(tmp_path):
    b = make(tmp_path, "bob")
    with pytest.raises(RemoteError):
        b.fetch(tmp_path / "nowhere.git")
    (tmp_path / "plain").mkdir()
    with pytest.raises(RemoteError):
        b.fetch(tmp_path / "plain")


def test_selective_push_shares_memory_and_success_tags_only(tmp_path):
    a = make(tmp_path, "alice")
    win = a.commit_node(Node("a win", scores={"s_comb": 0.9}, outcome="success"))
    lose = a.commit_node(Node("a loss", scores={"s_comb": 0.1}, outcome="failed"))
    lesson(a, "units", "Check units.")
    central = tmp_path / "central.git"
    git(central, "init", "-q", "--bare", str(central))
    specs = a.push(central)
    assert any("refs/heads/memory" in s for s in specs)
    heads = git(central, "for-each-ref", "--format=%(refname)").split()
    assert "refs/heads/memory" in heads and f"refs/tags/success_{win.node_id}" in heads
    assert "refs/heads/master" not in heads and f"refs/tags/failed_{lose.node_id}" not in heads


def test_inbound_limits_must_be_positive_integers(tmp_path):
    from got_core.errors import ConfigError
    from got_core.repo.sharing import InboundLimits

    for bad in (0, -1, True, 1.5, "10"):
        with pytest.raises(ConfigError, match="max_blob_bytes"):
            InboundLimits(max_blob_bytes=bad)
    b = make(tmp_path, "bob")
    with pytest.raises(ConfigError):
        b.fetch(tmp_path, limits={"max_blob_bytes": 1})


def test_concurrent_fetches_into_one_repository_each_get_their_own_quarantine(tmp_path):
    import threading

    peers = [make(tmp_path, f"peer{i}") for i in range(3)]
    for i, p in enumerate(peers):
        lesson(p, f"k{i}", f"Lesson {i}.")
    b = make(tmp_path, "bob")
    errors = []

    def go(p):
        try:
            ReasoningRepo(b.gitdir).fetch(p.gitdir)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(p,)) for p in peers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i, p in enumerate(peers):
        assert b.git.ref_target(f"refs/remotes/peer{i}/memory") == p.tip("memory")
    assert not list(b.gitdir.glob("got-incoming-*"))
    assert fsck_clean(b.gitdir)[0]


def test_bundle_header_is_checked_line_by_line(tmp_path):
    a = make(tmp_path, "alice")
    lesson(a, "units", "Check units.")
    data = a.bundle(tmp_path / "a.bundle").read_bytes()
    end = data.index(b"\n\n")
    cases = {
        "no-refs": b"# v2 git bundle\n\n" + data[end + 2 :],
        "capability": b"# v3 git bundle\n@filter=blob:none\n" + data[len(b"# v2 git bundle\n") :],
        "damaged-line": data.replace(b"refs/heads/memory", b"refs/heads/memory", 1)[:16]
        + b"zz not-an-oid\n"
        + data[16:],
    }
    for name, raw in cases.items():
        path = tmp_path / f"{name}.bundle"
        path.write_bytes(raw)
        with pytest.raises(CorruptRepositoryError):
            verify_bundle(path)
    with pytest.raises(InvalidInputError):
        verify_bundle(tmp_path / "missing.bundle")


def test_a_quarantine_left_by_a_killed_fetch_is_swept_later(tmp_path):
    import os
    import time

    a, b = make(tmp_path, "alice"), make(tmp_path, "bob")
    lesson(a, "units", "Check units.")
    stale = b.gitdir / "got-incoming-killed"
    (stale / "objects").mkdir(parents=True)
    old = time.time() - 3 * 24 * 3600
    os.utime(stale, (old, old))
    fresh = b.gitdir / "got-incoming-running"
    fresh.mkdir()
    b.fetch(a.gitdir, name="alice")
    assert not stale.exists() and fresh.exists()  # a transfer under way elsewhere is left alone
    assert b.git.ref_target("refs/remotes/alice/memory") == a.tip("memory")


def test_repo_unbundle_and_merge_take_limits(tmp_path):
    a = ReasoningRepo.init(tmp_path / "a.git")
    a.commit_files("memory", {"lessons/deep/er/x.md": "x" * 5000}, "lesson\n")
    a.bundle(tmp_path / "a.bundle")
    b = ReasoningRepo.init(tmp_path / "b.git")
    with pytest.raises(UntrustedContentError):
        b.unbundle(tmp_path / "a.bundle", limits=InboundLimits(max_blob_bytes=100))
    assert b.git.list_refs() == {}
    b.unbundle(tmp_path / "a.bundle")
    c = ReasoningRepo.init(tmp_path / "c.git")
    c.commit_files("memory", {"other.md": "y"}, "c\n")
    c.fetch(tmp_path / "a.git", name="a")
    with pytest.raises(UntrustedContentError):
        c.merge("refs/remotes/a/memory", into="memory", limits=InboundLimits(max_tree_depth=2))
    assert c.files("memory") == {"other.md": b"y"}


def test_a_non_fast_forward_push_is_rejected_at_once_and_never_forced(tmp_path):
    from got_core import PushRejectedError

    central = ReasoningRepo.init(tmp_path / "central.git")
    a = ReasoningRepo.init(tmp_path / "a.git")
    b = ReasoningRepo.init(tmp_path / "b.git")
    a.commit_files("memory", {"lessons/a.md": "A\n"}, "a\n")
    a.push(str(central.gitdir))
    b.commit_files("memory", {"lessons/b.md": "B\n"}, "b\n")  # unrelated history: not a fast-forward
    b.lock_timeout = 600  # a rejection must not be retried until this deadline
    with pytest.raises(PushRejectedError, match="rejected"):
        b.push(str(central.gitdir))
    assert central.files("memory") == {"lessons/a.md": b"A\n"}
