"""``cookbooks/scienceworld_episodes.py`` end to end as a subprocess: the real simulator, the stand-in server.

One run with all five memory backends on one short task (2 variations, 5 steps), the
scripted policy answering over HTTP; it must print the table, write the files and pass
its own ``git fsck`` of every arm's repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gitcli import git
from timeouts import TEST_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
#: The simulator is a Java program; CI installs a runtime (.ci/run), so there it never skips.
needs_java = pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("CI"),
    reason="ScienceWorld's simulator needs a Java runtime (apt-get install -y openjdk-17-jre-headless)",
)
COOKBOOK = ROOT / "cookbooks" / "scienceworld_episodes.py"


def _run(*args):
    return subprocess.run(
        [sys.executable, str(COOKBOOK), *map(str, args)], capture_output=True, text=True, timeout=TEST_TIMEOUT
    )


def test_help_lists_the_options():
    out = _run("--help")
    assert out.returncode == 0, out.stderr
    for option in (
        "--tasks",
        "--variations",
        "--split",
        "--max-steps",
        "--backends",
        "--k-lessons",
        "--base-url",
        "--model",
        "--standin",
        "--max-tokens",
        "--workers",
        "--seed",
        "--out",
    ):
        assert option in out.stdout, option


def test_no_endpoint_is_a_clear_user_error(tmp_path, monkeypatch):
    monkeypatch.delenv("GOT_BASE_URL", raising=False)
    out = _run("--out", tmp_path / "r", "--backends", "none")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--standin" in out.stdout
    assert not (tmp_path / "r" / "config.json").exists()


@pytest.mark.slow
@needs_java
def test_a_standin_run_of_every_backend(tmp_path):
    out_dir = tmp_path / "sw"
    proc = _run(
        "--standin",
        "--tasks",
        "find-non-living-thing",
        "--variations",
        2,
        "--max-steps",
        5,
        "--workers",
        2,
        "--bootstrap",
        500,
        "--out",
        out_dir,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = " ".join(proc.stdout.split())
    assert "Table 5 — cross-episode memory on ScienceWorld" in text and "scripted policy" in text
    for arm in ("none", "markdown", "vector", "graph", "git"):
        assert f"repos/{arm}.git: ok" in text
        # two episodes, each on its own branch with its outcome tag
        assert len(git(out_dir / "repos" / f"{arm}.git", "branch", "--list", "episodes/*").split()) == 2
        assert len(git(out_dir / "repos" / f"{arm}.git", "tag", "--list").split()) == 2
    assert "[git] 2/2 find-non-living-thing" in proc.stderr
    table = (out_dir / "table.md").read_text()
    assert table.count("| 2 |") == 5
    assert (out_dir / "learning_curve.png").stat().st_size > 1000
    rows = [json.loads(line) for line in (out_dir / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and all(r["calls"] >= r["steps"] for r in rows)
    second = {r["arm"]: r for r in rows if r["index"] == 1}
    assert second["none"]["lessons_used"] == []
    assert all(len(second[arm]["lessons_used"]) == 1 for arm in ("markdown", "vector", "graph", "git"))
    assert json.loads((out_dir / "config.json").read_text())["model_label"] == "stand-in model (scripted policy)"
