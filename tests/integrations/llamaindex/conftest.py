"""Fixtures for the LlamaIndex adapter tests: a repository path and git-side counters."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitcli import git

pytest.importorskip("llama_index.core")


@pytest.fixture
def repo_path(tmp_path: Path) -> Path:
    """Where a test's repository lives (created on first use by the memory)."""
    return tmp_path / "agent.git"


def commit_count(gitdir: Path, session: str) -> int:
    """Commits on a session's ref, counted by the real git binary (0 when the ref is absent)."""
    ref = f"refs/got/sessions/{session}"
    if not git(gitdir, "for-each-ref", ref).strip():
        return 0
    return int(git(gitdir, "rev-list", "--count", ref).strip())


@pytest.fixture
def commits():
    """``commits(gitdir, session) -> int`` (see :func:`commit_count`)."""
    return commit_count
