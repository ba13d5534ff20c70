"""Sharing reasoning between repositories: fetch, merge, push, bundles, maintenance.

Merges are real three-way git merges computed in memory (no working tree);
conflicts come back as data (path, base, ours, theirs) and are never resolved
silently: a strategy (``ours``, ``theirs`` or a caller's resolver) must decide,
and its decision is itself a merge commit naming both parents (ARCHITECTURE §1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from got_core.errors import (
    ConfigError,
    CorruptRepositoryError,
    CredentialsRequiredError,
    InvalidInputError,
    InvalidNameError,
    PushRejectedError,
    RemoteError,
    UntrustedContentError,
)
from got_core.names import encode_component, short_ref
from got_core.repo.base import Keep, Publish
from got_core.repo.notes import notes_ref_name
from got_core.storage.git import GitRepo
from got_core.storage.gitcli import GitCommandError, run_git
from got_core.storage.inbound import DEFAULT_LIMITS, InboundLimits, Quarantine, check_merge
from got_core.storage.refnames import check_ref_name
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
    "merge",
    "push",
    "repack",
    "unbundle",
    "verify_bundle",
]

#: A resolver gets a conflict and returns the merged content (None deletes the path),
#: or raises MergeConflictError to leave it for review.
Resolver = Callable[[Conflict], "bytes | str | None"]


def _check_source(source: str) -> None:
    if "://" in source or source.startswith("git@"):
        return
    if not Path(source).exists():
        raise RemoteError(f"no repository at {source}; give a path or URL of a peer repository")


def _limits(limits: InboundLimits | None) -> InboundLimits:
    if limits is None:
        return DEFAULT_LIMITS
    if not isinstance(limits, InboundLimits):
        raise ConfigError(f"limits must be an InboundLimits, not {type(limits).__name__}")
    return limits


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


def push(
    repo: ReasoningRepo,
    dest: str,
    *,
    branches: Sequence[str] = ("memory",),
    tag_prefixes: Sequence[str] = ("success_",),
    notes: Sequence[str] = (),
    force: bool = False,
) -> list[str]:
    """Push selected refs (selective sharing: by default only ``memory`` and success tags).

    Returns:
        The refspecs pushed.

    Raises:
        RemoteError: the peer refused (non-fast-forward without ``force``) or cannot be reached.
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
        ref = notes_ref_name(repo, n)
        if repo.git.ref_target(ref):
            specs.append(f"{plus}{ref}:{ref}")
    if specs:
        for _ in repo.retry.attempts(f"push to {dest}"):
            try:
                repo.git.push(dest, specs)
                break
            except (PushRejectedError, CredentialsRequiredError):
                raise  # the peer said no: final
            except RemoteError as exc:
                if not _local_peer(dest):
                    raise
                # Into a local repository, libgit2 reports a refusal and a lock held by another
                # pusher the same way; the peer's refs tell them apart: a ref we may not move
                # there is a refusal, anything else was a lock that is already gone again.
                refused = _refused(repo, dest, specs)
                if refused:
                    raise PushRejectedError(
                        f"push to {dest} was rejected: {', '.join(refused)} would not be a fast-forward "
                        "(fetch and merge first, or push with force=True)"
                    ) from exc
    return specs


def _refused(repo: ReasoningRepo, dest: str, specs: Sequence[str]) -> list[str]:
    """The refs of ``specs`` a push into the local repository ``dest`` may not move now."""
    peer = GitRepo(Path(dest), create=False)  # the peer, read-only: its refs only
    refused = []
    for spec in specs:
        forced = spec.startswith("+")
        src, _, dst = spec.lstrip("+").partition(":")
        theirs, ours = peer.ref_target(dst), repo.git.ref_target(src)
        if forced or theirs is None or theirs == ours or ours is None:
            continue
        if dst.startswith("refs/tags/") or not repo.git.has_object(theirs) or not repo.git.is_ancestor(theirs, ours):
            refused.append(dst)
    return refused


