"""Signed traces that stock ``git verify-commit`` accepts (SSH and OpenPGP), and rejects when tampered."""

from __future__ import annotations

import subprocess

import pygit2
import pytest
from gitcli import git

from got_core import GPGSigner, Identity, Node, ReasoningRepo, SSHSigner, TrustStore


@pytest.fixture
def ssh_key(tmp_path):
    key = tmp_path / "agent_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agent", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"agent@example.org {(tmp_path / 'agent_key.pub').read_text()}")
    return key, allowed


def test_ssh_signed_nodes_verify_with_stock_git_and_ours(tmp_path, ssh_key):
    key, allowed = ssh_key
    repo = ReasoningRepo.init(
        tmp_path / "r.git", identity=Identity("Agent", "agent@example.org"), signer=SSHSigner(key)
    )
    n = repo.commit_node(Node("signed thought", scores={"s_comb": 0.5}))
    merge_base = repo.commit_files("memory", {"lessons/x.md": "x"}, "lesson\n")
    git(repo.gitdir, "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}", "verify-commit", n.oid)
    git(repo.gitdir, "-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}", "verify-commit", merge_base)
    verdicts = repo.verify("master", trust=TrustStore(allowed_signers=allowed))
    assert [v.status for v in verdicts] == ["good"] and verdicts[0].signer == "agent@example.org"
    # without trust the same signature is valid but by an unknown key
    assert repo.verify("master", trust=TrustStore())[0].status == "unknown-key"


def test_unsigned_unknown_and_tampered_history_is_reported(tmp_path, ssh_key):
    key, allowed = ssh_key
    other = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    path = tmp_path / "r.git"
    plain = ReasoningRepo.init(path)
    plain.commit_node(Node("unsigned root"))
    ReasoningRepo(path, signer=SSHSigner(other)).commit_node(Node("stranger's thought"))
    signed = ReasoningRepo(path, signer=SSHSigner(key), identity=Identity("A", "agent@example.org"))
    good = signed.commit_node(Node("trusted thought"))
    # tamper: rewrite the signed commit's message but keep its signature header
    raw = git(path, "cat-file", "commit", good.oid).replace("trusted thought", "TAMPERED thought", 1)
    pyrepo = pygit2.Repository(str(path))
    forged = str(pyrepo.odb.write(pygit2.GIT_OBJECT_COMMIT, raw.encode()))
    pyrepo.references.create("refs/heads/forged", forged)
    statuses = {v.oid: v.status for v in plain.verify(trust=TrustStore(allowed_signers=allowed))}
    assert statuses[good.oid] == "good"
    assert statuses[forged] == "bad"
    assert sorted(statuses.values()).count("unsigned") == 1
    assert sorted(statuses.values()).count("unknown-key") == 1
    stock = subprocess.run(
        [
            "git",
            f"--git-dir={path}",
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={allowed}",
            "verify-commit",
            forged,
        ],
        capture_output=True,
    )
    assert stock.returncode != 0  # stock git agrees it is bad


def test_gpg_signatures(tmp_path):
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {"GNUPGHOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--passphrase",
            "",
            "--quick-gen-key",
            "Agent <agent@example.org>",
            "ed25519",
            "sign",
            "never",
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    repo = ReasoningRepo.init(
        tmp_path / "r.git",
        identity=Identity("Agent", "agent@example.org"),
        signer=GPGSigner("agent@example.org", gnupghome=home),
    )
    n = repo.commit_node(Node("gpg signed"))
    subprocess.run(
        ["git", f"--git-dir={repo.gitdir}", "verify-commit", n.oid],
        check=True,
        env={**env, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"},
        capture_output=True,
    )
    assert repo.verify(n.oid, trust=TrustStore(gnupghome=home))[0].status == "good"
    empty = tmp_path / "empty-gnupg"
    empty.mkdir(mode=0o700)
    assert repo.verify(n.oid, trust=TrustStore(gnupghome=empty))[0].status == "unknown-key"
