"""Repository commands: init, and the reading ones (log, show, diff, replay, grep, search,
tags, verify, fsck, gc). Reading never creates anything."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.syntax import Syntax

from got_core.cli.plugin import (
    Abbrev,
    FullOption,
    JsonOption,
    RepoOption,
    app,
    check_target,
    console,
    created_on_failure_removed,
    emit_json,
    open_repo,
    printable,
    repo_path,
    safe,
    say_empty,
    when,
)
from got_core.cli.render import listing, print_commit, print_node
from got_core.errors import InvalidInputError, RepositoryNotFoundError
from got_core.repo import ReasoningRepo
from got_core.signing import TrustStore

__all__: list[str] = []

#: Largest allowed-signers file `got verify` reads (one key is ~100 bytes).
MAX_SIGNERS_BYTES = 4 * 1024 * 1024


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


@app.command()
def init(repo: Path | None = RepoOption) -> None:
    """Create an empty bare reasoning repository (default ./got.git) and say what was made.

    An existing repository is left as it is; a path holding other files is refused.
    """
    target = repo_path(repo)
    try:
        r = open_repo(target)
    except RepositoryNotFoundError:
        if target.exists() and not target.is_dir():
            raise
        check_target(target, "the repository path", directory=True)
        with created_on_failure_removed(target):
            r = ReasoningRepo.init(target)
        console.print(
            f"Created an empty bare repository at {safe(r.gitdir)} "
            f"(session branch {safe(r.session_ref.removeprefix('refs/heads/'))}, notes {safe(r.notes_ref)})."
        )
        return
    console.print(f"{safe(r.gitdir)} is already a git repository; nothing changed.")


@app.command()
def log(
    rev: str | None = typer.Argument(None, help="Start here (default: the session branch)."),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="At most this many commits."),
    all_refs: bool = typer.Option(False, "--all", help="Every branch, not just one."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
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
    if not infos:
        where = "any branch" if all_refs else (rev or r.session_ref.removeprefix("refs/heads/"))
        say_empty(f"no commits on {where} in {r.gitdir}")
        return
    abbrev = Abbrev(r, full=full)
    table = listing("commit", "date", "score", "tags", "summary", title=safe(r.gitdir), wrap=("tags",), full=full)
    for i in infos:
        table.add_row(abbrev(i.oid), when(i.time)[:16], _score(i.score), safe(", ".join(i.tags)), safe(i.summary))
    console.print(table)


@app.command()
def show(
    rev: str = typer.Argument(..., help="SHA (or unique prefix), tag, branch or node id."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """One node in full: thought, scores, trace steps, metadata, note and tags."""
    r = open_repo(repo)
    info = r.commit_info(rev)
    files = r.list_files(info.oid)
    abbrev = Abbrev(r, full=full)
    if "thought.md" not in files:
        if json:
            emit_json({"oid": info.oid, "message": info.message, "files": sorted(files), "tags": list(info.tags)})
            return
        print_commit(info, sorted(files), abbrev)
        return
    node = r.read_node(info.oid)
    if json:
        emit_json(node)
        return
    print_node(node, info, abbrev)


@app.command()
def diff(
    a: str = typer.Argument(..., help="Old side (e.g. failed_X)."),
    b: str = typer.Argument(..., help="New side (e.g. success_Y)."),
    path: str | None = typer.Option(None, "--path", "-p", help="Only this file, e.g. thought.md."),
    context: int = typer.Option(3, "--context", "-U", min=0, help="Context lines."),
    repo: Path | None = RepoOption,
) -> None:
    """Line-level unified diff between two nodes (git's patch format)."""
    r = open_repo(repo)
    text = r.diff(a, b, path, context=context)
    if not text:
        say_empty(f"no differences between {a} and {b}" + (f" in {path}" if path else ""))
        return
    console.print(Syntax(printable(text), "diff", theme="ansi_dark", word_wrap=True))


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
    check_target(out, "the replay directory", directory=True)
    with created_on_failure_removed(out):
        target = r.materialize(oid, out, links=links)
    for path, _blob in sorted(plan.files):
        console.print(f"wrote {safe(str(target / path))}")
    for path, kind in plan.skipped:
        console.print(f"[yellow]skipped[/] {safe(path)} ({kind})")


@app.command()
def grep(
    pattern: str = typer.Argument(..., help="Regular expression (or text with --fixed)."),
    fixed: bool = typer.Option(False, "--fixed", "-F", help="Plain text, not a regex."),
    ignore_case: bool = typer.Option(False, "--ignore-case", "-i"),
    pickaxe: bool = typer.Option(False, "--pickaxe", "-S", help="Search file contents like `git log -S`."),
    branch: list[str] = typer.Option([], "--branch", "-b", help="Only history of these branches."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """Search commit messages (`git log --grep`) or contents (`git log -S`)."""
    r = open_repo(repo)
    refs = branch or None
    for name in branch:
        r.resolve(name)  # a mistyped branch is an error, not "no matches"
    infos = (
        r.pickaxe(pattern, refs=refs) if pickaxe else r.grep(pattern, refs=refs, fixed=fixed, ignore_case=ignore_case)
    )
    if json:
        emit_json([{"oid": i.oid, "summary": i.summary, "tags": list(i.tags), "score": i.score} for i in infos])
        return
    if not infos:
        say_empty(f"no commits match {pattern!r}")
        return
    abbrev = Abbrev(r, full=full)
    table = listing("commit", "score", "tags", "summary", wrap=("tags",), full=full)
    for i in infos:
        table.add_row(abbrev(i.oid), _score(i.score), safe(", ".join(i.tags)), safe(i.summary))
    console.print(table)
    console.print(f"{len(infos)} match{'es' if len(infos) != 1 else ''}")


@app.command()
def search(
    query: str = typer.Argument(..., help="Free text."),
    k: int = typer.Option(5, "-k", min=1, help="How many hits."),
    branch: list[str] = typer.Option([], "--branch", "-b", help="Only history of these branches."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """Ranked retrieval: ρ = 0.7·score + 0.2·tag + 0.1·recency over keyword and pickaxe hits."""
    r = open_repo(repo)
    for name in branch:
        r.resolve(name)
    hits = r.search(query, k, refs=branch or None)
    if json:
        emit_json(hits)
        return
    if not hits:
        say_empty(f"no commits match {query!r}")
        return
    abbrev = Abbrev(r, full=full)
    table = listing("rho", "commit", "score", "tag", "summary", wrap=("tag",), full=full)
    for h in hits:
        table.add_row(f"{h.rho:.3f}", abbrev(h.oid), _score(h.score), safe(h.tag or ""), safe(h.summary))
    console.print(table)


@app.command()
def tags(
    prefix: str = typer.Argument("", help="Only tags starting with this (e.g. success_)."),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """Outcome tags (success_*, failed_*, best) and the commits they mark."""
    r = open_repo(repo)
    found = r.tags(prefix)
    if json:
        emit_json(found)
        return
    if not found:
        say_empty(f"no tags starting with {prefix!r} in {r.gitdir}" if prefix else f"no tags in {r.gitdir}")
        return
    abbrev = Abbrev(r, full=full)
    for name, oid in sorted(found.items()):
        style = "green" if name.startswith(("success_", "best")) else "red" if name.startswith("failed_") else ""
        console.print(f"{abbrev(oid)} [{style}]{safe(name)}[/]" if style else f"{abbrev(oid)} {safe(name)}")


def _check_signers(path: Path) -> None:
    """Read the allowed-signers file now: one that cannot be read is an error, not "no key trusted"."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_SIGNERS_BYTES + 1)
    except OSError as exc:
        raise InvalidInputError(f"cannot read --allowed-signers {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SIGNERS_BYTES:
        raise InvalidInputError(f"--allowed-signers {path} is over {MAX_SIGNERS_BYTES} bytes; is it the right file?")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"--allowed-signers {path} is not text; give an SSH allowed-signers file") from None


@app.command()
def verify(
    rev: str | None = typer.Argument(None, help="Start here (default: every ref)."),
    allowed_signers: Path | None = typer.Option(
        None, exists=True, dir_okay=False, readable=True, help="SSH allowed-signers file of trusted keys."
    ),
    gnupghome: Path | None = typer.Option(
        None, exists=True, file_okay=False, help="GnuPG home of trusted OpenPGP keys."
    ),
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
    full: bool = FullOption,
) -> None:
    """Check commit signatures and the objects they vouch for: good, bad (tampered or damaged),
    unknown-key, unsigned. Exit 1 unless all good."""
    r = open_repo(repo)
    if allowed_signers is not None:
        _check_signers(allowed_signers)
    results = r.verify(rev, trust=TrustStore(allowed_signers, gnupghome))
    if json:
        emit_json(results)
    elif not results:
        say_empty(f"no commits to verify in {r.gitdir}")
    else:
        abbrev = Abbrev(r, full=full)
        colors = {"good": "green", "bad": "bold red", "unknown-key": "yellow", "unsigned": "dim"}
        for v in results:
            line = f"[{colors[v.status]}]{v.status:<11}[/] {abbrev(v.oid)} {safe(v.signer)}"
            if v.status == "bad":
                line += f"  {safe(v.detail)}"
            console.print(line)
        counts: dict[str, int] = {}
        for v in results:
            counts[v.status] = counts.get(v.status, 0) + 1
        console.print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    if any(not v.ok for v in results):
        raise typer.Exit(1)


@app.command()
def fsck(repo: Path | None = RepoOption) -> None:
    """Run `git fsck --strict` on the repository; exit 1 when it finds problems."""
    r = open_repo(repo)
    ok, output = r.fsck()
    if output.strip():
        console.print(safe(output.strip()))
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
