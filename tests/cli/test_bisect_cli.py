"""``got bisect`` from the command line, and the bisect cookbook end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from got_core.cli import main
from tests.core.test_bisect import PLANTED, build
from tests.gitcli import git

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))
CHECK = f"import os, pathlib, sys; t = ''.join(p.read_text() for p in pathlib.Path('files').rglob('*.md')); sys.exit(1 if {PLANTED!r} in t else 0)"


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_got_bisect_names_records_and_reports_json(tmp_path, capsys):
    repo, seed, commits = build(tmp_path / "m.git", 12, 9)
    repo.close()
    runline = f'{sys.executable} -c "{CHECK}"'
    code, out, err = run(capsys, "bisect", "-r", str(tmp_path / "m.git"), "--good", seed, "--run", runline)
    assert code == 0, err
    assert f"{commits[8]} is the first bad commit" in out and PLANTED in out
    assert err.count("step ") <= 4 and "at most" in err  # progress on stderr
    assert "first bad commit" in git(tmp_path / "m.git", "notes", "--ref=got-bisect", "show", commits[8])
    code, out, _ = run(
        capsys, "bisect", "-r", str(tmp_path / "m.git"), "--good", seed, "--run", runline, "--json", "--no-record"
    )
    data = json.loads(out)
    assert code == 0 and data["first_bad"] == commits[8] and data["candidates"] == 12
    assert all(s["verdict"] in ("good", "bad") for s in data["steps"]) and PLANTED in data["lesson"]


def test_got_bisect_errors_are_one_line_and_typed(tmp_path, capsys):
    repo, seed, commits = build(tmp_path / "m.git", 4, 2)
    repo.close()
    gd = str(tmp_path / "m.git")
    code, _, err = run(capsys, "bisect", "-r", gd, "--good", commits[3], "--bad", commits[0], "--run", "true")
    assert code == 2 and "not an ancestor" in err
    code, _, err = run(capsys, "bisect", "-r", gd, "--good", seed, "--run", "sh -c 'exit 129'")
    assert code == 1 and "aborts a bisection" in err
    code, _, err = run(capsys, "bisect", "-r", gd, "--good", seed, "--run", "true", "--metric", "x")
    assert code == 2 and "--threshold" in err
    code, _, err = run(capsys, "bisect", "-r", str(tmp_path / "missing.git"), "--good", seed, "--run", "true")
    assert code == 2 and not (tmp_path / "missing.git").exists()
    code, out, _ = run(capsys, "bisect", "-r", gd, "--good", seed, "--run", "sh -c 'exit 125'")
    assert code == 1 and "one of" in out  # every commit skipped: the suspects are listed


def test_the_cookbook_finds_the_planted_lesson_with_the_solver(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "cookbooks" / "bisect_memory.py"),
            "--lessons",
            "7",
            "--planted",
            "5",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stand-in model" in proc.stdout
    assert proc.stdout.count("is the first bad commit") == 2
    notes = git(tmp_path / "out" / "memory.git", "notes", "--ref=got-bisect", "list").split()
    assert len(notes) == 2  # one note (replaced once) on one commit: [note blob, commit]
    lesson = git(tmp_path / "out" / "memory.git", "log", "-1", "--format=%B", notes[1])
    assert "add the number of boxes" in lesson
