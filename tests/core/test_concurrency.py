"""Many writers, one repository: nothing lost; a killed writer leaves a clean repository."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

from gitcli import fsck_clean, git
from timeouts import TEST_TIMEOUT

from got_core import Node, ReasoningRepo

WRITER = textwrap.dedent("""
    import sys
    from got_core import Node, ReasoningRepo
    path, worker, count, ref = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    repo = ReasoningRepo(path)
    for i in range(count):
        n = repo.commit_node(Node(f"worker {worker} thought {i}", scores={"s_comb": (i % 10) / 10},
                                  problem_id=f"w{worker}", outcome="success" if i % 5 == 0 else ""),
                             ref=ref.replace("WORKER", worker))
        print(n.oid, flush=True)
""")


def _spawn(path, worker, count, ref):
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(worker), str(count), ref],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_four_processes_times_250_nodes_on_their_own_branches(tmp_path):
    path = tmp_path / "shared.git"
    ReasoningRepo.init(path)
    procs = [_spawn(path, w, 250, "agents/WORKER") for w in range(4)]
    acked = []
    for p in procs:
        out, err = p.communicate(timeout=TEST_TIMEOUT)
        assert p.returncode == 0, err
        acked += out.split()
    assert len(acked) == 1000
    repo = ReasoningRepo(path)
    on_branches = set()
    for w in range(4):
        on_branches |= set(git(path, "rev-list", f"agents/{w}").split())
    assert set(acked) == on_branches and len(on_branches) == 1000
    notes = git(path, "notes", "--ref=got", "list").split()
    assert len(notes) == 2000  # (note, annotated commit) pairs: one note per node, none lost
    assert len(repo.tags("success_")) == 200
    ok, out = fsck_clean(path)
    assert ok, out


def test_four_processes_appending_to_one_branch(tmp_path):
    path = tmp_path / "one.git"
    ReasoningRepo.init(path)
    procs = [_spawn(path, w, 60, "master") for w in range(4)]
    acked = []
    for p in procs:
        out, err = p.communicate(timeout=TEST_TIMEOUT)
        assert p.returncode == 0, err
        acked += out.split()
    history = git(path, "rev-list", "master").split()
    assert sorted(history) == sorted(acked) and len(history) == 240  # a linear chain, nothing dropped
    assert fsck_clean(path)[0]


def test_threads_share_one_repo_object(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "t.git")
    oids: list[str] = []
    lock = threading.Lock()

    def work(t):
        for i in range(40):
            n = repo.commit_node(Node(f"thread {t} step {i}", scores={"s_comb": 0.5}), ref=f"threads/{t % 4}")
            with lock:
                oids.append(n.oid)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reachable = set()
    for b in range(4):
        reachable |= set(git(repo.gitdir, "rev-list", f"threads/{b}").split())
    assert set(oids) == reachable and len(oids) == 320
    assert len(repo.grep("thread 7 step 39")) == 1
    assert fsck_clean(repo.gitdir)[0]


def test_sigkill_mid_stream_loses_no_acknowledged_node(tmp_path):
    path = tmp_path / "killed.git"
    ReasoningRepo.init(path)
    acked: list[str] = []
    rng = random.Random(7)
    for _round in range(3):
        p = _spawn(path, "k", 100_000, "master")
        start = time.monotonic()
        target = rng.randint(20, 120)
        got = 0
        while got < target and time.monotonic() - start < TEST_TIMEOUT:
            line = p.stdout.readline()
            if not line:
                break
            acked.append(line.strip())
            got += 1
        time.sleep(rng.random() * 0.01)  # land somewhere inside a write
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        acked += [line.strip() for line in p.stdout.read().split()]  # acknowledged before death
    ok, out = fsck_clean(path)
    assert ok, out
    history = set(git(path, "rev-list", "master").split())
    assert set(acked) <= history
    repo = ReasoningRepo(path, stale_lock_seconds=1.0)
    for oid in acked:
        assert repo.read_node(oid).oid == oid
    # and the repository takes new writes (a lock left by the kill is recognised as stale)
    n = repo.commit_node(Node("after the crash"))
    assert repo.tip("master") == n.oid
