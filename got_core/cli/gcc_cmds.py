"""``got gcc``: the GCC context tools from the shell (log, commit, branch, merge, context, export, import).

Register with ``_CORE_GROUPS["gcc"] = "got_core.cli.gcc_cmds:app"``. The current
branch is remembered per repository and namespace (``got gcc branch`` and
``got gcc switch`` move it), so a shell session reads like an agent's.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from got_core.cli.plugin import (
    JsonOption,
    RepoOption,
    check_target,
    console,
    created_on_failure_removed,
    emit_json,
    open_repo,
    repo_path,
    say_empty,
)
from got_core.errors import RepositoryNotFoundError, UnknownRefError
from got_core.gcc.interop import GCC_MAX_FILE_BYTES, GCC_MAX_TOTAL_BYTES, export_gcc, import_gcc
from got_core.gcc.workspace import GCCWorkspace
from got_core.repo import ReasoningRepo

__all__ = ["app"]

app = typer.Typer(
    name="gcc",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="GCC context tools (arXiv 2508.00031): log OTA steps, commit milestones, branch, "
    "merge, read context; export/import Contexa's .GCC/ layout.",
)

NamespaceOption = typer.Option("gcc", "--namespace", "-n", help="Workspace name inside the repository.")
BranchOption = typer.Option(None, "--branch", "-b", help="GCC branch (default: the current one).")


def _workspace(repo: Path | None, namespace: str, branch: str | None) -> GCCWorkspace:
    """The workspace of an existing repository (never created here: `got gcc init` does that).

    Raises:
        RepositoryNotFoundError: no repository at the path.
        UnknownRefError: the repository has no such workspace, or the workspace no such branch.
    """
    r = open_repo(repo)
    ws = GCCWorkspace.resume(r, namespace=namespace)
    if not ws.exists:
        raise UnknownRefError(
            f"no GCC workspace {namespace!r} in {r.gitdir}; create it with `got gcc init -n {namespace}`"
        )
    return ws if branch is None else GCCWorkspace(r, branch, namespace=namespace)


def _new_repo(repo: Path | None) -> tuple[ReasoningRepo, bool]:
    """The repository ``got gcc init`` / ``import`` write to: opened, or created (True) if missing."""
    target = repo_path(repo)
    try:
        return open_repo(target), False
    except RepositoryNotFoundError:
        if target.exists():
            raise  # a file, or a directory holding something else: never overwritten
    check_target(target, "the repository path", directory=True)
    return open_repo(target, create=True), True


@app.command()
def init(
    roadmap: str = typer.Argument("", help="The project roadmap (main.md)."),
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
) -> None:
    """Create a workspace (and the repository, saying so, if there is none) with a roadmap."""
    with created_on_failure_removed(repo_path(repo)):
        r, created = _new_repo(repo)
        ws = GCCWorkspace(r, namespace=namespace)
        ws.init(roadmap)
    if created:
        console.print(f"created an empty bare repository at {escape(str(r.gitdir))}")
    console.print(f"initialised GCC workspace {escape(namespace)} on branch main")


@app.command("log")
def log_step(
    observation: str = typer.Option("", "--observation", "-o", help="What you observed."),
    thought: str = typer.Option("", "--thought", "-t", help="What you concluded."),
    action: str = typer.Option("", "--action", "-a", help="What you did next."),
    branch: str | None = BranchOption,
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
) -> None:
    """Log one Observation-Thought-Action step."""
    ws = _workspace(repo, namespace, branch)
    rec = ws.log_ota(observation, thought, action)
    console.print(f"step {rec.step} on {escape(ws.current_branch)}")


@app.command()
def commit(
    summary: str = typer.Argument(..., help="What the steps since the last commit achieved."),
    roadmap: str | None = typer.Option(None, "--roadmap", help="Append an update to main.md."),
    branch: str | None = BranchOption,
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
) -> None:
    """Commit a milestone that compresses the OTA steps since the last one."""
    ws = _workspace(repo, namespace, branch)
    rec = ws.commit(summary, update_roadmap=roadmap)
    console.print(f"commit {rec.commit_id} on {escape(ws.current_branch)} (compressed {rec.ota_steps} steps)")


@app.command()
def branch(
    name: str = typer.Argument(..., help="New branch name."),
    purpose: str = typer.Argument(..., help="Why this branch exists."),
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
) -> None:
    """Create a branch from the current one and switch to it."""
    ws = _workspace(repo, namespace, None)
    ws.branch(name, purpose)
    console.print(f"on new branch {escape(name)}")


@app.command()
def switch(
    name: str = typer.Argument(..., help="Branch to make current."),
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
) -> None:
    """Make another branch current."""
    ws = _workspace(repo, namespace, None)
    ws.switch(name)
    console.print(f"on branch {escape(name)}")


@app.command()
def merge(
    source: str = typer.Argument(..., help="Branch to merge."),
    summary: str | None = typer.Option(None, "--summary", help="The merge milestone's summary."),
    into: str | None = typer.Option(None, "--into", help="Target (default: current, or the parent)."),
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
) -> None:
    """Merge a branch (a real git merge) and record the merge milestone."""
    ws = _workspace(repo, namespace, None)
    rec = ws.merge(source, summary=summary, target=into)
    console.print(f"merged {escape(source)} into {escape(ws.current_branch)} (milestone {rec.commit_id})")


@app.command()
def context(
    k: int = typer.Option(1, "-k", min=0, help="How many milestone summaries to show."),
    branch: str | None = BranchOption,
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
    json: bool = JsonOption,
) -> None:
    """Print the roadmap, the last k milestones and the steps since the last one."""
    ws = _workspace(repo, namespace, branch)
    if json:
        emit_json(ws.snapshot(k))
    else:
        typer.echo(ws.context(k))


@app.command()
def branches(namespace: str = NamespaceOption, repo: Path | None = RepoOption, json: bool = JsonOption) -> None:
    """List the workspace's branches with purpose and status."""
    ws = _workspace(repo, namespace, None)
    metas = ws.branches()
    if json:
        emit_json(metas)
        return
    if not metas:
        say_empty(f"no branches in GCC workspace {namespace}")
        return
    for name, meta in metas.items():
        mark = "*" if name == ws.current_branch else " "
        console.print(f"{mark} {escape(name)} \\[{escape(meta.status)}] {escape(meta.purpose)}")