def _local_peer(dest: str) -> bool:
    return "://" not in dest and not dest.startswith("git@") and Path(dest).is_dir()


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
    git = repo.git
    ref = repo.ref(into)
    their = repo.resolve(theirs)
    their_tree = git.read_commit(their).tree

    def build(tip: str | None) -> Publish | Keep:
        ours = git.peel_to_commit(tip) if tip else None
        if ours == their:
            return Keep(MergeResult("up-to-date", ours, (), ours, their, ours))
        if ours is not None and git.is_ancestor(their, ours):
            return Keep(MergeResult("up-to-date", ours, (), ours, their, their))
        base = git.merge_base(ours, their) if ours is not None else None
        check_merge(
            git,
            their_tree,
            [git.read_commit(c).tree for c in (ours, base) if c],
            f"to merge {theirs} into {short_ref(ref)}",
            limits,
            f"commit {their}",
        )
        if ours is None or base == ours:
            return Publish(their, MergeResult("fast-forward", their, (), ours, their, ours))
        tree, raw, state = git.merge_trees(base, ours, their)
        conflicts = tuple(Conflict(p, _text(repo, b), _text(repo, o), _text(repo, t)) for p, b, o, t in raw)
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
            text = (
                text.rstrip("\n") + f"\n\nConflicts resolved ({how}):\n" + "".join(f"\t{c.path}\n" for c in conflicts)
            )
        commit = repo.write_commit(tree, [ours, their], text)
        return Publish(commit, MergeResult(status, commit, conflicts, ours, their, base))

    return repo.update_ref(ref, build)


def bundle(repo: ReasoningRepo, path: Path, refs: Sequence[str] | None = None) -> Path:
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


_BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")
_INCOMING = "refs/got-incoming/"


def _bundle_header(path: Path, limits: InboundLimits) -> dict[str, str]:
    """Read and check a bundle's header without reading its pack: refs -> SHAs.

    ``git bundle verify`` accepts a file cut off anywhere in its ref list (it then lists
    no refs at all), so the header is checked here: the signature, every line, the blank
    line that ends it, a pack signature after it, and at least one ref.
    """
    if not path.is_file():
        raise InvalidInputError(f"no bundle file at {path}")
    shown = str(path)
    size = path.stat().st_size
    heads: dict[str, str] = {}
    with path.open("rb") as f:
        if f.readline(64) not in _BUNDLE_SIGNATURES:
            raise CorruptRepositoryError(f"{shown} is not a git bundle (no '# v2/v3 git bundle' signature)")
        while True:
            line = f.readline(8192)
            if line == b"\n":
                break
            if not line.endswith(b"\n"):
                raise CorruptRepositoryError(f"{shown} is cut short inside its header; copy the bundle again")
            if line.startswith(b"@"):
                if line.strip() not in (b"@object-format=sha1",):
                    raise CorruptRepositoryError(
                        f"{shown} needs a capability we do not support: {line.strip().decode('utf-8', 'replace')[:80]}"
                    )
                continue
            oid, _, ref = line[:-1].lstrip(b"-").partition(b" ")
            if len(oid) != 40 or any(c not in b"0123456789abcdef" for c in oid):
                raise CorruptRepositoryError(f"{shown} has a damaged header line: {line[:100]!r}")
            if line.startswith(b"-"):
                continue  # a prerequisite: git bundle verify checks we have it
            name = ref.decode("utf-8", "replace")
            if name.startswith("refs/"):
                try:
                    check_ref_name(name, "bundle ref")
                except InvalidNameError as exc:
                    raise UntrustedContentError(f"refusing {shown}: {exc}") from None
                heads[name] = oid.decode("ascii")
            if len(heads) > limits.max_objects:
                raise UntrustedContentError(
                    f"refusing {shown}: more refs than max_objects={limits.max_objects:,}", limit="max_objects"
                )
        pack = f.read(12)
        start = f.tell()
    if pack[:4] != b"PACK" or len(pack) < 12:
        raise CorruptRepositoryError(f"{shown} is cut short after its header; copy the bundle again")
    count = int.from_bytes(pack[8:12], "big")
    if count > limits.max_objects:
        raise UntrustedContentError(
            f"refusing {shown}: its pack holds {count:,} objects, over max_objects={limits.max_objects:,} "
            "(raise it with InboundLimits(max_objects=...) or --max-objects)",
            limit="max_objects",
        )
    if size - start + 12 > limits.max_total_bytes:
        raise UntrustedContentError(
            f"refusing {shown}: its pack is {size - start + 12:,} bytes, over max_total_bytes="
            f"{limits.max_total_bytes:,} (raise it with InboundLimits(max_total_bytes=...) or --max-total-bytes)",
            limit="max_total_bytes",
        )
    if not heads:
        raise CorruptRepositoryError(f"{shown} lists no refs to import (is it cut short?)")
    return heads


