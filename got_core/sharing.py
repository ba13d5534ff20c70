"""Sharing reasoning between repositories: fetch, merge, push, bundles, maintenance.

Merges are real three-way git merges computed in memory (no working tree);
conflicts come back as data (path, base, ours, theirs) and are never resolved
silently: a strategy (``ours``, ``theirs`` or a caller's resolver) must decide,
and its decision is itself a merge commit naming both parents (DESIGN §4).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from got_core._git import RefRace
from got_core._gitcli import GitCommandError, run_git
from got_core.errors import (
    CorruptRepositoryError,
    InvalidInputError,
    RemoteError,
)
from got_core.names import encode_component, short_ref
from got_core.types import Conflict, MergeResult

if TYPE_CHECKING:
    from got_core.repo import ReasoningRepo

__all__ = ["fetch", "push", "merge", "bundle", "verify_bundle", "unbundle", "repack", "fsck", "Resolver"]

#: A resolver gets a conflict and returns the merged content (None deletes the path),
#: or raises MergeConflictError to leave it for review.
Resolver = Callable[[Conflict], "bytes | str | None"]


def _check_source(source: str) -> None:
    if "://" in source or source.startswith("git@"):
        return
    if not Path(source).exists():
        raise RemoteError(f"no repository at {source}; give a path or URL of a peer repository")


def fetch(repo: "ReasoningRepo", source: str, *, branches: Sequence[str] | None = None,
          name: str | None = None, tags: bool = True, notes: bool = True) -> dict[str, str]:
    """Fetch a peer's branches into ``refs/remotes/<name>/``.

    Args:
        source: path or URL of the peer repository.
        branches: which branches (default all).
        name: the remote's local name (default: derived from the source path).
        tags: also fetch tags (never overwriting a local tag that differs).
        notes: also fetch notes refs, kept apart under ``refs/notes/remotes/<name>/``.

    Returns:
        The fetched remote-tracking refs -> SHAs.

    Raises:
        RemoteError: unreachable, not a repository, or it asked for credentials.
    """
    _check_source(source)
    name = encode_component(name or Path(source.rstrip("/")).name.removesuffix(".git") or "peer", "remote name")
    if branches is None:
        specs = [f"+refs/heads/*:refs/remotes/{name}/*"]
    else:
        specs = [f"+{repo.ref(b)}:refs/remotes/{name}/{short_ref(repo.ref(b))}" for b in branches]
    if notes:
        specs.append(f"+refs/notes/*:refs/notes/remotes/{name}/*")
    repo.git.fetch(source, specs)
    if tags:
        _fetch_tags(repo, source, name)
    return repo.git.list_refs(f"refs/remotes/{name}/")


def _fetch_tags(repo: "ReasoningRepo", source: str, name: str) -> None:
    # Fetch into a private namespace first so a peer cannot move one of our tags.
    repo.git.fetch(source, [f"+refs/tags/*:refs/got/peer-tags/{name}/*"])
    staged = repo.git.list_refs(f"refs/got/peer-tags/{name}/")
    for ref, oid in staged.items():
        tag = ref[len(f"refs/got/peer-tags/{name}/"):]
        local = repo.git.ref_target("refs/tags/" + tag)
        if local is None:
            try:
                repo.git.cas_ref("refs/tags/" + tag, oid, None)
            except RefRace:
                pass
        repo.git.delete_ref(ref)


def push(repo: "ReasoningRepo", dest: str, *, branches: Sequence[str] = ("memory",),
         tag_prefixes: Sequence[str] = ("success_",), notes: Sequence[str] = (), force: bool = False) -> list[str]:
    """Push selected refs (selective sharing: by default only ``memory`` and success tags).

    Returns:
        The refspecs pushed.

    Raises:
        RemoteError: the peer refused (non-fast-forward without ``force``) or is unreachable.
    """
    _check_source(dest)
    plus = "+" if force else ""
    specs = []
    for b in branches:
        ref = repo.ref(b)
        if repo.git.ref_target(ref):
            specs.append(f"{plus}{ref}:{ref}")
    for tag in repo.tags():
        if any(tag.startswith(p) for p in tag_prefixes):
            specs.append(f"refs/tags/{tag}:refs/tags/{tag}")
    for n in notes:
        ref = repo._notes_ref(n)
        if repo.git.ref_target(ref):
            specs.append(f"{plus}{ref}:{ref}")
    if specs:
        for _ in repo.attempts(f"push to {dest}"):
            try:
                repo.git.push(dest, specs)
                break
            except RemoteError as exc:
                # another pusher holds one of the same ref locks on the peer: retry
                if "lock" not in str(exc).lower() and "exists" not in str(exc).lower():
                    raise
    return specs


def _text(repo: "ReasoningRepo", blob: str | None) -> str | None:
    return None if blob is None else repo.git.read_blob(blob).decode("utf-8", "replace")


def merge(repo: "ReasoningRepo", theirs: str, *, into: str = "memory", message: str | None = None,
          strategy: str | Resolver = "review") -> MergeResult:
    """Three-way merge of ``theirs`` into the branch ``into``.

    Args:
        theirs: a revision (e.g. ``refs/remotes/peer/memory``).
        into: the branch to update.
        message: merge commit message.
        strategy: ``review`` (default: commit nothing when conflicted and return the
            conflicts), ``ours``, ``theirs``, or a resolver callable.

    Returns:
        A :class:`MergeResult`; ``status == "conflicted"`` leaves ``into`` untouched.

    Raises:
        MergeConflictError: the resolver abstained on some conflict.
        ConcurrentUpdateError: ``into`` kept moving during the merge.
    """
    if not (callable(strategy) or strategy in ("review", "ours", "theirs")):
        raise InvalidInputError(f"strategy must be 'review', 'ours', 'theirs' or a callable, not {strategy!r}")
    git = repo.git
    ref = repo.ref(into)
    their = repo.resolve(theirs)
    for _ in repo.attempts(ref):
        ours = git.ref_target(ref)
        ours = git.peel_to_commit(ours) if ours else None
        if ours is None or git.is_ancestor(ours, their):
            if ours == their:
                return MergeResult("up-to-date", ours, (), ours, their, ours)
            try:
                git.cas_ref(ref, their, ours)
            except RefRace:
                continue
            return MergeResult("fast-forward", their, (), ours, their, ours)
        if git.is_ancestor(their, ours):
            return MergeResult("up-to-date", ours, (), ours, their, their)
        base = git.merge_base(ours, their)
        tree, raw, state = git.merge_trees(base, ours, their)
        conflicts = tuple(Conflict(p, _text(repo, b), _text(repo, o), _text(repo, t)) for p, b, o, t in raw)
        status = "merged"
        if conflicts:
            if strategy == "review":
                return MergeResult("conflicted", None, conflicts, ours, their, base)
            decisions: dict[str, bytes | None] = {}
            for (path, _b, o, t), conflict in zip(raw, conflicts):
                if strategy == "ours":
                    chosen = None if o is None else git.read_blob(o)
                elif strategy == "theirs":
                    chosen = None if t is None else git.read_blob(t)
                else:
                    value = strategy(conflict)  # type: ignore[operator]
                    chosen = value.encode("utf-8") if isinstance(value, str) else value
                decisions[path] = chosen
            tree = git.resolve_merge(state, decisions)
            status = "resolved"
        how = strategy if isinstance(strategy, str) else getattr(strategy, "__name__", "resolver")
        text = message or f"Merge {theirs} into {short_ref(ref)}\n"
        if conflicts:
            text = text.rstrip("\n") + f"\n\nConflicts resolved ({how}):\n" + "".join(
                f"\t{c.path}\n" for c in conflicts)
        commit = git.write_commit(tree, [ours, their], text, repo.identity, repo.identity,
                                  repo.clock.now(), repo.signer.sign if repo.signer else None)
        try:
            git.cas_ref(ref, commit, ours)
        except RefRace:
            continue
        return MergeResult(status, commit, conflicts, ours, their, base)  # type: ignore[arg-type]
    raise AssertionError("unreachable")


def bundle(repo: "ReasoningRepo", path: Path, refs: Sequence[str] | None = None) -> Path:
    """Write ``refs`` (default: every branch, tag and notes ref) into one bundle file.

    Raises:
        InvalidInputError: nothing to bundle.
    """
    if refs is None:
        names = sorted(n for n in repo.git.list_refs() if n.startswith(("refs/heads/", "refs/tags/", "refs/notes/")))
    else:
        names = []
        for r in refs:
            if r.startswith("refs/"):
                names.append(r)
            elif repo.git.ref_target("refs/heads/" + r):
                names.append("refs/heads/" + r)
            elif repo.git.ref_target("refs/tags/" + r):
                names.append("refs/tags/" + r)
            else:
                raise InvalidInputError(f"no branch or tag {r!r} to bundle")
    if not names:
        raise InvalidInputError("the repository has no refs to bundle yet")
    path.parent.mkdir(parents=True, exist_ok=True)
    run_git(["bundle", "create", str(path.resolve()), *names], git_dir=repo.gitdir)
    return path


def verify_bundle(path: Path) -> dict[str, str]:
    """Check a bundle is complete and intact; returns its refs -> SHAs.

    ``git bundle verify`` only reads the header, so the pack is also unpacked into a
    scratch repository and checked with ``git fsck --strict``.

    Raises:
        InvalidInputError: no file at ``path``.
        CorruptRepositoryError: not a valid, self-contained, intact bundle.
    """
    if not Path(path).is_file():
        raise InvalidInputError(f"no bundle file at {path}")
    src = str(Path(path).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        run_git(["init", "-q", "--bare", tmp])
        try:
            run_git(["bundle", "verify", "-q", src], git_dir=tmp)
            heads = run_git(["bundle", "list-heads", src], git_dir=tmp)
            run_git(["fetch", "-q", src, "+refs/*:refs/*"], git_dir=tmp)
            run_git(["fsck", "--strict", "--no-dangling", "--no-progress"], git_dir=tmp)
        except GitCommandError as exc:
            raise CorruptRepositoryError(f"{path} is not a valid, intact bundle: {exc.stderr.strip()[:500]}") from None
    out = {}
    for line in heads.stdout.decode().splitlines():
        oid, _, name = line.partition(" ")
        if name.startswith("refs/"):
            out[name] = oid
    return out


def unbundle(repo: "ReasoningRepo", path: Path) -> dict[str, str]:
    """Import every ref of a verified bundle; objects and SHAs stay identical."""
    heads = verify_bundle(path)
    run_git(["fetch", "-q", "--update-head-ok", str(Path(path).resolve()), "+refs/*:refs/*"], git_dir=repo.gitdir)
    return heads


def _disk_bytes(gitdir: Path) -> int:
    return sum(p.stat().st_size for p in (gitdir / "objects").rglob("*") if p.is_file())


def repack(repo: "ReasoningRepo") -> dict[str, int]:
    """Pack loose objects and refs; safe while writers run (loose objects written
    meanwhile stay loose). Returns bytes before and after."""
    before = _disk_bytes(repo.gitdir)
    run_git(["repack", "-a", "-d", "-q"], git_dir=repo.gitdir)
    run_git(["prune-packed", "-q"], git_dir=repo.gitdir)
    repo.git.compress_refs()
    return {"bytes_before": before, "bytes_after": _disk_bytes(repo.gitdir)}


def fsck(repo: "ReasoningRepo") -> tuple[bool, str]:
    """``git fsck --strict``: (clean, what git said)."""
    proc = run_git(["fsck", "--strict", "--no-dangling", "--no-progress"], git_dir=repo.gitdir, check=False)
    output = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    return proc.returncode == 0, output
