"""Checks on what git holds: every result there, every object intact, every node a commit, fsck."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from got_core.bench.audit._core import Check, finding, listing
from got_core.bench.audit._view import RunView, tree_damage, walk_commits
from got_core.bench.runner import INGEST_PREFIX, LESSON_PREFIX
from got_core.errors import GotError
from got_core.storage.git import GitRepo

__all__ = ["check_complete", "check_fsck", "check_nodes", "check_objects"]


def check_complete(view: RunView) -> Check:
    """Every task of the config has a readable result commit."""
    missing = [t.key for t in view.tasks if t.sha is None]
    broken = [f"{t.key} ({t.error})" for t in view.tasks if t.sha is not None and t.record is None]
    unpaired = _unpaired(view)
    if missing or broken or unpaired:
        parts = [listing(unpaired)] if unpaired else []
        if missing:
            parts.append(
                f"{len(missing)} of {len(view.tasks)} tasks have no result commit (first: "
                f"{', '.join(missing[:3])}); resume the run with --resume"
            )
        if broken:
            parts.append(f"{len(broken)} result records cannot be read: {listing(broken)}")
        return Check("results complete", "FAIL", "; ".join(parts))
    return Check("results complete", "PASS", f"{len(view.tasks)} result commits in central.git")


def _unpaired(view: RunView) -> list[str]:
    """The paired design: every test arm has a task for every test problem, and the task list
    is the one the run's identity names (a task dropped from config.json shows here)."""
    out = []
    keys = [t.key for t in view.tasks]
    named = (view.config.get("identity") or {}).get("tasks")
    if isinstance(named, list) and named != keys:
        out.append(f"config.json lists {len(keys)} tasks, its identity {len(named)}")
    test = [t.entry for t in view.tasks if t.entry.get("phase") == "test"]
    split = view.config.get("split")
    problems = list(split["test"]) if split else list(dict.fromkeys(str(e["problem_id"]) for e in test))
    have = {(str(e["arm"]), str(e["problem_id"])) for e in test}
    for arm in dict.fromkeys(str(e["arm"]) for e in test):
        lacking = [p for p in problems if (arm, p) not in have]
        if lacking:
            out.append(f"arm {arm} has no task for {len(lacking)} test problems (first: {lacking[0]})")
    return out


def _repo_damage(gitdir: Path, prefixes: tuple[str, ...], label: str) -> tuple[int, list[str]]:
    git = GitRepo(gitdir, create=False)
    # A tag is followed to its commit; a ref to a missing object stays as it is (and is reported).
    tips = [
        git.peel_to_commit(sha) or sha for name, sha in sorted(git.list_refs().items()) if name.startswith(prefixes)
    ]
    commits, problems = walk_commits(git, tips)
    trees: dict[str, list[tuple[str, str, str]]] = {}
    for oid, tree, _parents in commits:
        problems += tree_damage(git, oid, tree, trees)
    return len(commits), [f"{label}: {p}" for p in problems]


def check_objects(view: RunView) -> Check:
    """Every commit, tree and blob under every result and every memory ref is present and sound.

    Objects are read raw and hashed (:meth:`GitRepo.object_problem`), so a deleted or
    altered object is a FAIL row naming it, with the result or memory it belongs to.
    """
    owners: dict[str, list[str]] = {}  # damaged object -> the results it lies under
    n_trees = 0
    for tv in view.tasks:
        if tv.error:
            owners.setdefault(f"central.git: {tv.error}", []).append(tv.key)
        elif tv.record is not None:
            n_trees += 1
            for p in view.damage(tv):
                owners.setdefault(f"central.git: {p}", []).append(tv.key)
    problems = [
        f"{p} (under the result{'s' if len(keys) > 1 else ''} of {', '.join(keys[:2])}"
        + (f" and {len(keys) - 2} more)" if len(keys) > 2 else ")")
        for p, keys in owners.items()
    ]
    n_mem, mem_problems = _repo_damage(view.central.gitdir, (INGEST_PREFIX, LESSON_PREFIX), "central.git")
    problems += mem_problems
    git_mem = view.run_dir / "memory" / "git"
    n_git = 0
    if git_mem.exists():
        try:
            n_git, more = _repo_damage(git_mem, ("refs/",), "memory/git")
            problems += more
        except GotError as exc:
            problems.append(f"memory/git cannot be opened: {exc}")
    if problems:
        return Check("objects intact", "FAIL", f"{len(problems)} missing or damaged objects: {listing(problems)}")
    return Check(
        "objects intact",
        "PASS",
        f"every object under {n_trees} results, {n_mem} ingest/lesson commits"
        + (f" and {n_git} commits of memory/git" if git_mem.exists() else "")
        + " present and hashing to its id",
    )


def check_nodes(view: RunView) -> Check:
    """Each result commit reaches exactly the nodes its record lists, each a commit with ``metadata.json``."""
    bad: list[str] = []
    total = 0
    for tv in view.finished():
        with finding(bad, tv.key):
            labels = Counter(n.label for n in view.nodes(tv))
            total += sum(labels.values())
            recorded = Counter(str(x) for x in (tv.record or {}).get("node_labels") or [])
            if labels != recorded or sum(labels.values()) != (tv.record or {}).get("n_nodes"):
                bad.append(
                    f"{tv.key}: {sum(labels.values())} node commits, {(tv.record or {}).get('n_nodes')} recorded"
                )
    if bad:
        return Check("every node a commit", "FAIL", listing(bad))
    return Check("every node a commit", "PASS", f"{total} nodes, each a commit reachable from its result")


def check_fsck(view: RunView) -> Check:
    """``git fsck`` of ``central.git`` (SKIP when the git binary is missing)."""
    try:
        ok, text = view.central.fsck()
    except (GotError, OSError) as exc:
        return Check("git fsck central.git", "SKIP", f"git unavailable ({exc})")
    return Check("git fsck central.git", "PASS" if ok else "FAIL", "clean" if ok else text.strip()[:300])
