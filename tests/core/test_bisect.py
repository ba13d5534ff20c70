"""``bisect_memory``: git's semantics over the memory branch, checked against real ``git bisect run``."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from got_core.errors import BisectError, InvalidInputError, UnknownRefError, UnsafePathError
from got_core.memory.git import GitMemory
from got_core.repo import ReasoningRepo
from got_core.repo.bisect import BISECT_NOTES_REF, BisectContext, Metric, bisect_memory, command_check
from tests.gitcli import fsck_clean, git

PLANTED = "PLANTED: add the numbers instead of multiplying them."
ME = ("-c", "user.name=Tester", "-c", "user.email=tester@example.com")
TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))


def build(path: Path, n: int, planted: int | None) -> tuple[ReasoningRepo, str, list[str]]:
    """A memory branch: a seed commit, then ``n`` lessons (the planted one at 1-based ``planted``)."""
    repo = ReasoningRepo(path)
    memory = GitMemory(repo=repo)
    memory.add_insight("Seed: restate the problem first.", topic_key="seed")
    seed = repo.tip("refs/heads/memory")
    commits = []
    for i in range(1, n + 1):
        memory.add_insight(PLANTED if i == planted else f"Harmless lesson number {i} about units.", topic_key=f"t{i}")
        commits.append(repo.tip("refs/heads/memory"))
    assert seed is not None
    return repo, seed, [c for c in commits if c]


def planted_in(ctx: BisectContext) -> bool:
    return any(PLANTED in p.read_text(encoding="utf-8") for p in ctx.files.rglob("*.md"))


class Counter:
    """A Python check that counts its calls and sees the restored memory through GitMemory."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, ctx: BisectContext) -> int:
        self.calls.append(ctx.commit)
        memory = GitMemory(ctx.memory_repo, read_only=True, create=False)
        try:
            texts = [lesson.text for lesson in memory.all_lessons()]
        finally:
            memory.close()
        assert (PLANTED in texts) == planted_in(ctx)  # the bare repo and the files agree
        return 1 if PLANTED in texts else 0


def real_git_bisect(gitdir: Path, tmp: Path, good: list[str], bad: str, first_parent: bool = False) -> str:
    """The first bad commit by stock ``git bisect run`` on a clone (the oracle)."""
    tmp.mkdir(parents=True, exist_ok=True)
    work = tmp / "oracle"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(gitdir), str(work)], check=True, timeout=TIMEOUT)
    script = tmp / "oracle-check.py"
    script.write_text(
        "import pathlib, sys\n"
        f"sys.exit(1 if any({PLANTED!r} in p.read_text() for p in pathlib.Path('.').rglob('*.md')) else 0)\n"
    )
    subprocess.run(["git", "checkout", "-q", "--detach", bad], cwd=work, check=True, timeout=TIMEOUT)
    start = ["git", "bisect", "start", *(["--first-parent"] if first_parent else []), bad, *good]
    subprocess.run(start, cwd=work, check=True, capture_output=True, timeout=TIMEOUT)
    out = subprocess.run(
        ["git", "bisect", "run", sys.executable, str(script)],
        cwd=work,
        check=True,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    ).stdout
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", out, re.MULTILINE)
    assert found, out
    return found.group(1)


@pytest.mark.parametrize(
    ("n", "planted"),
    [(1, 1), (2, 1), (2, 2), (7, 1), (7, 4), (7, 7), (16, 11), (16, 1), (33, 20), (33, 33)],
)
def test_finds_the_planted_lesson_in_log2_n_tests(tmp_path, n, planted):
    repo, seed, commits = build(tmp_path / "m.git", n, planted)
    refs_before = git(repo.gitdir, "for-each-ref")
    counter = Counter()
    result = bisect_memory(repo, good=seed, check=counter)
    assert result.first_bad == commits[planted - 1]
    assert result.candidates == n
    assert len(counter.calls) == len(result.steps) <= math.ceil(math.log2(n))
    assert result.first_bad not in counter.calls[:-1] or counter.calls.count(result.first_bad) == 1
    assert PLANTED in result.lesson and result.trailers["Topic"] == f"t{planted}"
    # only the note moved: the user's branches and tags are as they were
    after = git(repo.gitdir, "for-each-ref")
    assert [ln for ln in after.splitlines() if BISECT_NOTES_REF not in ln] == refs_before.splitlines()
    note = git(repo.gitdir, "notes", f"--ref={BISECT_NOTES_REF}", "show", result.first_bad)
    assert '"first bad commit"' in note and seed in note
    assert fsck_clean(repo.gitdir)[0]
    if n in (7, 33):
        assert real_git_bisect(repo.gitdir, tmp_path, [seed], commits[-1]) == result.first_bad


