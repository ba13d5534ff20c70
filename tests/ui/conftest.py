"""Fixtures for the viewer's tests: real repositories, a real server, Debian's chromium via Selenium.

The browser is the system's (``/usr/bin/chromium`` and ``/usr/bin/chromedriver``, installed by
``.ci/run`` when missing); Selenium Manager is never asked to fetch anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from timeouts import TEST_TIMEOUT as TIMEOUT

from got_core.collab import merge_recorded
from got_core.repo import ReasoningRepo
from got_core.ui.server import UIConfig, make_server

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("GOT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("GOT_CHROMEDRIVER", "/usr/bin/chromedriver")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def run_got(home: Path, *args: str) -> None:
    """Run the ``got`` CLI of this checkout (as a module, so the worktree's code runs)."""
    cmd = [sys.executable, "-c", "from got_core.cli import main; raise SystemExit(main())", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(home), timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> dict[str, Path]:
    """The repositories every page is opened on: ``got demo``, ``got threads demo``, a conflicted merge, a run."""
    base = tmp_path_factory.mktemp("ui-repos")
    home = base / "home"
    home.mkdir()
    run_got(home, "demo", "-r", str(base / "demo.git"))
    run_got(home, "threads", "demo", "-r", str(base / "threads.git"))
    merge = base / "merge.git"
    with ReasoningRepo.init(merge) as repo:
        repo.commit_files("memory", {"lessons/units.md": "Check the units.\n"}, "lesson: units\n")
        base_tip = repo.tip("memory")
        assert base_tip
        repo.create_branch("agents/alice/memory", base_tip)
        repo.commit_files("memory", {"lessons/units.md": "Always convert to SI units first.\n"}, "lesson: ours\n")
        repo.commit_files(
            "agents/alice/memory", {"lessons/units.md": "Keep the units of the question.\n"}, "lesson: theirs\n"
        )
        result = merge_recorded(repo, "agents/alice/memory", name="alice", into="memory")
        assert result.status == "conflicted"
    sessions = base / "sessions.git"
    from llama_index.core.llms import ChatMessage

    from got_integrations.llamaindex import GitMemory

    memory = GitMemory.from_defaults(path=sessions, session_id="alice")
    memory.put(ChatMessage(role="user", content="What is the boiling point of water at sea level?"))
    memory.put(ChatMessage(role="assistant", content="100 °C (212 °F) at 1 atm."))
    memory.put(ChatMessage(role="user", content="And on Everest?"))
    memory.repo.close()
    run = base / "run"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "cookbooks" / "five_substrates.py"),
            "--standin",
            "--k-study",
            "2",
            "--m-test",
            "2",
            "--workers",
            "1",
            "--bootstrap",
            "100",
            "--backends",
            "none,git",
            "--method",
            "tot",  # a tree to drill into (the paper's default solver is single-shot: one node)
            "--no-progress",
            "--out",
            str(run),
        ],
        capture_output=True,
        text=True,
        env=_env(home),
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {
        "demo": base / "demo.git",
        "threads": base / "threads.git",
        "merge": merge,
        "run": run,
        "sessions": sessions,
    }


class Served:
    """A running viewer: its base URL and config."""

    def __init__(self, config: UIConfig) -> None:
        self.config = config
        self.server = make_server(config, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(TIMEOUT)


@pytest.fixture
def serve() -> Iterator:
    """``serve(repo, run_dir=None, allow_write=False)`` starts a viewer on a free port; all stop at teardown."""
    started: list[Served] = []

    def start(repo: Path, run_dir: Path | None = None, allow_write: bool = False) -> Served:
        s = Served(UIConfig(repo, run_dir, allow_write))
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """Headless Debian chromium driven by chromium-driver (paths explicit: nothing is downloaded)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            pytest.fail(f"{path} is missing: install Debian's chromium and chromium-driver (.ci/run does)")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not reach the network
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(TIMEOUT)
    yield driver
    driver.quit()
