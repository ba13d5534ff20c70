"""Sharing commands: fetch, merge, push, bundle, unbundle."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from got_core.cli._common import JsonOption, RepoOption, app, console, emit_json, open_repo
from got_core.names import encode_component
from got_core.sharing import verify_bundle

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


@app.command()
def merge(
    peer: str = typer.Argument(..., help="A peer repository (path/URL) or a local revision to merge."),
    branch: str = typer.Option("memory", "--branch", "-b", help="The peer's branch to merge."),
    into: str = typer.Option("memory", "--into", help="Our branch to merge into."),
    strategy: str = typer.Option("review", "--strategy", "-s",
                                 help="review (default: stop on conflicts), ours or theirs."),
    repo: Optional[Path] = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Three-way merge of a peer's branch; conflicts are listed, never resolved silently.

    Exit status 3 when conflicts are left for review.
    """
    r = open_repo(repo)
    if Path(peer).exists() or "://" in peer:
        name = encode_component(Path(peer.rstrip("/")).name.removesuffix(".git") or "peer")
        r.fetch(peer, name=name, branches=[branch])
        theirs = f"refs/remotes/{name}/{branch}"
    else:
        theirs = peer
    result = r.merge(theirs, into=into, strategy=strategy)
    if json:
        emit_json(result)
    else:
        console.print(f"{result.status}: {escape(into)} -> {(result.commit or '')[:10]}")
        for c in result.conflicts:
            console.print(f"[red]CONFLICT[/] {escape(c.path)}")
            console.print(f"  ours:   {escape((c.ours or '(deleted)').strip()[:200])}")
            console.print(f"  theirs: {escape((c.theirs or '(deleted)').strip()[:200])}")
    if result.status == "conflicted":
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