def merged_history(path: Path) -> tuple[ReasoningRepo, str, dict[str, str]]:
    """seed → a1 → a2 ─┐ (memory), seed → b1 → b2(planted) → b3 ─┘ merged, then c1 on top."""
    repo = ReasoningRepo(path)
    memory = GitMemory(repo=repo)
    memory.add_insight("Seed lesson.", topic_key="seed")
    seed = repo.tip("refs/heads/memory")
    assert seed is not None
    side = GitMemory(repo=repo, branch="side")
    repo.set_ref("refs/heads/side", seed)
    names: dict[str, str] = {}
    for name, mem, text in [
        ("a1", memory, "Lesson a1."),
        ("b1", side, "Lesson b1."),
        ("a2", memory, "Lesson a2."),
        ("b2", side, PLANTED),
        ("b3", side, "Lesson b3."),
    ]:
        mem.add_insight(text, topic_key=name)
        names[name] = repo.tip(mem.ref) or ""
    main_tree = dict(repo.files(names["a2"]))
    merged = dict(main_tree, **repo.files(names["b3"]))
    oid = repo.prepare_commit([names["a2"], names["b3"]], merged, "Merge branch 'side' into memory\n")
    repo.set_ref("refs/heads/memory", oid)
    names["merge"] = oid
    memory.add_insight("Lesson c1.", topic_key="c1")
    names["c1"] = repo.tip("refs/heads/memory") or ""
    return repo, seed, names


def test_merged_history_matches_git_bisect_full_dag_and_first_parent(tmp_path):
    repo, seed, names = merged_history(tmp_path / "m.git")
    full = bisect_memory(repo, good=seed, check=Counter(), record=False)
    assert full.first_bad == names["b2"] == real_git_bisect(repo.gitdir, tmp_path / "a", [seed], names["c1"])
    assert full.candidates == 7
    fp = bisect_memory(repo, good=seed, check=Counter(), first_parent=True, record=False)
    # on the first-parent chain the merge is where the planted lesson arrives
    oracle = real_git_bisect(repo.gitdir, tmp_path / "b", [seed], names["c1"], first_parent=True)
    assert fp.first_bad == names["merge"] == oracle
    assert fp.candidates == 4  # a1, a2, merge, c1
    assert git(repo.gitdir, "notes", f"--ref={BISECT_NOTES_REF}", "list", check=False) == ""  # record=False


def test_skipped_commits_are_avoided_or_named(tmp_path):
    repo, seed, commits = build(tmp_path / "m.git", 9, 6)

    def skip_some(ctx: BisectContext) -> int:
        return 125 if ctx.commit in (commits[2], commits[3]) else (1 if planted_in(ctx) else 0)

    found = bisect_memory(repo, good=seed, check=skip_some, record=False)
    assert found.first_bad == commits[5]
    assert {s.commit for s in found.steps if s.verdict == "skip"} <= {commits[2], commits[3]}

    def skip_the_culprits_parent(ctx: BisectContext) -> int:
        return 125 if ctx.commit in (commits[4], commits[5]) else (1 if planted_in(ctx) else 0)

    hidden = bisect_memory(repo, good=seed, check=skip_the_culprits_parent)
    assert hidden.first_bad is None and hidden.note_ref is None
    assert set(hidden.suspects) == {commits[4], commits[5], commits[6]}
    assert git(repo.gitdir, "notes", f"--ref={BISECT_NOTES_REF}", "list", check=False) == ""


def test_a_bad_range_is_a_typed_error(tmp_path):
    repo, seed, commits = build(tmp_path / "m.git", 4, 2)
    with pytest.raises(InvalidInputError, match="not an ancestor"):
        bisect_memory(repo, good=commits[3], bad=commits[1], check=Counter())
    with pytest.raises(InvalidInputError, match="same commit"):
        bisect_memory(repo, good=commits[1], bad=commits[1], check=Counter())
    with pytest.raises(UnknownRefError):
        bisect_memory(repo, good="no-such-rev", check=Counter())
    with pytest.raises(InvalidInputError, match="at least one good"):
        bisect_memory(repo, good=[], check=Counter())
    with pytest.raises(InvalidInputError, match="no commits"):
        bisect_memory(repo, good=seed, branch="nothing-here", check=Counter())


@pytest.mark.parametrize("status", [128, 200, 255])
def test_exit_statuses_that_abort(tmp_path, status):
    repo, seed, _ = build(tmp_path / "m.git", 5, 3)
    before = git(repo.gitdir, "for-each-ref")
    cmd = [sys.executable, "-c", f"import sys; sys.exit({status})"]
    with pytest.raises(BisectError, match=f"status {status}"):
        bisect_memory(repo, good=seed, check=cmd, scratch=tmp_path / "scratch" / "deep")
    assert git(repo.gitdir, "for-each-ref") == before  # nothing recorded
    assert not (tmp_path / "scratch").exists()  # the directories it created are gone


def test_a_scratch_directory_that_existed_is_kept_with_its_files(tmp_path):
    repo, seed, _ = build(tmp_path / "m.git", 5, 3)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    bisect_memory(repo, good=seed, check=[sys.executable, "-c", "pass"], scratch=tmp_path / "mine")
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["keep.txt"]


