"""Staged pack writes across processes: concurrent writers and readers while small packs are
consolidated lose nothing, and a killed writer leaves a valid repository."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from gitcli import fsck_clean, git

from got_core import ReasoningRepo
from got_core.storage.git._packing import MAX_PACKS
from got_core.storage.midx import midx_packs

TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))

WRITER = r"""
import sys
from got_core import Node, ReasoningRepo
repo = ReasoningRepo.open(sys.argv[1])
me, n = sys.argv[2], int(sys.argv[3])
for i in range(n):
    node = repo.commit_node(Node(f"{me} thought {i}", scores={"s": i / n}), ref=f"w/{me}")
    shared = repo.commit_files("shared", {f"{me}/{i % 13}": f"{me} {i}"}, f"{me} {i}")  # contended
    print(node.oid, shared, flush=True)
"""

READER = r"""
import os, sys
from got_core import ReasoningRepo
repo = ReasoningRepo.open(sys.argv[1])  # one long-lived handle: libgit2 keeps its pack list
git, stop, rounds, objects = repo.git, sys.argv[2], 0, 0
while True:
    done = os.path.exists(stop)
    for name, tip in git.list_refs("refs/").items():
        for commit in git.walk([git.peel_to_commit(tip) or tip]):
            for path, blob in git.tree_files(commit.tree).items():
                git.read_blob(blob)
                objects += 1
    rounds += 1
    if done:
        break
print(rounds, objects)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _loose(gitdir: Path) -> int:
    return sum(len(os.listdir(d)) for d in (gitdir / "objects").iterdir() if len(d.name) == 2)


def _packs(gitdir: Path) -> int:
    return len(list((gitdir / "objects" / "pack").glob("pack-*.idx")))


def test_concurrent_writers_and_a_reader_lose_nothing_while_packs_are_consolidated(tmp_path: Path) -> None:
    gitdir = tmp_path / "r.git"
    ReasoningRepo.init(gitdir).commit_files("shared", {"seed": "0"}, "seed")
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(gitdir), str(stop)], stdout=subprocess.PIPE, text=True, env=_env()
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(gitdir), f"p{k}", "120"], stdout=subprocess.PIPE, text=True, env=_env()
        )
        for k in range(3)
    ]
    acked: list[tuple[str, str]] = []
    for w in writers:
        out, _ = w.communicate(timeout=TIMEOUT)
        assert w.returncode == 0
        acked += [tuple(line.split()) for line in out.splitlines()]  # type: ignore[misc]
    stop.touch()
    out, _ = reader.communicate(timeout=TIMEOUT)
    assert reader.returncode == 0, "a reader lost an object while packs were consolidated"
    rounds, seen = map(int, out.split())
    assert rounds >= 2 and seen > 0
    assert len(acked) == 360
    shared = set(git(gitdir, "rev-list", "shared").split())
    for k in range(3):
        mine = set(git(gitdir, "rev-list", f"w/p{k}").split())
        assert {n for n, _ in acked[k * 120 : (k + 1) * 120]} <= mine
    assert {s for _, s in acked} <= shared and len(shared) == 361  # every acknowledged write, once
    # every write was a pack, and their number stayed bounded (one more per writer racing a merge)
    # (the packs the multi-pack-index covers are settled, a few: the others stay bounded)
    settled = set(midx_packs(gitdir))
    assert _loose(gitdir) == 0 and 1 <= _packs(gitdir) - len(settled) <= MAX_PACKS + 3 and len(settled) <= 8
    if settled:
        git(gitdir, "multi-pack-index", "verify")
    assert fsck_clean(gitdir)[0]


def test_a_killed_writer_leaves_a_valid_repository(tmp_path: Path) -> None:
    gitdir = tmp_path / "r.git"
    ReasoningRepo.init(gitdir)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(gitdir), "k", "100000"], stdout=subprocess.PIPE, text=True, env=_env()
    )
    assert writer.stdout is not None
    acked = [writer.stdout.readline().split() for _ in range(60)]  # well past the first consolidation
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=TIMEOUT)
    writer.stdout.close()
    assert fsck_clean(gitdir)[0]  # whatever it was writing is at most unreachable
    nodes = set(git(gitdir, "rev-list", "w/k").split())
    assert {n for n, _ in acked} <= nodes
    assert not list((gitdir / "objects" / "pack").glob("*.pack.tmp"))
    # a new writer carries on, and its packs are consolidated as before
    repo = ReasoningRepo.open(gitdir)
    for i in range(2 * MAX_PACKS):
        repo.commit_files("after", {"f": str(i)}, f"after {i}")
    assert _packs(gitdir) <= MAX_PACKS + 1 and git(gitdir, "show", "after:f") == str(2 * MAX_PACKS - 1)
    assert fsck_clean(gitdir)[0]
