"""The LlamaIndex cookbook runs end to end (two sessions, a restart in a new process, the log)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gitcli import fsck_clean, git
from timeouts import TEST_TIMEOUT

COOKBOOK = Path(__file__).resolve().parents[3] / "cookbooks" / "llamaindex_memory.py"


def test_help():
    out = subprocess.run(
        [sys.executable, str(COOKBOOK), "--help"], capture_output=True, text=True, timeout=TEST_TIMEOUT
    )
    assert out.returncode == 0 and "--repo" in out.stdout


def test_run_writes_restores_and_logs(tmp_path):
    repo = tmp_path / "agent.git"
    out = subprocess.run(
        [sys.executable, str(COOKBOOK), "--repo", str(repo)], capture_output=True, text=True, timeout=TEST_TIMEOUT
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "restored session 'alice' (8 messages" in text and "restored session 'bob' (6 messages" in text
    assert "the earlier turns came from git: ['What is 2 + 3?', 'And if I add 10 to that?'" in text
    assert "#6 " in text and "What was my first question?" in text  # the log after the restart
    assert git(repo, "rev-list", "--count", "refs/got/sessions/alice").strip() == "6"
    assert fsck_clean(repo)[0]
