"""The walkthrough cookbooks write under an output directory outside the checkout, keep what
they say they wrote, and change no file of the repository."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gitcli import fsck_clean
from timeouts import TEST_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]


def _status() -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all", "--ignored=matching"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()}")
    return "\n".join(l for l in proc.stdout.splitlines() if "__pycache__" not in l and ".pyc" not in l)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, extra", [("langgraph_checkpointer", "langgraph"), ("llamaindex_memory", "llama_index.core")]
)
def test_a_walkthrough_keeps_every_path_it_prints_and_leaves_the_checkout_alone(name, extra, tmp_path):
    pytest.importorskip(extra)
    before = _status()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    for _ in range(2):  # a rerun into the default output directory starts afresh
        proc = subprocess.run(
            [sys.executable, str(ROOT / "cookbooks" / f"{name}.py")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TEST_TIMEOUT,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    repo = tmp_path / "got-cookbooks" / name / "agent.git"
    assert f"kept {repo}" in proc.stdout
    printed = set(re.findall(re.escape(str(tmp_path)) + r"[^\s`:'\")]*", proc.stdout))
    assert printed and all(Path(p).exists() for p in printed), printed  # nothing printed was deleted
    assert fsck_clean(repo)[0]
    assert _status() == before
