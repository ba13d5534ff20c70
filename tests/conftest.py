"""Shared fixtures and settings.

Every test runs with an isolated HOME and no user git config. Every test gets the time
limit ``GOT_TEST_TIMEOUT`` (seconds, default 600; see ``tests/timeouts.py``) unless
``--timeout`` or ``PYTEST_TIMEOUT`` says otherwise. Heavy end-to-end tests are marked
``slow`` and still run by default (``-m "not slow"`` leaves them out for a quick loop).
"""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
import pytest
from timeouts import TEST_TIMEOUT

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

DATA = Path(__file__).parent / "data"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Give pytest-timeout the suite's one limit unless the command line or PYTEST_TIMEOUT sets one."""
    if getattr(config.option, "timeout", None) is None and not os.environ.get("PYTEST_TIMEOUT"):
        config.option.timeout = TEST_TIMEOUT


@pytest.fixture(autouse=True)
def isolated_git_config(tmp_path_factory, monkeypatch):
    """Point HOME and every git config level at an empty directory (so no test depends on the machine's git setup)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    levels = [pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG, pygit2.enums.ConfigLevel.SYSTEM]
    saved = {lvl: pygit2.settings.search_path[lvl] for lvl in levels}
    for lvl in levels:
        pygit2.settings.search_path[lvl] = str(home)
    yield home
    for lvl, value in saved.items():
        pygit2.settings.search_path[lvl] = value


@pytest.fixture
def data_dir() -> Path:
    """The project-written sample data under tests/data."""
    return DATA


@pytest.fixture
def git_daemon(tmp_path):
    """A real ``git daemon`` (receive-pack enabled) serving ``tmp_path/served`` on 127.0.0.1; stopped after.

    ``git_daemon.url("central.git")`` is the ``git://`` URL of ``served/central.git``
    (create it with ``gitserver.make_bare(git_daemon.base)``).
    """
    from gitserver import GitDaemon

    with GitDaemon(tmp_path / "served") as daemon:
        yield daemon


@pytest.fixture
def http_git(tmp_path):
    """A real ``git http-backend`` behind an HTTP server on 127.0.0.1 (no authentication); stopped after."""
    from gitserver import HttpGit

    with HttpGit(tmp_path / "served-http") as server:
        yield server
