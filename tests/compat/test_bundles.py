"""Bundles stock git accepts, and bundles stock git wrote that we import."""

from __future__ import annotations

import pytest
from gitcli import fsck_clean, git

from got_core import Identity, Node, ReasoningRepo
from got_core.errors import CorruptRepositoryError
from got_core.repo.sharing import verify_bundle


def make(tmp_path, name):
    return ReasoningRepo.init(tmp_path / f"{name}.git", identity=Identity(name, f"{name}@example.org"))


def lesson(repo, key, text):
    return repo.commit_files("memory", {f"lessons/{key}.md": text + "\n"}, f"lesson: {key}\n\n{text}\n")


def test_bundle_roundtrip_is_bit_identical(tmp_path):
    a = make(tmp_path, "alice")
    n = a.commit_node(Node("bundled", scores={"s_comb": 0.7}, outcome="success"))
    lesson(a, "units", "Check units.")
    out = a.bundle(tmp_path / "session.bundle")
    heads = verify_bundle(out)
    assert heads["refs/heads/master"] == n.oid and "refs/notes/got" in heads
    scratch = tmp_path / "scratch.git"
    git(scratch, "init", "-q", "--bare", str(scratch))
    git(scratch, "bundle", "verify", str(out))  # stock git accepts it (raises otherwise)
    c = make(tmp_path, "copy")
    c.unbundle(out)
    for ref in ("refs/heads/master", "refs/heads/memory", "refs/notes/got", f"refs/tags/success_{n.node_id}"):
        assert c.git.ref_target(ref) == a.git.ref_target(ref)
    assert c.read_node(n.oid).note == {"s_comb": 0.7}
    assert fsck_clean(c.gitdir)[0]
    broken = tmp_path / "broken.bundle"
    broken.write_bytes(out.read_bytes()[:200])
    with pytest.raises(CorruptRepositoryError):
        verify_bundle(broken)


def test_an_incremental_bundle_imports_onto_history_the_victim_has(tmp_path):
    a = make(tmp_path, "alice")
    first = a.commit_files("memory", {"lessons/a.md": "A.\n"}, "a\n")
    v = make(tmp_path, "victim")
    v.unbundle(a.bundle(tmp_path / "full.bundle", ["memory"]))
    second = a.commit_files("memory", {"lessons/b.md": "B.\n"}, "b\n")
    inc = tmp_path / "inc.bundle"
    git(a.gitdir, "bundle", "create", str(inc), f"{first}..refs/heads/memory")
    heads = v.unbundle(inc)
    assert heads == {"refs/heads/memory": second} and v.tip("memory") == second
    assert fsck_clean(v.gitdir)[0]
