"""Run the real git binary in tests (compat checks on what we wrote)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def git(gitdir: Path | str, *args: str, check: bool = True, input: bytes | None = None) -> str:
    """``git --git-dir=<gitdir> args...`` with no user config; returns stdout as text."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"})
    proc = subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, env=env, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode("utf-8", "replace")


def fsck_clean(gitdir: Path | str) -> tuple[bool, str]:
    """(clean, output) of ``git fsck --strict``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    proc = subprocess.run(
        ["git", f"--git-dir={gitdir}", "fsck", "--strict", "--no-dangling"], capture_output=True, env=env
    )
    return proc.returncode == 0, (proc.stdout + proc.stderr).decode()


def unpack_all(gitdir: Path | str) -> None:
    """Turn every pack of ``gitdir`` into loose objects (``git unpack-objects``), for tests that
    damage one object's file: writes land in packs, and a pack is read before a loose copy."""
    folder = Path(gitdir) / "objects" / "pack"
    for idx in sorted(folder.glob("pack-*.idx")):
        pack = idx.with_suffix(".pack")
        data = pack.read_bytes()
        idx.unlink()
        pack.unlink()
        git(gitdir, "unpack-objects", "-q", input=data)


#: A fixed identity for commits the real git makes in tests.
STOCK_IDENTITY = {
    "GIT_AUTHOR_NAME": "stock",
    "GIT_AUTHOR_EMAIL": "stock@example.org",
    "GIT_COMMITTER_NAME": "stock",
    "GIT_COMMITTER_EMAIL": "stock@example.org",
}


def stock(gitdir: Path | str, *args: str) -> str:
    """The real git, with an identity and no user configuration; asserts it succeeded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(STOCK_IDENTITY, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    proc = subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def store_items(gitdir: Path | str, ref: str = "refs/got/store") -> dict[tuple[tuple[str, ...], str], object]:
    """(namespace, key) -> value of every item file on a GitStore's ref, read by the git binary."""
    out: dict[tuple[tuple[str, ...], str], object] = {}
    for entry in filter(None, git(gitdir, "ls-tree", "-r", "-z", ref).split("\x00")):
        meta, _path = entry.split("\t", 1)
        doc = json.loads(git(gitdir, "cat-file", "blob", meta.split()[2]))
        out[(tuple(doc["namespace"]), doc["key"])] = doc["value"]
    return out
