"""Sharing reasoning between repositories: fetch, merge, push (paths or URLs), maintenance;
bundles live in :mod:`got_core.repo.bundles` and are re-exported here.

Merges are real three-way git merges computed in memory (no working tree);
conflicts come back as data (path, base, ours, theirs) and are never resolved
silently: a strategy (``ours``, ``theirs`` or a caller's resolver) must decide,
and its decision is itself a merge commit naming both parents (ARCHITECTURE §1).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from got_core.errors import (
    CorruptRepositoryError,
    CredentialsRequiredError,
    InvalidInputError,
    MergeConflictError,
    PushRejectedError,
    RemoteError,
)
from got_core.names import encode_component, short_ref
from got_core.repo.base import Keep, Publish
from got_core.repo.bundles import bundle, limits_or_default, unbundle, verify_bundle
from got_core.repo.notes import notes_ref_name
from got_core.storage.gitcli import run_git
from got_core.storage.inbound import InboundLimits, Quarantine, check_merge
from got_core.types import Conflict, MergeResult

if TYPE_CHECKING:
    from got_core.repo.base import RepoBase as ReasoningRepo

__all__ = [
    "InboundLimits",
    "Resolver",
    "bundle",
    "fetch",
    "footprint",
    "fsck",
    "is_url",
    "merge",
    "mirror",
    "preview_merge",
    "push",
    "repack",
    "unbundle",
    "verify_bundle",
]

#: A resolver gets a conflict and returns the merged content (None deletes the path),
#: or raises MergeConflictError to leave it for review.
Resolver = Callable[[Conflict], "bytes | str | None"]


def is_url(source: str | os.PathLike[str]) -> bool:
    """Whether ``source`` names a repository by URL (``scheme://...`` or scp-style ``user@host:path``)."""
    text = os.fspath(source)
    return "://" in text or text.startswith("git@")


def _check_source(source: str) -> None:
    if is_url(source):
        return
    if not Path(source).exists():
        raise RemoteError(f"no repository at {source}; give a path or URL of a peer repository")


_limits = limits_or_default


def fetch(
    repo: ReasoningRepo,
    source: str,
    *,
    branches: Sequence[str] | None = None,
    name: str | None = None,
    tags: bool = True,
    notes: bool = True,
    limits: InboundLimits | None = None,
) -> dict[str, str]:
    """Fetch a peer's branches into ``refs/remotes/<name>/``, after checking everything it sent.

    The peer is untrusted: its objects land in a quarantine first and must pass
    ``git fsck --strict``'s checks, our tree-path rules and ``limits`` (see
    :mod:`got_core.storage.inbound`) before any object or ref reaches this repository.
    Nothing of the peer runs (libgit2 reads it in-process; no hook, no config command).

    Args:
        source: path or URL of the peer repository.
        branches: which branches (default all).
        name: the remote's local name (default: derived from the source path).
        tags: also fetch tags (never overwriting a local tag that differs).
        notes: also fetch notes refs, kept apart under ``refs/notes/remotes/<name>/``.
        limits: what one fetch may bring in (default :data:`got_core.inbound.DEFAULT_LIMITS`).

    Returns:
        The fetched remote-tracking refs -> SHAs.

    Raises:
        RemoteError: cannot be reached, not a repository, or it asked for credentials.
        UntrustedContentError: what it sent broke a check or a limit; nothing was imported.
    """
    _check_source(source)
    limits = _limits(limits)
    name = encode_component(name or Path(source.rstrip("/")).name.removesuffix(".git") or "peer", "remote name")
    if branches is None:
        specs = [f"+refs/heads/*:refs/remotes/{name}/*"]
    else:
        specs = [f"+{repo.ref(b)}:refs/remotes/{name}/{short_ref(repo.ref(b))}" for b in branches]
    if notes:
        specs.append(f"+refs/notes/*:refs/notes/remotes/{name}/*")
    staging = f"refs/got/peer-tags/{name}/"
    if tags:
        # Tags land in a private namespace of the quarantine, so a peer cannot move one of ours.
        specs.append(f"+refs/tags/*:{staging}*")
    with Quarantine(repo.git, f"what {source} sent", limits) as q:
        q.git.fetch(source, specs, progress=q.progress)
        incoming = {
            ref: oid
            for ref, oid in q.incoming_refs().items()
            if ref.startswith((staging, f"refs/remotes/{name}/", f"refs/notes/remotes/{name}/"))
        }
        q.check(list(incoming.values()))
        q.adopt()
    # Remote-tracking refs follow the peer; its tags only fill in names we do not have.
    wanted = {
        ("refs/tags/" + ref[len(staging) :] if ref.startswith(staging) else ref): oid for ref, oid in incoming.items()
    }

    def publish(tips: dict[str, str | None]) -> dict[str, str | None]:
        return {ref: oid for ref, oid in wanted.items() if not (ref.startswith("refs/tags/") and tips[ref] is not None)}

    if wanted:
        repo.update_refs(sorted(wanted), publish)
    return repo.git.list_refs(f"refs/remotes/{name}/")


def mirror(
    repo: ReasoningRepo, source: str, prefixes: Sequence[str], *, limits: InboundLimits | None = None
) -> dict[str, str]:
    """Copy the peer's refs under ``prefixes`` to the same names here, after checking them.

    For a local copy of a central repository reached by URL (e.g. a benchmark run's
    results): the refs follow the peer like remote-tracking refs do; refs here that the
    peer lacks are left alone. Everything comes in through the quarantine, like :func:`fetch`.

    Args:
        prefixes: ref prefixes ending in ``/`` (e.g. ``refs/got/results/``), or whole ref
            names (e.g. ``refs/got/prereg``), matched exactly.

    Returns:
        The mirrored refs -> SHAs.

    Raises:
        RemoteError: cannot be reached, not a repository, or it asked for credentials.
        UntrustedContentError: what it sent broke a check or a limit; nothing was imported.
    """
    _check_source(source)
    limits = _limits(limits)
    for prefix in prefixes:
        if not prefix.startswith("refs/") or prefix.startswith("refs/got-incoming") or "*" in prefix:
            raise InvalidInputError(f"mirror takes ref prefixes like 'refs/got/results/' or ref names, not {prefix!r}")
    advertised = repo.git.ls_remote(source)

    def held(prefix: str) -> bool:
        return any(ref.startswith(prefix) for ref in advertised) if prefix.endswith("/") else prefix in advertised

    # a whole ref name the peer lacks is left out: fetching it would fail
    asked = [(i, p) for i, p in enumerate(prefixes) if held(p)]
    if not asked:
        return {}
    staging = "refs/got/mirror/"
    specs = [f"+{p}*:{staging}{i}/*" if p.endswith("/") else f"+{p}:{staging}{i}" for i, p in asked]
    with Quarantine(repo.git, f"what {source} sent", limits) as q:
        q.git.fetch(source, specs, progress=q.progress)
        incoming = {ref: oid for ref, oid in q.incoming_refs().items() if ref.startswith(staging)}
        q.check(list(incoming.values()))
        q.adopt()
    wanted = {}
    for ref, oid in incoming.items():
        index, _, rest = ref[len(staging) :].partition("/")
        prefix = prefixes[int(index)]
        # libgit2 validated the name in the quarantine
        wanted[prefix + rest if prefix.endswith("/") else prefix] = oid
    if wanted:
        repo.update_refs(sorted(wanted), lambda _tips: dict(wanted))
    return wanted


def push(
    repo: ReasoningRepo,
    dest: str,
    *,
    branches: Sequence[str] = ("memory",),
    tag_prefixes: Sequence[str] = ("success_",),
    notes: Sequence[str] = (),
    force: bool = False,
    merge: str | Resolver | None = None,
    limits: InboundLimits | None = None,
) -> list[str]:
    """Push selected refs (selective sharing: by default only ``memory`` and success tags).

    ``dest`` is a local path or a URL (``git://``, ``http(s)://``, ``ssh://``, ``file://``);
    the same compare-and-swap holds for each: the peer moves a ref only from the value
    the push saw, and a ref that moved meanwhile is refused, never overwritten.

    When the peer refuses, what it holds now is fetched (through the quarantine, like
    :func:`fetch`) and compared with ours: a ref it holds that is not an ancestor of ours
    is a non-fast-forward. Without ``merge`` that raises :class:`PushRejectedError` at
    once; with ``merge``, its tip is merged into our ref with that strategy and the push
    is tried again (never forced), until the repository's ``lock_timeout``. A refusal
    while every ref would be a fast-forward (another pusher held a lock, or won the race
    and has since finished) is tried again as long as the peer keeps moving.

    Args:
        merge: ``review`` (merge; conflicts raise :class:`MergeConflictError`), ``ours``,
            ``theirs`` or a resolver (see :func:`merge`); None: refuse a non-fast-forward.
        limits: what fetching the peer's tips may bring in (default ``DEFAULT_LIMITS``).

    Returns:
        The refspecs pushed.

    Raises:
        PushRejectedError: a non-fast-forward without ``merge`` (or a tag that differs
            there), or the peer keeps refusing a fast-forward (a hook or a policy).
        MergeConflictError: ``merge`` met conflicts it did not decide; nothing was pushed.
        RemoteError: the peer cannot be reached or asked for credentials (never prompted).
        ConcurrentUpdateError: the peer kept moving until ``lock_timeout``.
    """
    _check_source(dest)
    if force and merge is not None:
        raise InvalidInputError("push with force=True or with merge=..., not both")
    if merge is not None and not (callable(merge) or merge in ("review", "ours", "theirs")):
        raise InvalidInputError(f"merge must be 'review', 'ours', 'theirs' or a callable, not {merge!r}")
    limits = _limits(limits)
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
        ref = notes_ref_name(repo, n)
        if repo.git.ref_target(ref):
            specs.append(f"{plus}{ref}:{ref}")
    if not specs:
        return specs
    seen: dict[str, str] | None = None
    still_since = time.monotonic()
    for _ in repo.retry.attempts(f"push to {dest}"):
        try:
            repo.git.push(dest, specs)
            return specs
        except CredentialsRequiredError:
            raise  # never prompted, never retried
        except RemoteError as exc:
            failure = exc
        if force:
            raise failure
        # What the peer holds now tells a refusal from a race (never the error's wording).
        theirs = _peer_tips(repo, dest, specs, limits)
        refused = _refused(repo, specs, theirs)
        if refused:
            tags = [r for r in refused if not r.startswith(("refs/heads/", "refs/notes/"))]
            if merge is None or tags:
                raise PushRejectedError(
                    f"push to {dest} was rejected: {', '.join(tags or refused)} would not be a fast-forward "
                    + ("(a tag there differs; rename ours)" if tags else "(fetch and merge first, or push with merge=)")
                ) from failure
            _merge_into_ours(repo, dest, refused, theirs, merge, limits)
            seen = None
            continue
        if theirs != seen:
            seen, still_since = theirs, time.monotonic()
        elif time.monotonic() - still_since > repo.retry.stale_lock_seconds:
            # Refused while every ref is a fast-forward and the peer stood still longer than any
            # live pusher holds a lock: a hook or a policy there says no, not a race.
            raise failure
    return specs  # pragma: no cover - attempts() raises at its deadline


def _peer_tips(repo: ReasoningRepo, dest: str, specs: Sequence[str], limits: InboundLimits) -> dict[str, str]:
    """The peer's current values of the refs ``specs`` push to; missing objects come in checked.

    Objects the repository lacks are fetched through a quarantine and adopted only after
    passing its checks; no ref here moves (a merge makes them reachable).
    """
    wanted = [spec.lstrip("+").partition(":")[2] for spec in specs]
    advertised = repo.git.ls_remote(dest)
    tips = {ref: advertised[ref] for ref in wanted if ref in advertised}
    missing = sorted(ref for ref, oid in tips.items() if not repo.git.has_object(oid))
    if missing:
        staging = {f"refs/got/peer-tips/{i}": ref for i, ref in enumerate(missing)}
        with Quarantine(repo.git, f"what {dest} holds", limits) as q:
            q.git.fetch(dest, [f"+{ref}:{tmp}" for tmp, ref in staging.items()], progress=q.progress)
            incoming = {staging[r]: oid for r, oid in q.incoming_refs().items() if r in staging}
            q.check(list(incoming.values()))
            q.adopt()
        tips.update(incoming)
    return tips


def _refused(repo: ReasoningRepo, specs: Sequence[str], theirs: dict[str, str]) -> list[str]:
    """The refs of ``specs`` the peer (holding ``theirs``) may not move to ours without a merge."""
    refused = []
    for spec in specs:
        forced = spec.startswith("+")
        src, _, dst = spec.lstrip("+").partition(":")
        there, ours = theirs.get(dst), repo.git.ref_target(src)
        if forced or there is None or there == ours or ours is None:
            continue
        if dst.startswith("refs/tags/") or not repo.git.has_object(there) or not repo.git.is_ancestor(there, ours):
            refused.append(dst)
    return refused


def _merge_into_ours(
    repo: ReasoningRepo,
    dest: str,
    refs: Sequence[str],
    theirs: dict[str, str],
    strategy: str | Resolver,
    limits: InboundLimits,
) -> None:
    """Merge the peer's tip of each ref in ``refs`` into ours (before pushing again)."""
    for ref in refs:
        result = merge(
            repo,
            theirs[ref],
            into=ref,
            strategy=strategy,
            limits=limits,
            message=f"Merge {short_ref(ref)} of {dest} before pushing\n",
        )
        if result.status == "conflicted":
            paths = ", ".join(c.path for c in result.conflicts[:5])
            raise MergeConflictError(
                f"push to {dest}: {short_ref(ref)} there conflicts with ours on {paths}; nothing was pushed. "
                "Fetch and merge with a strategy (got merge ... --strategy), then push again",
                list(result.conflicts),
            )


def _text(repo: ReasoningRepo, blob: str | None) -> str | None:
    return None if blob is None else repo.git.read_blob(blob).decode("utf-8", "replace")


def merge(
    repo: ReasoningRepo,
    theirs: str,
    *,
    into: str = "memory",
    message: str | None = None,
    strategy: str | Resolver = "review",
    limits: InboundLimits | None = None,
) -> MergeResult:
    """Three-way merge of ``theirs`` into the branch ``into``.

    Args:
        theirs: a revision (e.g. ``refs/remotes/peer/memory``).
        into: the branch to update.
        message: merge commit message.
        strategy: ``review`` (default: commit nothing when conflicted and return the
            conflicts), ``ours``, ``theirs``, or a resolver callable.
        limits: depth and path-length limits for the trees brought in (default
            :data:`got_core.inbound.DEFAULT_LIMITS`).

    Returns:
        A :class:`MergeResult`; ``status == "conflicted"`` leaves ``into`` untouched.

    Raises:
        MergeConflictError: the resolver abstained on some conflict.
        ConcurrentUpdateError: ``into`` kept moving during the merge.
        UntrustedContentError: ``theirs`` brings a tree entry git or our path rules refuse
            (``..``, ``.git``, a ``/`` in a name, a bad mode), or one over ``limits``;
            ``into`` is untouched.
        CorruptRepositoryError: an object either side needs is missing or damaged.
    """
    if not (callable(strategy) or strategy in ("review", "ours", "theirs")):
        raise InvalidInputError(f"strategy must be 'review', 'ours', 'theirs' or a callable, not {strategy!r}")
    limits = _limits(limits)
    ref = repo.ref(into)
    their = repo.resolve(theirs)

    def build(tip: str | None) -> Publish | Keep:
        return _merge_step(repo, tip, their, ref, theirs, strategy, message, limits)

    return repo.update_ref(ref, build)


def preview_merge(
    repo: ReasoningRepo, theirs: str, *, into: str = "memory", limits: InboundLimits | None = None
) -> MergeResult:
    """What :func:`merge` of ``theirs`` into ``into`` would find now, changing nothing.

    No ref moves and no object is written (not even the merged tree of a clean merge):
    safe on a repository served read-only. Conflicts are reported, never decided.

    Returns:
        A :class:`MergeResult` whose ``commit`` is None (the merge was not made):
        ``up-to-date``, ``fast-forward``, ``merged`` (would merge cleanly) or ``conflicted``.

    Raises:
        UnknownRefError: ``theirs`` names nothing.
        UntrustedContentError: ``theirs`` brings a tree entry git or our path rules refuse.
        CorruptRepositoryError: an object either side needs is missing or damaged.
    """
    ref = repo.ref(into)
    their = repo.resolve(theirs)
    answer = _merge_step(repo, repo.git.ref_target(ref), their, ref, theirs, "review", None, _limits(limits), dry=True)
    r: MergeResult = answer.value
    return MergeResult(r.status, None, r.conflicts, r.ours, r.theirs, r.base)


def _merge_step(
    repo: ReasoningRepo,
    tip: str | None,
    their: str,
    ref: str,
    theirs: str,
    strategy: str | Resolver,
    message: str | None,
    limits: InboundLimits,
    *,
    dry: bool = False,
) -> Publish | Keep:
    """One attempt of :func:`merge` on the tip ``tip`` of ``ref`` (``dry``: only find out, write nothing)."""
    git = repo.git
    ours = git.peel_to_commit(tip) if tip else None
    if ours == their:
        return Keep(MergeResult("up-to-date", ours, (), ours, their, ours))
    if ours is not None and git.is_ancestor(their, ours):
        return Keep(MergeResult("up-to-date", ours, (), ours, their, their))
    base = git.merge_base(ours, their) if ours is not None else None
    check_merge(
        git,
        git.read_commit(their).tree,
        [git.read_commit(c).tree for c in (ours, base) if c],
        f"to merge {theirs} into {short_ref(ref)}",
        limits,
        f"commit {their}",
    )
    if ours is None or base == ours:
        return Publish(their, MergeResult("fast-forward", their, (), ours, their, ours))
    tree, raw, state = git.merge_trees(base, ours, their, write=not dry)
    conflicts = tuple(Conflict(p, _text(repo, b), _text(repo, o), _text(repo, t)) for p, b, o, t in raw)
    if dry:
        return Keep(MergeResult("conflicted" if conflicts else "merged", None, conflicts, ours, their, base))
    status: Literal["merged", "resolved"] = "merged"
    if conflicts:
        if strategy == "review":
            return Keep(MergeResult("conflicted", None, conflicts, ours, their, base))
        resolver = None if isinstance(strategy, str) else strategy
        decisions: dict[str, bytes | None] = {}
        for (path, _b, o, t), conflict in zip(raw, conflicts):
            if resolver is not None:
                value = resolver(conflict)
                chosen = value.encode("utf-8") if isinstance(value, str) else value
            elif strategy == "ours":
                chosen = None if o is None else git.read_blob(o)
            else:  # "theirs"
                chosen = None if t is None else git.read_blob(t)
            decisions[path] = chosen
        tree = git.resolve_merge(state, decisions)
        status = "resolved"
    if tree is None:  # merge_trees leaves it out only when there are conflicts
        raise CorruptRepositoryError(f"merging {their} into {short_ref(ref)} gave no tree; run `got fsck`")
    how = strategy if isinstance(strategy, str) else getattr(strategy, "__name__", "resolver")
    text = message or f"Merge {theirs} into {short_ref(ref)}\n"
    if conflicts:
        text = text.rstrip("\n") + f"\n\nConflicts resolved ({how}):\n" + "".join(f"\t{c.path}\n" for c in conflicts)
    commit = repo.write_commit(tree, [ours, their], text)
    return Publish(commit, MergeResult(status, commit, conflicts, ours, their, base))


def footprint(gitdir: Path) -> dict[str, int]:
    """What a repository's objects and refs occupy, measured one way before and after ``gc``.

    Counts everything under ``objects/`` (loose objects, packs with their indexes, bitmaps
    and reverse indexes, the fan-out directories) and under ``refs/``, plus ``packed-refs``.

    Returns:
        ``bytes``: space allocated on disk (what ``du`` reports: whole filesystem blocks,
        directories included; a 200-byte loose object holds a 4 KiB block); ``apparent_bytes``:
        the files' lengths; ``loose_objects``, ``packs`` and ``loose_refs``: counts.
    """
    out = {"bytes": 0, "apparent_bytes": 0, "loose_objects": 0, "packs": 0, "loose_refs": 0}
    roots = [gitdir / "objects", gitdir / "refs", gitdir / "packed-refs"]
    for root in roots:
        entries = [root, *root.rglob("*")] if root.is_dir() else [root] if root.exists() else []
        for entry in entries:
            try:
                st = entry.lstat()
            except FileNotFoundError:  # a writer packed or pruned it meanwhile
                continue
            # st_blocks is in 512-byte units on POSIX; elsewhere the length is the best we have
            out["bytes"] += getattr(st, "st_blocks", 0) * 512 or st.st_size
            if entry.is_dir():
                continue
            out["apparent_bytes"] += st.st_size
            rel = entry.relative_to(gitdir).parts
            if rel[0] == "objects" and len(rel) == 3 and len(rel[1]) == 2 and rel[1] != "pack":
                out["loose_objects"] += 1
            elif rel[0] == "objects" and rel[1:2] == ("pack",) and entry.suffix == ".pack":
                out["packs"] += 1
            elif rel[0] == "refs":
                out["loose_refs"] += 1
    return out


def repack(repo: ReasoningRepo) -> dict[str, int]:
    """Pack loose objects and refs; safe while writers run (loose objects written
    meanwhile stay loose).

    Returns:
        :func:`footprint` before and after, measured the same way, as ``<key>_before`` and
        ``<key>_after`` (``bytes_before`` / ``bytes_after`` are bytes allocated on disk for
        objects, packs and refs).
    """
    before = footprint(repo.gitdir)
    # -f: look for deltas afresh; git never tries one between two whole objects of the same
    # pack, and the packs a write and its consolidation leave hold whole objects only (5x
    # the disk at 3k nodes without it, for ~15% more time)
    run_git(["repack", "-a", "-d", "-f", "-q"], git_dir=repo.gitdir)
    run_git(["prune-packed", "-q"], git_dir=repo.gitdir)
    # libgit2 would keep every pack folded away mapped, open and searched on each miss:
    # this thread's handle and the derived index's let go of them (other threads' handles
    # do at their next renewal, see GitRepo.forget_packs)
    repo.git.forget_packs()
    if repo._index is not None:
        repo._index.git.forget_packs()
    times = repo.git.ref_dir_times()
    repo.git.compress_refs()
    repo.git.prune_empty_ref_dirs(times)  # 15k empty directories were 61 of 101 MB after gc at 100k checkpoints
    after = footprint(repo.gitdir)
    return {**{f"{k}_before": v for k, v in before.items()}, **{f"{k}_after": v for k, v in after.items()}}


def fsck(repo: ReasoningRepo) -> tuple[bool, str]:
    """``git fsck --strict``: (clean, what git said)."""
    proc = run_git(["fsck", "--strict", "--no-dangling", "--no-progress"], git_dir=repo.gitdir, check=False)
    output = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    return proc.returncode == 0, output