def _receive_bundle(q: Quarantine, path: Path) -> None:
    """Unpack a bundle into the quarantine (its objects only; checked by the caller)."""
    src = str(path.resolve())
    try:
        run_git(["bundle", "verify", "-q", src], git_dir=q.path)
        run_git(
            [
                "-c",
                "fetch.unpackLimit=1",
                "-c",
                "transfer.unpackLimit=1",
                "fetch",
                "-q",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-auto-gc",
                "--no-recurse-submodules",
                src,
                f"+refs/*:{_INCOMING}*",
            ],
            git_dir=q.path,
        )
    except GitCommandError as exc:
        said = "; ".join(line.strip() for line in exc.stderr.splitlines() if line.strip())
        raise CorruptRepositoryError(f"{path} is not a valid, intact bundle: {said[:500]}") from None


def verify_bundle(path: Path, *, limits: InboundLimits | None = None) -> dict[str, str]:
    """Check a bundle is complete, intact and acceptable; returns its refs -> SHAs.

    ``git bundle verify`` only reads the header, and passes a bundle cut off inside
    it, so the header is checked line by line, and the pack is unpacked into a scratch
    repository and put through the inbound checks of :mod:`got_core.storage.inbound` (git fsck
    --strict's object checks, our path rules, ``limits``). The bundle must be
    self-contained (no prerequisite commits).

    Raises:
        InvalidInputError: no file at ``path``.
        CorruptRepositoryError: not a valid, self-contained, intact bundle.
        UntrustedContentError: its objects break a check or a limit.
    """
    path = Path(path)
    limits = _limits(limits)
    heads = _bundle_header(path, limits)
    with Quarantine(None, f"bundle {path}", limits) as q:
        _receive_bundle(q, path)
        q.check(list(q.incoming_refs().values()))
    return heads


def unbundle(repo: ReasoningRepo, path: Path, *, limits: InboundLimits | None = None) -> dict[str, str]:
    """Import every ref of a bundle, bit-identically, once all of it has been checked.

    The objects go through a quarantine (:mod:`got_core.storage.inbound`); only when every check
    passes do they move in and the refs move (a ref the bundle names is set to the
    bundle's value). On any refusal the repository is exactly as it was.

    Raises:
        InvalidInputError: no file at ``path``.
        CorruptRepositoryError: not a valid, intact bundle (or its prerequisites are missing).
        UntrustedContentError: its objects break a check or a limit.
    """
    path = Path(path)
    limits = _limits(limits)
    heads = _bundle_header(path, limits)
    with Quarantine(repo.git, f"bundle {path}", limits) as q:
        _receive_bundle(q, path)
        incoming = {ref: oid for ref, oid in q.incoming_refs().items() if ref.startswith(_INCOMING)}
        q.check(list(incoming.values()))
        q.adopt()
    wanted = {"refs/" + ref[len(_INCOMING) :]: oid for ref, oid in incoming.items()}
    if wanted:
        repo.update_refs(sorted(wanted), lambda _tips: dict(wanted))
    return heads


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
    run_git(["repack", "-a", "-d", "-q"], git_dir=repo.gitdir)
    run_git(["prune-packed", "-q"], git_dir=repo.gitdir)
    repo.git.compress_refs()
    after = footprint(repo.gitdir)
    return {**{f"{k}_before": v for k, v in before.items()}, **{f"{k}_after": v for k, v in after.items()}}


def fsck(repo: ReasoningRepo) -> tuple[bool, str]:
    """``git fsck --strict``: (clean, what git said)."""
    proc = run_git(["fsck", "--strict", "--no-dangling", "--no-progress"], git_dir=repo.gitdir, check=False)
    output = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    return proc.returncode == 0, output