@app.command("export")
def export_cmd(
    directory: Path = typer.Argument(..., file_okay=False, help="Project directory to write .GCC/ into."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing .GCC/."),
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
) -> None:
    """Export the workspace as a .GCC/ directory Contexa can read."""
    ws = _workspace(repo, namespace, None)
    check_target(directory, "the export directory", directory=True)
    with created_on_failure_removed(directory):
        root = export_gcc(ws, directory, overwrite=overwrite)
    console.print(f"wrote {escape(str(root))}")


@app.command("import")
def import_cmd(
    directory: Path = typer.Argument(
        ..., exists=True, file_okay=False, help="Directory holding .GCC/ (or the .GCC/ itself)."
    ),
    namespace: str = NamespaceOption,
    repo: Path | None = RepoOption,
    skip_unsafe: bool = typer.Option(
        False,
        "--skip-unsafe",
        help="Leave out symlinks, special files and unusable names (listed) instead of refusing the import.",
    ),
    max_file_bytes: int = typer.Option(GCC_MAX_FILE_BYTES, min=1, help="Largest file read."),
    max_total_bytes: int = typer.Option(GCC_MAX_TOTAL_BYTES, min=1, help="Most bytes read in all."),
) -> None:
    """Import a .GCC/ directory (Contexa's or ours) into a new workspace.

    Symbolic links are never followed and only regular files are read; an unsafe entry
    refuses the import (exit 2) unless --skip-unsafe."""
    # the directory is read (and refused) before a repository is created for it; a
    # repository created here is removed again if the import fails
    with created_on_failure_removed(repo_path(repo)):
        r, _created = _new_repo(repo)
        ws = import_gcc(
            directory,
            r,
            namespace=namespace,
            skip_unsafe=skip_unsafe,
            max_file_bytes=max_file_bytes,
            max_total_bytes=max_total_bytes,
        )
    for entry in ws.skipped:
        console.print(f"[yellow]skipped[/] {escape(entry)}")
    console.print(f"imported {len(ws.branches())} branch(es) into workspace {escape(namespace)}")