def test_a_command_killed_by_a_signal_or_past_its_timeout_aborts(tmp_path):
    repo, seed, _ = build(tmp_path / "m.git", 3, 2)
    with pytest.raises(BisectError, match="signal"):
        bisect_memory(repo, good=seed, check=[sys.executable, "-c", "import os, signal; os.kill(os.getpid(), 9)"])
    # the expiry is the behaviour under test: a command that would sleep for an hour
    sleeper = [sys.executable, "-c", "import time; time.sleep(3600)"]
    with pytest.raises(BisectError, match="ran past"):
        bisect_memory(repo, good=seed, check=sleeper, timeout=1)


def test_commands_run_in_the_scratch_directory_without_a_shell(tmp_path):
    repo, seed, commits = build(tmp_path / "m.git", 6, 4)
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, pathlib, subprocess, sys\n"
        "d = pathlib.Path(os.environ['GOT_BISECT_DIR'])\n"
        "assert pathlib.Path.cwd() == d, (pathlib.Path.cwd(), d)\n"
        "tip = subprocess.run(['git', '--git-dir', os.environ['GOT_BISECT_MEMORY'], 'rev-parse', 'memory'],\n"
        "                     capture_output=True, text=True, check=True).stdout.strip()\n"
        "assert tip == os.environ['GOT_BISECT_COMMIT'], tip\n"
        "text = ''.join(p.read_text() for p in (d / 'files').rglob('*.md'))\n"
        "# a check that writes into its restored memory changes nothing of the user's\n"
        "subprocess.run(['git', '--git-dir', os.environ['GOT_BISECT_MEMORY'], 'update-ref', '-d', 'refs/heads/memory'],\n"
        "               check=True)\n"
        "print(sys.argv[1])\n"
        f"sys.exit(1 if {PLANTED!r} in text else 0)\n"
    )
    before = git(repo.gitdir, "for-each-ref")
    result = bisect_memory(repo, good=seed, check=f"{sys.executable} {probe} 'a;b $HOME'", record=False)
    assert result.first_bad == commits[3]
    assert git(repo.gitdir, "for-each-ref") == before
    out = command_check(f"{sys.executable} {probe} 'a;b $HOME'")
    ctx_result = bisect_memory(repo, good=seed, check=out, record=False)
    assert ctx_result.first_bad == commits[3]
    with pytest.raises(InvalidInputError, match="empty"):
        command_check("   ")


def test_metric_mode_both_directions_and_a_missing_number(tmp_path):
    repo, seed, commits = build(tmp_path / "m.git", 8, 5)
    script = tmp_path / "score.py"
    script.write_text(
        "import os, pathlib\n"
        "text = ''.join(p.read_text() for p in pathlib.Path(os.environ['GOT_BISECT_FILES']).rglob('*.md'))\n"
        f"bad = {PLANTED!r} in text\n"
        "print('accuracy: 0.900 (noise 1.0)')\n"
        "print('accuracy:', 0.4 if bad else 0.8)\n"
        "print('loss', 2.5 if bad else 0.5)\n"
    )
    cmd = [sys.executable, str(script)]
    acc = bisect_memory(repo, good=seed, check=cmd, metric=Metric(r"^accuracy: ([0-9.]+)$", 0.7), record=False)
    assert acc.first_bad == commits[4]
    assert {s.metric for s in acc.steps} <= {0.4, 0.8}  # the last match of the line counts
    loss = bisect_memory(
        repo, good=seed, check=cmd, metric=Metric(r"loss ([0-9.]+)", 1.0, higher_is_better=False), record=False
    )
    assert loss.first_bad == commits[4]
    with pytest.raises(BisectError, match="no number matching"):
        bisect_memory(repo, good=seed, check=cmd, metric=Metric(r"recall ([0-9.]+)", 0.5), record=False)
    with pytest.raises(InvalidInputError, match="not a regular expression"):
        Metric("(", 1.0)


def test_a_hostile_tree_on_the_branch_is_refused_before_the_check_runs(tmp_path):
    repo, seed, _ = build(tmp_path / "m.git", 2, None)
    tip = repo.tip("refs/heads/memory")
    assert tip is not None
    tree = git(repo.gitdir, "rev-parse", f"{tip}^{{tree}}").strip()
    blob = git(repo.gitdir, "hash-object", "-w", "--stdin", input=b"[core]\n\tfsmonitor = touch pwned\n").strip()
    evil_tree = git(
        repo.gitdir, "mktree", "--missing", input=f"040000 tree {tree}\tok\n100644 blob {blob}\t.GIT\n".encode()
    )
    evil = git(repo.gitdir, *ME, "commit-tree", evil_tree.strip(), "-p", tip, "-m", "evil").strip()
    top = git(repo.gitdir, *ME, "commit-tree", evil_tree.strip(), "-p", evil, "-m", "on top").strip()
    git(repo.gitdir, "update-ref", "refs/heads/memory", top)
    ran: list[str] = []

    def always_good(ctx: BisectContext) -> int:
        ran.append(ctx.commit)
        return 0

    with pytest.raises(UnsafePathError, match=r"\.GIT"):
        bisect_memory(repo, good=seed, check=always_good, scratch=tmp_path / "s")
    assert ran == [tip]  # the check ran on the clean commit, never on the hostile one
    assert not list((tmp_path / "s").rglob(".GIT")) and not list(tmp_path.rglob("pwned"))
