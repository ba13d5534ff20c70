"""fetch / push / merge against real git servers on 127.0.0.1 (``git daemon``, ``git http-backend``, SSH).

The tests taking ``git_server`` run once per server: git's own protocol, smart HTTP, smart
HTTPS (a private CA made at test time, trusted as a deployment trusts one) and SSH.

libgit2 (pygit2) speaks ``git://``, ``http(s)://`` and ``ssh://`` itself, so no ``git`` binary
runs on our side of these transfers; the servers are stock git, started by the fixtures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from gitserver import ALL_SERVERS, HttpGit, SshGit, make_bare, serve
from timeouts import TEST_TIMEOUT

from got_core import ReasoningRepo
from got_core.cli import main
from got_core.errors import (
    CredentialsRequiredError,
    InvalidInputError,
    MergeConflictError,
    PushRejectedError,
    RemoteError,
    UntrustedContentError,
)
from got_core.storage.inbound import QUARANTINE_PREFIX, InboundLimits

ROOT = Path(__file__).resolve().parents[2]


def _quarantines(repo: ReasoningRepo) -> list[str]:
    return [p.name for p in repo.gitdir.iterdir() if p.name.startswith(QUARANTINE_PREFIX)]


@pytest.fixture(params=ALL_SERVERS)
def git_server(request, tmp_path, monkeypatch):
    """Each test that takes it runs once per server kind, all on 127.0.0.1: ``git daemon``
    (git://), ``git http-backend`` behind a local HTTP server (http://) and behind a local
    HTTPS server with a private CA (https://), and an SSH server (ssh://)."""
    with serve(request.param, tmp_path / "served") as server:
        server.trust(monkeypatch, Path(os.environ["HOME"]))  # what a deployment configures (key, known_hosts, CA)
        yield server


def _two_clones(tmp_path, url, files):
    """Repositories a and b sharing one root commit of ``files`` on memory through central at ``url``."""
    a = ReasoningRepo.init(tmp_path / "a.git")
    b = ReasoningRepo.init(tmp_path / "b.git")
    root = a.commit_files("memory", files, "root\n")
    a.push(url)
    b.fetch(url, name="central")
    b.set_ref("memory", "refs/remotes/central/memory", expected=None)
    return a, b, root


def test_push_fetch_merge_over_a_git_server(tmp_path, git_server):
    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    a = ReasoningRepo.init(tmp_path / "a.git")
    first = a.commit_files("memory", {"lessons/a.md": "A\n"}, "a\n")
    a.tag_outcome(first, "success", "a1")
    assert a.push(url) == ["refs/heads/memory:refs/heads/memory", "refs/tags/success_a1:refs/tags/success_a1"]
    assert git(served, "rev-parse", "refs/heads/memory").strip() == first
    assert git(served, "rev-parse", "refs/tags/success_a1").strip() == first

    b = ReasoningRepo.init(tmp_path / "b.git")
    fetched = b.fetch(url, name="central")
    assert fetched == {"refs/remotes/central/memory": first}
    assert b.resolve("success_a1") == first
    assert not _quarantines(b)
    assert b.merge("refs/remotes/central/memory").status == "fast-forward"
    b.commit_files("memory", {"lessons/b.md": "B\n"}, "b\n")
    b.push(url)
    assert git(served, "show", "memory:lessons/b.md") == "B\n"
    assert fsck_clean(served)[0] and fsck_clean(b.gitdir)[0]
    assert git_server.receive_packs() >= 2  # the pushes really went through the server


def test_a_non_fast_forward_is_refused_then_merged_and_pushed_never_forced(tmp_path, git_server):
    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    a, b, root = _two_clones(tmp_path, url, {"README.md": "shared\n"})
    ta = a.commit_files("memory", {"lessons/a.md": "A\n"}, "a\n")
    tb = b.commit_files("memory", {"lessons/b.md": "B\n"}, "b\n")
    a.push(url)
    b.lock_timeout = TEST_TIMEOUT
    with pytest.raises(PushRejectedError, match="not be a fast-forward"):
        b.push(url)  # refused at once without merge=: the deadline is not waited for
    assert git(served, "rev-parse", "memory").strip() == ta
    assert b.tip("memory") == tb  # nothing merged either

    b.push(url, merge="review")
    tip = git(served, "rev-parse", "memory").strip()
    assert git(served, "rev-list", "--parents", "-n1", tip).split()[1:] == [tb, ta]
    for commit in (root, ta, tb):
        git(served, "merge-base", "--is-ancestor", commit, tip)  # nothing was overwritten
    assert git(served, "ls-tree", "-r", "--name-only", tip).split() == ["README.md", "lessons/a.md", "lessons/b.md"]
    assert b.tip("memory") == tip
    with pytest.raises(InvalidInputError, match="not both"):
        b.push(url, force=True, merge="review")
    with pytest.raises(InvalidInputError, match="merge must be"):
        b.push(url, merge="squash")


def test_a_conflicting_push_is_left_for_a_decision(tmp_path, git_server):
    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    a, b, _root = _two_clones(tmp_path, url, {"lessons/units.md": "base\n"})
    ta = a.commit_files("memory", {"lessons/units.md": "Always convert units.\n"}, "a\n")
    a.push(url)
    tb = b.commit_files("memory", {"lessons/units.md": "Never convert units.\n"}, "b\n")
    with pytest.raises(MergeConflictError, match="lessons/units.md") as info:
        b.push(url, merge="review")
    assert info.value.conflicts[0].theirs == "Always convert units.\n"
    assert git(served, "rev-parse", "memory").strip() == ta and b.tip("memory") == tb
    b.push(url, merge="ours")
    assert git(served, "show", "memory:lessons/units.md") == "Never convert units.\n"
    git(served, "merge-base", "--is-ancestor", ta, "memory")


RACER = r"""
import json, sys
from got_core import ReasoningRepo
spec = json.loads(sys.argv[1])
repo = ReasoningRepo.open(spec["path"])
repo.lock_timeout = spec["timeout"]
repo.fetch(spec["url"], name="central")
repo.set_ref("memory", "refs/remotes/central/memory", expected=None)
mine = []
for i in range(spec["n"]):
    mine.append(repo.commit_files("memory", {f"lessons/{spec['name']}-{i}.md": f"{spec['name']} {i}\n"},
                                  f"{spec['name']} {i}\n"))
    repo.push(spec["url"], merge="review")
print(json.dumps(mine))
"""


@pytest.mark.slow
def test_writers_racing_on_one_branch_lose_nothing(tmp_path, git_server):
    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    seed = ReasoningRepo.init(tmp_path / "seed.git")
    seed.commit_files("memory", {"README.md": "shared\n"}, "root\n")
    seed.push(url)
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    names, n = ["w0", "w1", "w2", "w3"], 3
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                json.dumps(
                    {"path": str(tmp_path / f"{w}.git"), "url": url, "name": w, "n": n, "timeout": TEST_TIMEOUT}
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in names
    ]
    commits = []
    for proc in procs:
        out, err = proc.communicate(timeout=TEST_TIMEOUT)
        assert proc.returncode == 0, err.decode()
        commits += json.loads(out)
    tip = git(served, "rev-parse", "memory").strip()
    for commit in commits:  # every acknowledged commit is in central's history: nothing was forced over
        git(served, "merge-base", "--is-ancestor", commit, tip)
    files = git(served, "ls-tree", "-r", "--name-only", tip).split()
    assert files == ["README.md", *sorted(f"lessons/{w}-{i}.md" for w in names for i in range(n))]
    assert fsck_clean(served)[0]


def test_fetch_from_a_url_goes_through_the_quarantine(tmp_path, git_server):
    make_bare(git_server.base)
    url = git_server.url("central.git")
    a = ReasoningRepo.init(tmp_path / "a.git")
    a.commit_files("memory", {"lessons/big.md": "x" * 5000}, "big\n")
    a.push(url)
    b = ReasoningRepo.init(tmp_path / "b.git")
    b.commit_files("memory", {"lessons/b.md": "B\n"}, "b\n")
    before = b.git.list_refs()
    with pytest.raises(UntrustedContentError, match="max_blob_bytes"):
        b.fetch(url, name="central", limits=InboundLimits(max_blob_bytes=1000))
    assert b.git.list_refs() == before and not _quarantines(b)
    for rev in ("memory", "memory:lessons/big.md"):  # the refused objects never reached the repository
        oid = git(a.gitdir, "rev-parse", rev).strip()
        assert subprocess.run(["git", f"--git-dir={b.gitdir}", "cat-file", "-e", oid], capture_output=True).returncode
    # The tips a merging push fetches are checked the same way; nothing moves on refusal.
    with pytest.raises(UntrustedContentError, match="max_blob_bytes"):
        b.push(url, merge="theirs", limits=InboundLimits(max_blob_bytes=1000))
    assert b.git.list_refs() == before and not _quarantines(b)


def test_unreachable_server_fails_with_remote_error(tmp_path, git_server):
    url = git_server.url("central.git")
    git_server.stop()
    repo = ReasoningRepo.init(tmp_path / "a.git")
    repo.commit_files("memory", {"x.md": "x\n"}, "x\n")
    with pytest.raises(RemoteError):
        repo.fetch(url)
    with pytest.raises(RemoteError):
        repo.push(url, merge="review")


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_server_that_asks_for_credentials_fails_fast_never_prompting(tmp_path, monkeypatch, tls):
    with HttpGit(tmp_path / "served", password="s3cret", tls=tls) as server:
        server.trust(monkeypatch, Path(os.environ["HOME"]))  # the private CA (and SSL_CERT_FILE for the CLI)
        make_bare(server.base)
        url = server.url("central.git")
        repo = ReasoningRepo.init(tmp_path / "a.git")
        repo.commit_files("memory", {"x.md": "x\n"}, "x\n")
        repo.lock_timeout = TEST_TIMEOUT  # a refusal must not be retried until this deadline
        with pytest.raises(CredentialsRequiredError, match="never prompts"):
            repo.fetch(url)
        with pytest.raises(CredentialsRequiredError, match="never prompts"):
            repo.push(url, merge="review")
        assert server.refused >= 2  # it really asked, and we answered nothing
        assert git(server.base / "central.git", "for-each-ref").strip() == ""
        assert not _quarantines(repo)
        # the CLI too: one line saying what to configure, a failure exit, no prompt on the terminal
        for verb in (["push", url, "--merge", "review"], ["fetch", url], ["merge", url]):
            proc = subprocess.run(
                [sys.executable, "-m", "got_core.cli", *verb, "-r", str(repo.gitdir)],
                capture_output=True,
                text=True,
                timeout=TEST_TIMEOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            assert proc.returncode not in (0, None), proc.stdout
            assert "never prompts" in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
        assert git(server.base / "central.git", "for-each-ref").strip() == ""


def test_cli_push_fetch_merge_against_a_url(tmp_path, git_server, capsys):
    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    a = ReasoningRepo.init(tmp_path / "a.git")
    a.commit_files("memory", {"README.md": "shared\n"}, "root\n")
    assert main(["push", url, "-r", str(a.gitdir)]) == 0
    b = ReasoningRepo.init(tmp_path / "b.git")
    assert main(["fetch", url, "-r", str(b.gitdir)]) == 0
    assert "refs/remotes/central/memory" in capsys.readouterr().out
    assert main(["merge", url, "-r", str(b.gitdir)]) == 0
    a.commit_files("memory", {"lessons/a.md": "A\n"}, "a\n")
    a.push(url)
    b.commit_files("memory", {"lessons/b.md": "B\n"}, "b\n")
    assert main(["push", url, "-r", str(b.gitdir)]) == 1
    assert "fast-forward" in capsys.readouterr().out
    assert main(["push", url, "--merge", "review", "-r", str(b.gitdir)]) == 0
    assert git(served, "ls-tree", "-r", "--name-only", "memory").split() == [
        "README.md",
        "lessons/a.md",
        "lessons/b.md",
    ]
    assert main(["merge", url, "-r", str(a.gitdir)]) == 0
    assert a.tip("memory") == git(served, "rev-parse", "memory").strip()


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_token_from_the_environment_is_offered_once_and_only_to_its_host(tmp_path, monkeypatch, tls):
    with HttpGit(tmp_path / "served", password="s3cret", tls=tls) as server:
        server.trust(monkeypatch, Path(os.environ["HOME"]))  # the private CA, for https
        served = make_bare(server.base)
        url = server.url("central.git")
        repo = ReasoningRepo.init(tmp_path / "a.git")
        tip = repo.commit_files("memory", {"x.md": "x\n"}, "x\n")
        monkeypatch.setenv("GOT_REMOTE_USER", "agent")
        monkeypatch.setenv("GOT_REMOTE_TOKEN", "s3cret")
        monkeypatch.setenv("GOT_REMOTE_HOSTS", "central.example")  # not this host: never offered
        with pytest.raises(CredentialsRequiredError, match="asks for credentials"):
            repo.push(url)
        monkeypatch.setenv("GOT_REMOTE_HOSTS", "127.0.0.1")
        repo.push(url, merge="review")
        assert git(served, "rev-parse", "memory").strip() == tip
        other = ReasoningRepo.init(tmp_path / "b.git")
        assert other.fetch(url, name="central") == {"refs/remotes/central/memory": tip}
        monkeypatch.setenv("GOT_REMOTE_TOKEN", "wrong")
        refused = server.refused
        with pytest.raises(CredentialsRequiredError, match="refused the credentials"):
            other.fetch(url, name="central")
        assert server.refused - refused <= 3  # offered once, then given up: no loop of retries


def test_a_file_url_works_like_a_path(tmp_path):
    central = ReasoningRepo.init(tmp_path / "central.git")
    url = central.gitdir.resolve().as_uri()  # file:///...
    a, b, _root = _two_clones(tmp_path, url, {"README.md": "shared\n"})
    ta = a.commit_files("memory", {"lessons/a.md": "A\n"}, "a\n")
    a.push(url)
    tb = b.commit_files("memory", {"lessons/b.md": "B\n"}, "b\n")
    with pytest.raises(PushRejectedError):
        b.push(url)
    b.push(url, merge="review")
    assert git(central.gitdir, "rev-list", "--parents", "-n1", "memory").split()[1:] == [tb, ta]


def test_mirror_follows_prefixes_and_whole_ref_names_over_a_git_server(tmp_path, git_server):
    from got_core.repo.sharing import mirror

    served = make_bare(git_server.base)
    url = git_server.url("central.git")
    a = ReasoningRepo.init(tmp_path / "a.git")
    one = a.commit_files("refs/got/results/arm/p1", {"result.json": "{}\n"}, "p1\n")
    rule = a.commit_files("refs/got/prereg", {"prereg.json": "{}\n"}, "prereg\n")
    a.commit_files("refs/got/prereg-other", {"x": "x\n"}, "not asked for\n")
    a.push(url, branches=("refs/got/results/arm/p1", "refs/got/prereg", "refs/got/prereg-other"), tag_prefixes=())
    copy = ReasoningRepo.init(tmp_path / "copy.git")
    asked = ("refs/got/results/", "refs/got/prereg", "refs/got/paraphrases")  # the last: not on the server
    assert mirror(copy, url, asked) == {"refs/got/results/arm/p1": one, "refs/got/prereg": rule}
    assert copy.tip("refs/got/prereg-other") is None  # a whole name is matched exactly
    # the copy follows the server; a ref only the copy has is left alone
    two = a.commit_files("refs/got/results/arm/p1", {"result.json": '{"again": 1}\n'}, "p1 again\n")
    a.push(url, branches=("refs/got/results/arm/p1",), tag_prefixes=())
    mine = copy.commit_files("refs/got/results/arm/local", {"result.json": "{}\n"}, "only here\n")
    assert mirror(copy, url, asked)["refs/got/results/arm/p1"] == two
    assert copy.tip("refs/got/results/arm/local") == mine
    assert git(served, "rev-parse", "refs/got/results/arm/p1").strip() == two
    for bad in ("refs/got/*", "heads/memory", "refs/got-incoming-x/"):
        with pytest.raises(InvalidInputError, match="mirror takes"):
            mirror(copy, url, (bad,))


def test_an_ssh_server_whose_host_key_is_not_known_is_refused(tmp_path, monkeypatch):
    """pygit2 lets any SSH host key through; we hold it to ``~/.ssh/known_hosts``."""
    import asyncssh

    with SshGit(tmp_path / "served") as server:
        served = make_bare(server.base)
        home = Path(os.environ["HOME"])
        server.trust(monkeypatch, home)
        repo = ReasoningRepo.init(tmp_path / "a.git")
        repo.commit_files("memory", {"x.md": "x\n"}, "x\n")
        repo.lock_timeout = TEST_TIMEOUT  # a refusal must not be retried until this deadline
        other_key = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode()
        known = home / ".ssh" / "known_hosts"
        for hosts in (f"[127.0.0.1]:{server.port} {other_key}", None):  # a changed key, then none listed
            if hosts is None:
                known.unlink()
            else:
                known.write_text(hosts)
            with pytest.raises(RemoteError, match="host key") as info:
                repo.push(server.url(), merge="review")
            assert not isinstance(info.value, PushRejectedError)
            with pytest.raises(RemoteError, match="host key"):
                repo.fetch(server.url(), name="central")
            assert server.receive_packs() == 0 and not _quarantines(repo)
        assert git(served, "for-each-ref").strip() == ""
        known.write_text(server.host_line)  # the right key: the same push goes through
        repo.push(server.url(), merge="review")
        assert git(served, "rev-parse", "memory").strip() == repo.tip("memory")


def test_an_ssh_server_with_no_key_configured_fails_fast_never_prompting(tmp_path, monkeypatch):
    with SshGit(tmp_path / "served") as server:
        served = make_bare(server.base)
        server.trust(monkeypatch, Path(os.environ["HOME"]))
        monkeypatch.delenv("GOT_SSH_KEY")
        monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
        repo = ReasoningRepo.init(tmp_path / "a.git")
        repo.commit_files("memory", {"x.md": "x\n"}, "x\n")
        repo.lock_timeout = TEST_TIMEOUT
        with pytest.raises(CredentialsRequiredError, match="never prompts"):
            repo.push(server.url(), merge="review")
        monkeypatch.setenv("GOT_SSH_KEY", str(server.key_file))
        monkeypatch.setenv("GOT_REMOTE_HOSTS", "git.example.com")  # the key is never offered to this host
        with pytest.raises(CredentialsRequiredError, match="asks for credentials"):
            repo.fetch(server.url(), name="central")
        assert git(served, "for-each-ref").strip() == "" and server.receive_packs() == 0


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "got_core.cli", *args],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
        env={**env, "PYTHONPATH": str(ROOT)},
    )


def test_an_https_server_with_a_private_ca_is_trusted_through_ssl_cert_file_and_refused_without(tmp_path):
    """What a user does for a private CA: ``SSL_CERT_FILE=ca.pem got push https://...``.

    pygit2 hands libgit2 Python's default verify paths when it is imported (they read
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), so the setting is per process: the client side
    runs as the ``got`` CLI in its own process, as a user would run it."""
    with HttpGit(tmp_path / "served", tls=True) as server:
        served = make_bare(server.base)
        url = server.url("central.git")
        assert url.startswith("https://127.0.0.1:") and server.ca_file is not None
        a = ReasoningRepo.init(tmp_path / "a.git")
        first = a.commit_files("memory", {"lessons/a.md": "A\n"}, "a\n")
        env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}

        # Not trusted (the system CAs only): refused at the handshake, one clear line, nothing sent, no prompt.
        for verb in (["push", url, "--merge", "review"], ["fetch", url], ["merge", url]):
            proc = _cli(*verb, "-r", str(a.gitdir), env=env)
            assert proc.returncode not in (0, None), proc.stdout
            out = proc.stdout + proc.stderr
            assert "TLS certificate of 127.0.0.1 is not valid" in out and "Traceback" not in out, out
            assert "SSL_CERT_FILE=" in out, out  # says what to do
        assert server.requests == [] and server.receive_packs() == 0  # not one HTTP request got through
        assert git(served, "for-each-ref").strip() == "" and not _quarantines(a)

        # Trusted through SSL_CERT_FILE: the same commands go through, over TLS.
        trusted = {**env, "SSL_CERT_FILE": str(server.ca_file)}
        proc = _cli("push", url, "-r", str(a.gitdir), env=trusted)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert git(served, "rev-parse", "memory").strip() == first
        b = ReasoningRepo.init(tmp_path / "b.git")
        b.commit_files("memory", {"lessons/b.md": "B\n"}, "b\n")
        proc = _cli("push", url, "--merge", "review", "-r", str(b.gitdir), env=trusted)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert git(served, "ls-tree", "-r", "--name-only", "memory").split() == ["lessons/a.md", "lessons/b.md"]
        for verb in (["fetch", url], ["merge", url]):
            proc = _cli(*verb, "-r", str(a.gitdir), env=trusted)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        assert a.tip("memory") == git(served, "rev-parse", "memory").strip()
        assert server.receive_packs() >= 2 and fsck_clean(served)[0]


def test_an_untrusted_https_certificate_fails_fast_with_remote_error_in_process(tmp_path):
    with HttpGit(tmp_path / "served", tls=True) as server:  # a fresh CA this process was never told about
        served = make_bare(server.base)
        repo = ReasoningRepo.init(tmp_path / "a.git")
        repo.commit_files("memory", {"x.md": "x\n"}, "x\n")
        before = repo.git.list_refs()
        repo.lock_timeout = TEST_TIMEOUT  # a refusal must not be retried until this deadline
        with pytest.raises(RemoteError, match="TLS certificate") as info:
            repo.push(server.url(), merge="review")
        assert not isinstance(info.value, (PushRejectedError, CredentialsRequiredError))
        with pytest.raises(RemoteError, match="TLS certificate"):
            repo.fetch(server.url(), name="central")
        assert server.requests == [] and repo.git.list_refs() == before and not _quarantines(repo)
        assert git(served, "for-each-ref").strip() == ""
