"""Sharing commands: fetch, merge (with review: --status, --resolve, --workers), push, bundle, unbundle."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from got_core import collab
from got_core.cli._common import JsonOption, RepoOption, app, console, emit_json, open_repo
from got_core.errors import InvalidInputError
from got_core.names import encode_component
from got_core.repo import ReasoningRepo
from got_core.sharing import verify_bundle
from got_core.types import Conflict

__all__: list[str] = []


@app.command()
def fetch(
    peer: str = typer.Argument(..., help="Path or URL of the peer repository."),
    name: Optional[str] = typer.Option(None, help="Local name for the peer (default: from its path)."),
    repo: Optional[Path] = RepoOption,
) -> None:
    """Fetch a peer's branches, success tags and notes (never prompts for credentials)."""
    r = open_repo(repo)
    refs = r.fetch(peer, name=name)
    for ref, oid in sorted(refs.items()):
        console.print(f"{oid[:10]} {escape(ref)}")


def _show_conflict(c: Conflict) -> None:
    console.print(f"[red]CONFLICT[/] {escape(c.path)}")
    console.print(f"  ours:   {escape((c.ours or '(deleted)').strip()[:200])}")
    console.print(f"  theirs: {escape((c.theirs or '(deleted)').strip()[:200])}")


def _merge_status(r: ReasoningRepo, into: Optional[str], json: bool) -> None:
    pending = collab.merge_status(r, into)
    if json:
        emit_json([{"name": p.name, "into": p.into, "commit": p.commit, "conflicts": p.conflicts,
                    "topics": [lc.topic_key for lc in p.lesson_conflicts]} for p in pending])
        return
    if not pending:
        console.print("no merges left for review")
        return
    for p in pending:
        console.print(f"[bold]{escape(p.name)}[/] -> {escape(p.into)} ({p.commit[:10]}): "
                      f"{len(p.conflicts)} conflict(s)")
        for c in p.conflicts:
            _show_conflict(c)
    console.print("decide with: got merge --resolve ours|theirs NAME [--into BRANCH]")


@app.command()
def merge(
    peer: Optional[str] = typer.Argument(None, help="A peer repository (path/URL) or a local revision to merge; "
                                                    "with --resolve, the name of the pending merge."),
    branch: str = typer.Option("memory", "--branch", "-b", help="The peer's branch to merge."),
    into: str = typer.Option("memory", "--into", help="Our branch to merge into."),
    strategy: str = typer.Option("review", "--strategy", "-s",
                                 help="review (default: stop on conflicts), ours or theirs."),
    status: bool = typer.Option(False, "--status", help="List merges left for review and their conflicts."),
    resolve: Optional[str] = typer.Option(None, "--resolve", help="Decide the pending merge PEER: ours or theirs."),
    workers: bool = typer.Option(False, "--workers",
                                 help="Merge every agents/<id>/memory branch of this (central) repository."),
    repo: Optional[Path] = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Three-way merge of a peer's branch; conflicts are listed, never resolved silently.

    A conflicted merge is left for review (`got merge --status` lists it, `got merge
    --resolve ours|theirs NAME` decides it). Exit status 3 when conflicts are left for review.
    """
    r = open_repo(repo)
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
        orchestrator = collab.Orchestrator(r.gitdir, into=into)
        results = orchestrator.merge_workers(strategy=strategy).results
    else:
        if peer is None:
            raise InvalidInputError("name a peer to merge, or use --status, --resolve or --workers")
        if Path(peer).exists() or "://" in peer:
            name = encode_component(Path(peer.rstrip("/")).name.removesuffix(".git") or "peer")
            r.fetch(peer, name=name, branches=[branch])
            theirs = f"refs/remotes/{name}/{branch}"
        else:
            name, theirs = peer, peer
        results = {name: collab.merge_recorded(r, theirs, name=name, into=into, strategy=strategy)}
    if json:
        emit_json(results if workers else next(iter(results.values())))
    else:
        for name, result in results.items():
            label = f"{escape(name)}: " if len(results) > 1 or workers else ""
            console.print(f"{label}{result.status}: {escape(into)} -> {(result.commit or '')[:10]}")
            for c in result.conflicts:
                _show_conflict(c)
    if any(result.status == "conflicted" for result in results.values()):
        raise typer.Exit(3)


@app.command()
def push(
    peer: str = typer.Argument(..., help="Path or URL of the repository to push to."),
    branch: list[str] = typer.Option(["memory"], "--branch", "-b", help="Branches to share."),
    tag_prefix: list[str] = typer.Option(["success_"], "--tag-prefix", help="Share tags with these prefixes."),
    notes: list[str] = typer.Option([], "--notes", help="Notes refs to share (e.g. got)."),
    repo: Optional[Path] = RepoOption,
) -> None:
    """Selective sharing: push only the memory branch and success tags (traces stay private)."""
    r = open_repo(repo)
    specs = r.push(peer, branches=branch, tag_prefixes=tag_prefix, notes=notes)
    console.print(f"pushed {len(specs)} ref(s) to {escape(peer)}")


@app.command()
def bundle(
    out: Path = typer.Argument(..., help="Bundle file to write."),
    ref: list[str] = typer.Option([], "--ref", help="Only these branches/tags/refs (default: all)."),
    repo: Optional[Path] = RepoOption,
) -> None:
    """Export branches, tags and notes as one reproducible `git bundle` file."""
    r = open_repo(repo)
    path = r.bundle(out, ref or None)
    heads = verify_bundle(path)
    console.print(f"wrote {escape(str(path))} ({path.stat().st_size:,} bytes, {len(heads)} refs, verified)")


@app.command()
def unbundle(
    src: Path = typer.Argument(..., help="Bundle file to import."),
    repo: Optional[Path] = RepoOption,
) -> None:
    """Verify a bundle and import every ref bit-identically (creates the repository if needed)."""
    r = open_repo(repo, create=True)
    heads = r.unbundle(src)
    for ref, oid in sorted(heads.items()):
        console.print(f"{oid[:10]} {escape(ref)}")
