"""Tampering on disk: `got verify` checks every object a signature vouches for.

A signature covers the commit, and the commit names its tree by hash; altering a blob
or a tree under a signed commit (a flipped byte in a loose or packed object) must turn the verdict
into ``bad`` with the object's path, as `git fsck` also notices.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pygit2
import pytest
from gitcli import fsck_clean, git, unpack_all

from got_core import Identity, Node, ReasoningRepo, SSHSigner, TrustStore
from got_core.cli import main


@pytest.fixture
def signed(tmp_path):
    key = tmp_path / "agent_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agent", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"agent@example.org {(tmp_path / 'agent_key.pub').read_text()}")
    repo = ReasoningRepo.init(
        tmp_path / "r.git", identity=Identity("Agent", "agent@example.org"), signer=SSHSigner(key)
    )
    root = repo.commit_node(Node("Plan: divide distance by time", scores={"s_comb": 0.5}))
    kid = repo.commit_node(Node("120 / 1.5 = 80 km/h", scores={"s_comb": 0.9}), parents=[root.oid])
    lesson = repo.commit_files("memory", {"lessons/ab/units.md": "Check units before dividing.\n"}, "lesson\n")
    found = {v.oid: v.status for v in repo.verify(trust=TrustStore(allowed_signers=allowed))}
    assert [found[o] for o in (root.oid, kid.oid, lesson)] == ["good"] * 3
    assert fsck_clean(repo.gitdir)[0]
    unpack_all(repo.gitdir)  # writes land in packs: these tests damage loose objects, one file each
    repo = ReasoningRepo.open(repo.gitdir, identity=repo.identity, signer=repo.signer)  # never saw the packs
    return repo, allowed, {"root": root.oid, "kid": kid.oid, "lesson": lesson}


def loose(gitdir: Path, oid: str) -> Path:
    path = gitdir / "objects" / oid[:2] / oid[2:]
    assert path.is_file(), "the test needs the object loose"
    return path


def rewrite(gitdir: Path, oid: str, old: bytes, new: bytes) -> None:
    """Edit a loose object in place: inflate, change bytes, deflate, write back."""
    path = loose(gitdir, oid)
    raw = zlib.decompress(path.read_bytes())
    assert old in raw
    path.chmod(0o644)
    path.write_bytes(zlib.compress(raw.replace(old, new, 1)))


def entry(repo: ReasoningRepo, rev: str, path: str) -> str:
    tree = repo.git._r.get(repo.resolve(rev)).tree
    return str(tree[path].id)


def verdicts(repo, allowed):
    return {v.oid: v for v in ReasoningRepo(repo.gitdir).verify(trust=TrustStore(allowed_signers=allowed))}


def test_a_flipped_byte_in_a_blob_of_a_signed_commit_is_bad_with_its_path(signed, capsys):
    repo, allowed, oids = signed
    blob = entry(repo, oids["kid"], "thought.md")
    rewrite(repo.gitdir, blob, b"80 km/h", b"90 km/h")
    assert not fsck_clean(repo.gitdir)[0]  # stock git sees it too
    found = verdicts(repo, allowed)
    assert found[oids["kid"]].status == "bad"
    assert found[oids["kid"]].path == "thought.md"
    assert "thought.md" in found[oids["kid"]].detail and blob[:12] in found[oids["kid"]].detail
    assert found[oids["root"]].status == "good" and found[oids["lesson"]].status == "good"
    # the same repository object, reused after the tamper, is not fooled by cached reads
    assert {v.oid: v.status for v in repo.verify(trust=TrustStore(allowed_signers=allowed))}[oids["kid"]] == "bad"
    code = main(["verify", "master", "--allowed-signers", str(allowed), "-r", str(repo.gitdir)])
    out = capsys.readouterr().out
    assert code == 1 and "bad" in out and "thought.md" in out


def test_an_altered_subtree_and_a_missing_blob_are_bad(signed):
    repo, allowed, oids = signed
    sub = str(repo.git._r.get(repo.resolve("memory")).tree["lessons/ab"].id)
    rewrite(repo.gitdir, sub, b"units.md", b"unite.md")
    missing = entry(repo, oids["root"], "scores.json")
    assert missing not in {entry(repo, oids["kid"], p) for p in ("scores.json", "metadata.json", "trace.jsonl")}
    loose(repo.gitdir, missing).unlink()
    found = verdicts(repo, allowed)
    assert (found[oids["lesson"]].status, found[oids["lesson"]].path) == ("bad", "lessons/ab")
    assert (found[oids["root"]].status, found[oids["root"]].path) == ("bad", "scores.json")
    assert "missing" in found[oids["root"]].detail
    assert found[oids["kid"]].status == "good"
    assert not fsck_clean(repo.gitdir)[0]


def test_a_damaged_commit_object_is_bad_and_the_walk_goes_on(signed):
    repo, allowed, oids = signed
    # the root commit of master is behind the kid: damage it, the kid still verifies
    rewrite(repo.gitdir, oids["root"], b"Plan: divide", b"Plan: DIVIDE")
    found = verdicts(repo, allowed)
    assert found[oids["root"]].status == "bad" and "commit" in found[oids["root"]].detail
    assert found[oids["kid"]].status == "good" and found[oids["lesson"]].status == "good"
    proc = subprocess.run(
        [
            "git",
            f"--git-dir={repo.gitdir}",
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={allowed}",
            "verify-commit",
            oids["root"],
        ],
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull},
    )
    assert proc.returncode != 0


def test_a_damaged_packed_object_is_bad_from_a_fresh_process(signed, tmp_path):
    repo, allowed, oids = signed
    blob = entry(repo, oids["lesson"], "lessons/ab/units.md")
    git(repo.gitdir, "gc", "--quiet")  # everything into one pack
    pack = next((repo.gitdir / "objects" / "pack").glob("*.pack"))
    offsets = {}
    for line in git(repo.gitdir, "verify-pack", "-v", str(pack.with_suffix(".idx"))).splitlines():
        fields = line.split()
        if len(fields) >= 5 and len(fields[0]) == 40:
            offsets[fields[0]] = (int(fields[3]), int(fields[4]))  # size in pack, offset
    size, offset = offsets[blob]
    data = bytearray(pack.read_bytes())
    data[offset + size - 2] ^= 0x01  # inside the object's deflated bytes (its adler32 check)
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    got = [sys.executable, "-c", "from got_core.cli import _console_main; _console_main()"]
    proc = subprocess.run(
        [*got, "verify", "--allowed-signers", str(allowed), "--json", "-r", str(repo.gitdir)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    found = {v["oid"]: v for v in json.loads(proc.stdout)}
    assert (found[oids["lesson"]]["status"], found[oids["lesson"]]["path"]) == ("bad", "lessons/ab/units.md")
    assert found[oids["kid"]]["status"] == "good"
    assert not fsck_clean(repo.gitdir)[0]


def test_verify_hashes_objects_even_with_libgit2s_check_off(signed):
    repo, allowed, oids = signed
    blob = entry(repo, oids["kid"], "thought.md")
    rewrite(repo.gitdir, blob, b"80 km/h", b"90 km/h")
    pygit2.settings.enable_strict_hash_verification(False)
    try:
        found = verdicts(repo, allowed)
    finally:
        pygit2.settings.enable_strict_hash_verification(True)
    assert (found[oids["kid"]].status, found[oids["kid"]].path) == ("bad", "thought.md")
