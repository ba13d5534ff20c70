"""Reading commands: log, show, diff, replay, grep, search, tags, verify, fsck, gc."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from got_core.cli.plugin import JsonOption, RepoOption, app, console, emit_json, open_repo, when
from got_core.signing import TrustStore

__all__: list[str] = []


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _safe(text: object) -> str:
    """Text from a repository, ready for rich: markup escaped, control characters shown as escapes.

    A fetched repository may hold terminal escape sequences or bidi overrides in
    messages, ids and files; they are shown, never interpreted by the terminal.
    """
    return escape(_CONTROL.sub(lambda m: repr(m.group(0))[1:-1], str(text)))


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


@app.command()
def log(
    rev: str | None = typer.Argument(None, help="Start here (default: the session branch)."),
    limit: int = typer.Option(20, "--limit", "-n", help="At most this many commits."),
    all_refs: bool = typer.Option(False, "--all", help="Every branch, not just one."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """History with scores and tags, newest first."""
    r = open_repo(repo)
    infos = r.log(rev, limit=limit, all_refs=all_refs)
    if json:
        emit_json(
            [
                {
                    "oid": i.oid,
                    "summary": i.summary,
                    "time": i.time,
                    "parents": list(i.parents),
                    "tags": list(i.tags),
                    "score": i.score,
                }
                for i in infos
            ]
        )
        return
    table = Table(title=f"{r.gitdir}", show_lines=False)
    for col in ("commit", "time", "score", "tags", "summary"):
        table.add_column(col, overflow="fold")
    for i in infos:
        table.add_row(i.oid[:10], when(i.time), _score(i.score), _safe(", ".join(i.tags)), _safe(i.summary))
    console.print(table)


@app.command()
def show(
    rev: str = typer.Argument(..., help="SHA, tag, branch or node id."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """One node in full: thought, scores, trace, metadata, note and tags."""
    r = open_repo(repo)
    info = r.commit_info(rev)
    files = r.list_files(info.oid)
    if "thought.md" not in files:
        if json:
            emit_json({"oid": info.oid, "message": info.message, "files": sorted(files), "tags": list(info.tags)})
            return
        console.print(f"[bold]{info.oid}[/]  {when(info.time)}\n{_safe(info.message)}")
        for path in sorted(files):
            console.print(f"  {_safe(path)}")
        return
    node = r.read_node(info.oid)
    if json:
        emit_json(node)
        return
    console.print(f"[bold]commit {node.oid}[/]  ({when(info.time)})")
    if node.parents:
        console.print(f"parents: {', '.join(p[:10] for p in node.parents)}")
    console.print(
        f"node {_safe(node.node_id)}  problem {_safe(node.problem_id)}  depth {node.depth}  "
        f"outcome {node.outcome or '-'}  score {_score(node.score)}"
    )
    if node.tags:
        console.print(f"tags: {_safe(', '.join(node.tags))}")
    console.rule("thought.md")
    console.print(_safe(node.thought))
    console.rule("scores.json")
    console.print(_safe(str(node.scores)))
    if node.trace:
        console.rule(f"trace.jsonl ({len(node.trace)} steps)")
        for step in node.trace:
            console.print(_safe(str(step)))


@app.command()
def diff(
    a: str = typer.Argument(..., help="Old side (e.g. failed_X)."),
    b: str = typer.Argument(..., help="New side (e.g. success_Y)."),
    path: str | None = typer.Option(None, "--path", "-p", help="Only this file, e.g. thought.md."),
    context: int = typer.Option(3, "--context", "-U", help="Context lines."),
    repo: Path | None = RepoOption,
) -> None:
    """Line-level unified diff between two nodes (git's patch format)."""
    r = open_repo(repo)
    text = r.diff(a, b, path, context=context)
    if not text:
        console.print("(no differences)")
        return
    console.print(
        Syntax(_CONTROL.sub(lambda m: repr(m.group(0))[1:-1], text), "diff", theme="ansi_dark", word_wrap=True)
    )


@app.command()
def replay(
    rev: str = typer.Argument(..., help="The node to rebuild."),
    out: Path = typer.Argument(..., help="Directory to write the node's files into."),
    skip_links: bool = typer.Option(
        False, "--skip-links", help="Leave symbolic-link and gitlink entries out instead of refusing the tree."
    ),
    repo: Path | None = RepoOption,
) -> None:
    """Materialise a node's files into a directory (the full reasoning state at that SHA).

    The whole tree is checked first: a reserved name (any spelling of .git), an escaping
    path or a link refuses the replay with nothing written. Files are written as plain,
    non-executable files, never through a symbolic link.
    """
    r = open_repo(repo)
    oid = r.resolve(rev)
    links = "skip" if skip_links else "refuse"
    plan = r.replay_plan(oid, links=links)
    target = r.materialize(oid, out, links=links)
    for path, _blob in sorted(plan.files):
        console.print(f"wrote {_safe(str(target / path))}")
    for path, kind in plan.skipped:
        console.print(f"[yellow]skipped[/] {_safe(path)} ({kind})")


@app.command()
def grep(
    pattern: str = typer.Argument(..., help="Regular expression (or text with --fixed)."),
    fixed: bool = typer.Option(False, "--fixed", "-F", help="Plain text, not a regex."),
    ignore_case: bool = typer.Option(False, "--ignore-case", "-i"),
    pickaxe: bool = typer.Option(False, "--pickaxe", "-S", help="Search file contents like `git log -S`."),
    branch: list[str] = typer.Option([], "--branch", "-b", help="Only history of these branches."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Search commit messages (`git log --grep`) or contents (`git log -S`)."""
    r = open_repo(repo)
    refs = branch or None
    infos = (
        r.pickaxe(pattern, refs=refs) if pickaxe else r.grep(pattern, refs=refs, fixed=fixed, ignore_case=ignore_case)
    )
    if json:
        emit_json([{"oid": i.oid, "summary": i.summary, "tags": list(i.tags), "score": i.score} for i in infos])
        return
    for i in infos:
        console.print(
            f"[yellow]{i.oid[:10]}[/] {_score(i.score):>6} {_safe(i.summary)} [cyan]{_safe(' '.join(i.tags))}[/]"
        )
    console.print(f"{len(infos)} match(es)")


@app.command()
def search(
    query: str = typer.Argument(..., help="Free text."),
    k: int = typer.Option(5, "-k", help="How many hits."),
    branch: list[str] = typer.Option([], "--branch", "-b", help="Only history of these branches."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Ranked retrieval: ρ = 0.7·score + 0.2·tag + 0.1·recency over keyword and pickaxe hits."""
    r = open_repo(repo)
    hits = r.search(query, k, refs=branch or None)
    if json:
        emit_json(hits)
        return
    table = Table()
    for col in ("rho", "commit", "score", "tag", "summary"):
        table.add_column(col, overflow="fold")
    for h in hits:
        table.add_row(f"{h.rho:.3f}", h.oid[:10], _score(h.score), _safe(h.tag or ""), _safe(h.summary))
    console.print(table)


@app.command()
def tags(
    prefix: str = typer.Argument("", help="Only tags starting with this (e.g. success_)."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Outcome tags (success_*, failed_*, best) and the commits they mark."""
    r = open_repo(repo)
    found = r.tags(prefix)
    if json:
        emit_json(found)
        return
    for name, oid in sorted(found.items()):
        style = "green" if name.startswith(("success_", "best")) else "red" if name.startswith("failed_") else ""
        console.print(f"[{style}]{_safe(name)}[/] {oid[:10]}" if style else f"{_safe(name)} {oid[:10]}")


@app.command()
def verify(
    rev: str | None = typer.Argument(None, help="Start here (default: every ref)."),
    allowed_signers: Path | None = typer.Option(None, help="SSH allowed-signers file of trusted keys."),
    gnupghome: Path | None = typer.Option(None, help="GnuPG home of trusted OpenPGP keys."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Check commit signatures and the objects they vouch for: good, bad (tampered or damaged),
    unknown-key, unsigned. Exit 1 unless all good."""
    r = open_repo(repo)
    results = r.verify(rev, trust=TrustStore(allowed_signers, gnupghome))
    if json:
        emit_json(results)
    else:
        colors = {"good": "green", "bad": "bold red", "unknown-key": "yellow", "unsigned": "dim"}
        for v in results:
            line = f"[{colors[v.status]}]{v.status:<11}[/] {v.oid[:10]} {_safe(v.signer)}"
            if v.status == "bad":
                line += f"  {_safe(v.detail)}"
            console.print(line)
        counts: dict[str, int] = {}
        for v in results:
            counts[v.status] = counts.get(v.status, 0) + 1
        console.print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no commits")
    if not results or any(not v.ok for v in results):
        raise typer.Exit(1)


@app.command()
def fsck(repo: Path | None = RepoOption) -> None:
    """Run `git fsck --strict` on the repository; exit 1 when it finds problems."""
    r = open_repo(repo)
    ok, output = r.fsck()
    if output.strip():
        console.print(_safe(output.strip()))
    console.print("[green]clean[/]" if ok else "[red]problems found[/]")
    if not ok:
        raise typer.Exit(1)


@app.command()
def gc(repo: Path | None = RepoOption) -> None:
    """Pack loose objects and refs (libgit2 never does), and rebuild the search index."""
    r = open_repo(repo)
    stats = r.maintenance()
    r.reindex()
    console.print(f"objects: {stats['bytes_before']:,} -> {stats['bytes_after']:,} bytes")
