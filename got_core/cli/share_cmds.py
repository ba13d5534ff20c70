"""Sharing commands: fetch, merge (with review: --status, --resolve, --workers), push, bundle, unbundle."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from got_core.cli.plugin import (
    Abbrev,
    JsonOption,
    RepoOption,
    app,
    check_target,
    console,
    created_on_failure_removed,
    emit_json,
    open_repo,
    repo_path,
    say_empty,
)
from got_core.collab import agents as collab
from got_core.errors import InvalidInputError, RepositoryNotFoundError, UnknownRefError
from got_core.names import encode_component
from got_core.repo import ReasoningRepo, sharing
from got_core.repo.sharing import verify_bundle
from got_core.storage.inbound import DEFAULT_LIMITS, InboundLimits
from got_core.types import Conflict

__all__: list[str] = []

# Inbound limits (got_core.inbound.InboundLimits): one flag per knob, on every command that takes
# objects in (fetch, merge PEER, unbundle) and on bundle, which verifies what it wrote under them.
MaxBlobOption = typer.Option(
    DEFAULT_LIMITS.max_blob_bytes,
    "--max-blob-bytes",
    min=1,
    help="Refuse any incoming object (a file's blob, a tree...) larger than this.",
)
MaxDepthOption = typer.Option(
    DEFAULT_LIMITS.max_tree_depth,
    "--max-tree-depth",
    min=1,
    help="Refuse incoming paths with more components than this.",
)
MaxPathOption = typer.Option(
    DEFAULT_LIMITS.max_path_bytes, "--max-path-bytes", min=1, help="Refuse incoming paths longer than this many bytes."
)
MaxObjectsOption = typer.Option(
    DEFAULT_LIMITS.max_objects, "--max-objects", min=1, help="Refuse a transfer of more objects than this."
)
MaxTotalOption = typer.Option(
    DEFAULT_LIMITS.max_total_bytes,
    "--max-total-bytes",
    min=1,
    help="Refuse a transfer (pack) larger than this many bytes.",
)


def _is_local(peer: str) -> bool:
    """Whether ``peer`` names a path rather than a URL (``https://``, ``ssh://``, ``host:path``)."""
    if "://" in peer:
        return False
    head = peer.split("/", 1)[0]
    return ":" not in head or (len(head) == 2 and head[1] == ":")  # C:\\... is a path


def check_peer(peer: str) -> None:
    """A local peer must be a repository: say so before fetching or pushing, naming the path.

    Raises:
        RepositoryNotFoundError: nothing there, a file, or a directory holding no repository.
    """
    if not _is_local(peer):
        return
    path = Path(peer)
    if not path.exists():
        raise RepositoryNotFoundError(f"no peer repository at {peer}; give the path or URL of a git repository")
    if not path.is_dir():
        hint = " (for a bundle file use `got unbundle`)" if path.is_file() else ""
        raise RepositoryNotFoundError(f"the peer {peer} is a file, not a git repository{hint}")
    ReasoningRepo(path, create=False).close()  # RepositoryNotFoundError when it is no repository


def _limits(
    max_blob_bytes: int, max_tree_depth: int, max_path_bytes: int, max_objects: int, max_total_bytes: int
) -> InboundLimits:
    return InboundLimits(
        max_blob_bytes=max_blob_bytes,
        max_tree_depth=max_tree_depth,
        max_path_bytes=max_path_bytes,
        max_objects=max_objects,
        max_total_bytes=max_total_bytes,
    )


@app.command()
def fetch(
    peer: str = typer.Argument(..., help="Path or URL of the peer repository."),
    name: str | None = typer.Option(None, help="Local name for the peer (default: from its path)."),
    repo: Path | None = RepoOption,
    max_blob_bytes: int = MaxBlobOption,
    max_tree_depth: int = MaxDepthOption,
    max_path_bytes: int = MaxPathOption,
    max_objects: int = MaxObjectsOption,
    max_total_bytes: int = MaxTotalOption,
) -> None:
    """Fetch a peer's branches, tags and notes; everything is checked before anything moves.

    Never prompts for credentials and never runs anything of the peer. Objects that
    `git fsck --strict` or our path rules refuse, or that break a limit, are refused
    with the object, path and limit named; the repository is then left as it was.
    """
    r = open_repo(repo)
    check_peer(peer)
    if name is not None and not name.strip():
        raise InvalidInputError("--name must not be empty; leave it out to name the peer after its path")
    limits = _limits(max_blob_bytes, max_tree_depth, max_path_bytes, max_objects, max_total_bytes)
    refs = sharing.fetch(r, peer, name=name, limits=limits)
    if not refs:
        say_empty(f"nothing fetched from {peer}")
        return
    abbrev = Abbrev(r)
    for ref, oid in sorted(refs.items()):
        console.print(f"{abbrev(oid)} {escape(ref)}")


def _show_conflict(c: Conflict) -> None:
    console.print(f"[red]CONFLICT[/] {escape(c.path)}")
    console.print(f"  ours:   {escape((c.ours or '(deleted)').strip()[:200])}")
    console.print(f"  theirs: {escape((c.theirs or '(deleted)').strip()[:200])}")


def _merge_status(r: ReasoningRepo, into: str | None, json: bool) -> None:
    pending = collab.merge_status(r, into)
    if json:
        emit_json(
            [
                {
                    "name": p.name,
                    "into": p.into,
                    "commit": p.commit,
                    "conflicts": p.conflicts,
                    "topics": [lc.topic_key for lc in p.lesson_conflicts],
                }
                for p in pending
            ]
        )
        return
    if not pending:
        say_empty("no merges left for review")
        return
    abbrev = Abbrev(r)
    for p in pending:
        console.print(
            f"[bold]{escape(p.name)}[/] -> {escape(p.into)} ({abbrev(p.commit)}): {len(p.conflicts)} conflict(s)"
        )
        for c in p.conflicts:
            _show_conflict(c)
    console.print("decide with: got merge --resolve ours|theirs NAME [--into BRANCH]")


@app.command()
def merge(
    peer: str | None = typer.Argument(
        None,
        help="A peer repository (path/URL) or a local revision to merge; "
        "with --resolve, the name of the pending merge.",
    ),
    branch: str = typer.Option("memory", "--branch", "-b", help="The peer's branch to merge."),
    into: str = typer.Option("memory", "--into", help="Our branch to merge into."),
    strategy: str = typer.Option(
        "review", "--strategy", "-s", help="review (default: stop on conflicts), ours or theirs."
    ),
    status: bool = typer.Option(False, "--status", help="List merges left for review and their conflicts."),
    resolve: str | None = typer.Option(None, "--resolve", help="Decide the pending merge PEER: ours or theirs."),
    workers: bool = typer.Option(
        False, "--workers", help="Merge every agents/<id>/memory branch of this (central) repository."
    ),
    central: str | None = typer.Option(
        None,
        "--central",
        help="With --workers: central is at this URL; merge in -r's repository and push memory back.",
    ),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    max_blob_bytes: int = MaxBlobOption,
    max_tree_depth: int = MaxDepthOption,
    max_path_bytes: int = MaxPathOption,
    max_objects: int = MaxObjectsOption,
    max_total_bytes: int = MaxTotalOption,
) -> None:
    """Three-way merge of a peer's branch; conflicts are listed, never resolved silently.

    A peer given by path or URL is fetched first, with the same checks and limits as
    `got fetch`; a branch holding paths git refuses is never merged.

    A conflicted merge is left for review (`got merge --status` lists it, `got merge
    --resolve ours|theirs NAME` decides it). Exit status 3 when conflicts are left for review.
    """
    if central is not None and not workers:
        raise InvalidInputError("--central goes with --workers (to merge a peer by URL, give it as PEER)")
    r = open_repo(repo, create=central is not None)
    if status:
        _merge_status(r, None if into == "memory" else into, json)
        return
    if resolve is not None:
        if resolve not in ("ours", "theirs") or peer is None:
            raise InvalidInputError("use --resolve ours|theirs NAME (NAME from `got merge --status`)")
        results = {peer: collab.resolve_pending(r, peer, resolve, into=into)}
    elif workers:
        if strategy not in ("review", "ours", "theirs"):
            raise InvalidInputError("strategy must be review, ours or theirs")
        if central is None:
            orchestrator = collab.Orchestrator(r.gitdir, into=into)
        else:
            orchestrator = collab.Orchestrator(central, path=r.gitdir, into=into)
        results = orchestrator.merge_workers(strategy=strategy).results
    else:
        if peer is None:
            raise InvalidInputError("name a peer to merge, or use --status, --resolve or --workers")
        if Path(peer).exists() or not _is_local(peer):
            check_peer(peer)
            name = encode_component(Path(peer.rstrip("/")).name.removesuffix(".git") or "peer")
            limits = _limits(max_blob_bytes, max_tree_depth, max_path_bytes, max_objects, max_total_bytes)
            sharing.fetch(r, peer, name=name, branches=[branch], limits=limits)
            theirs = f"refs/remotes/{name}/{branch}"
        else:
            name, theirs = peer, peer
        results = {name: collab.merge_recorded(r, theirs, name=name, into=into, strategy=strategy)}
    if json:
        emit_json(results if workers else next(iter(results.values())))
    else:
        for name, result in results.items():
            label = f"{escape(name)}: " if len(results) > 1 or workers else ""
            console.print(f"{label}{result.status}: {escape(into)} -> {Abbrev(r)(result.commit)}")
            for c in result.conflicts:
                _show_conflict(c)
    if any(result.status == "conflicted" for result in results.values()):
        raise typer.Exit(3)


@app.command()
def push(
    peer: str = typer.Argument(..., help="Path or URL of the repository to push to."),
    branch: list[str] = typer.Option(
        [], "--branch", "-b", help="Branches to share (default: memory, when there is one)."
    ),
    tag_prefix: list[str] = typer.Option(["success_"], "--tag-prefix", help="Share tags with these prefixes."),
    notes: list[str] = typer.Option([], "--notes", help="Notes refs to share (e.g. got)."),
    merge: str | None = typer.Option(
        None,
        "--merge",
        help="When the peer moved on (not a fast-forward): fetch it, merge with this strategy "
        "(review: stop on conflicts, ours, theirs) and push again; never forced.",
    ),
    repo: Path | None = RepoOption,
) -> None:
    """Selective sharing: push only the memory branch and success tags (traces stay private).

    PEER is a path or a URL (git://, http(s)://, ssh://, file://). Credentials are never
    prompted for: configure them outside the agent (a credential helper, an SSH key).
    """
    if merge is not None and merge not in ("review", "ours", "theirs"):
        raise InvalidInputError("--merge takes review, ours or theirs")
    r = open_repo(repo)
    check_peer(peer)
    for name in branch:  # a branch named on the command line must exist; the default may not
        if name not in r.branches():
            raise UnknownRefError(f"no branch {name!r} to push; `got log --all` shows the branches")
    specs = r.push(peer, branches=branch or ["memory"], tag_prefixes=tag_prefix, notes=notes, merge=merge)
    console.print(f"pushed {len(specs)} ref(s) to {escape(peer)}")


@app.command()
def bundle(
    out: Path = typer.Argument(..., dir_okay=False, help="Bundle file to write."),
    ref: list[str] = typer.Option([], "--ref", help="Only these branches/tags/refs (default: all)."),
    repo: Path | None = RepoOption,
    max_blob_bytes: int = MaxBlobOption,
    max_tree_depth: int = MaxDepthOption,
    max_path_bytes: int = MaxPathOption,
    max_objects: int = MaxObjectsOption,
    max_total_bytes: int = MaxTotalOption,
) -> None:
    """Export branches, tags and notes as one reproducible `git bundle` file.

    The file is then verified as `got unbundle` will check it, under the same limits.
    """
    r = open_repo(repo)
    check_target(out, "the bundle file", directory=False)
    with created_on_failure_removed(out):
        path = r.bundle(out, ref or None)
        heads = verify_bundle(
            path, limits=_limits(max_blob_bytes, max_tree_depth, max_path_bytes, max_objects, max_total_bytes)
        )
    console.print(f"wrote {escape(str(path))} ({path.stat().st_size:,} bytes, {len(heads)} refs, verified)")


@app.command()
def unbundle(
    src: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True, help="Bundle file to import."),
    repo: Path | None = RepoOption,
    max_blob_bytes: int = MaxBlobOption,
    max_tree_depth: int = MaxDepthOption,
    max_path_bytes: int = MaxPathOption,
    max_objects: int = MaxObjectsOption,
    max_total_bytes: int = MaxTotalOption,
) -> None:
    """Verify a bundle and import every ref bit-identically (creates the repository if needed).

    A damaged, cut-short or hostile bundle is refused with one line and exit status 1;
    nothing is imported, and no repository is created for it.
    """
    limits = _limits(max_blob_bytes, max_tree_depth, max_path_bytes, max_objects, max_total_bytes)
    target = repo_path(repo)
    try:
        r = open_repo(target)
    except RepositoryNotFoundError:
        if target.exists():
            raise  # a file, or a directory holding something else: never overwritten
        verify_bundle(src, limits=limits)  # before creating anything
        check_target(target, "the repository path", directory=True)
        with created_on_failure_removed(target):
            r = open_repo(target, create=True)
            heads = sharing.unbundle(r, src, limits=limits)
    else:
        heads = sharing.unbundle(r, src, limits=limits)
    abbrev = Abbrev(r)
    for ref, oid in sorted(heads.items()):
        console.print(f"{abbrev(oid)} {escape(ref)}")
