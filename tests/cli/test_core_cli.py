"""The `got` CLI on a real demo repository."""

from __future__ import annotations

import json

import pytest

from got_core import ReasoningRepo
from got_core.cli import main


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def demo_repo(tmp_path, capsys):
    path = tmp_path / "demo.git"
    code, out, _ = run(capsys, "demo", "--repo", str(path))
    assert code == 0 and "replay" in out
    return path


def test_demo_log_show_tags_json(demo_repo, capsys):
    code, out, _ = run(capsys, "log", "--all", "--json", "-r", str(demo_repo))
    log = json.loads(out)
    assert code == 0 and len(log) == 6  # root, 4 children, 1 lesson
    assert any("best" in entry["tags"] for entry in log)
    code, out, _ = run(capsys, "tags", "--json", "-r", str(demo_repo))
    tags = json.loads(out)
    assert tags["best"] == next(e["oid"] for e in log if "best" in e["tags"])
    code, out, _ = run(capsys, "show", "best", "--json", "-r", str(demo_repo))
    node = json.loads(out)
    assert code == 0 and "120 / 1.5 = 80" in node["thought"] and node["scores"]["s_comb"] > 0.8


def test_diff_grep_search_replay(demo_repo, capsys, tmp_path):
    repo = ReasoningRepo(demo_repo, create=False)
    failed = next(t for t in repo.tags("failed_"))
    code, out, _ = run(capsys, "diff", failed, "best", "-p", "thought.md", "-r", str(demo_repo))
    assert code == 0 and "+Speed is distance over time" in out
    code, out, _ = run(capsys, "grep", "km/h", "-F", "--json", "-r", str(demo_repo))
    assert code == 0 and len(json.loads(out)) == 5  # the problem statement and 4 children
    code, out, _ = run(capsys, "grep", "180 km/h", "-S", "--json", "-r", str(demo_repo))
    assert next(h["summary"] for h in json.loads(out)).endswith("= 180 km/h.")
    code, out, _ = run(capsys, "search", "average speed", "--json", "-r", str(demo_repo))
    assert code == 0 and json.loads(out)[0]["rho"] > 0
    code, out, _ = run(capsys, "replay", "best", str(tmp_path / "out"), "-r", str(demo_repo))
    assert code == 0 and (tmp_path / "out" / "thought.md").read_text().startswith("Speed is")


def test_verify_fsck_bundle_unbundle(demo_repo, capsys, tmp_path):
    code, out, _ = run(capsys, "verify", "-r", str(demo_repo))
    assert code == 1 and "unsigned" in out  # nothing was signed
    code, out, _ = run(capsys, "fsck", "-r", str(demo_repo))
    assert code == 0 and "clean" in out
    bundle = tmp_path / "demo.bundle"
    code, out, _ = run(capsys, "bundle", str(bundle), "-r", str(demo_repo))
    assert code == 0 and "verified" in out
    copy = tmp_path / "copy.git"
    code, out, _ = run(capsys, "unbundle", str(bundle), "-r", str(copy))
    assert code == 0
    assert ReasoningRepo(copy).tags() == ReasoningRepo(demo_repo).tags()


def test_merge_conflicts_exit_3(tmp_path, capsys):
    a = ReasoningRepo.init(tmp_path / "a.git")
    b = ReasoningRepo.init(tmp_path / "b.git")
    base = a.commit_files("memory", {"lessons/k.md": "base\n"}, "base\n")
    b.fetch(a.gitdir, name="a")
    b.set_ref("memory", base)
    a.commit_files("memory", {"lessons/k.md": "alice says yes\n"}, "a\n")
    b.commit_files("memory", {"lessons/k.md": "bob says no\n"}, "b\n")
    code, out, _ = run(capsys, "merge", str(a.gitdir), "-r", str(b.gitdir))
    assert code == 3 and "CONFLICT lessons/k.md" in out
    code, out, _ = run(capsys, "merge", str(a.gitdir), "-s", "theirs", "-r", str(b.gitdir))
    assert code == 0 and b.read_file("memory", "lessons/k.md") == b"alice says yes\n"


def test_errors_are_clear(tmp_path, capsys):
    code, _, err = run(capsys, "log", "-r", str(tmp_path / "missing.git"))
    assert code == 2 and "no git repository" in err
    ReasoningRepo.init(tmp_path / "r.git")
    code, _, err = run(capsys, "show", "no-such-thing", "-r", str(tmp_path / "r.git"))
    assert code == 2 and "no commit, branch or tag" in err
