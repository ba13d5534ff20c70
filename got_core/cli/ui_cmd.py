"""``got ui``: serve the local web viewer (see :mod:`got_core.ui`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from got_core.cli.plugin import RepoOption, console, open_repo
from got_core.errors import ConfigError

__all__ = ["register"]


def ui(
    path: Path | None = RepoOption,
    run: Path | None = typer.Option(
        None, "--run", help="An experiment run directory (its table, plots, trees, audit)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)."),
    port: int = typer.Option(8777, "--port", min=0, max=65535, help="Port (0 picks a free one)."),
    allow_write: bool = typer.Option(False, "--allow-write", help="Allow resolving merges from the page."),
) -> None:
    """Serve a local web viewer: trees, nodes, diffs, threads, sessions, memory, merges, runs."""
    from got_core.ui.server import UIConfig, make_server

    if run is not None and not (run / "config.json").is_file():
        raise ConfigError(f"{run} is not a run directory (no config.json); pass the --out of a cookbook")
    repo = path or (run / "central.git" if run is not None else Path("got.git"))
    if not repo.exists():
        raise ConfigError(f"no repository at {repo}; pass --repo (e.g. the one `got demo` wrote)")
    open_repo(repo).close()  # a file, or a directory that is no repository: one line, before serving
    server = make_server(UIConfig(repo, run, allow_write), host, port)
    address: Any = server.server_address
    bound_host, bound_port = address[0], address[1]
    console.print(f"got ui: http://{bound_host}:{bound_port}/  (writes {'on' if allow_write else 'off'}; Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    """Add ``got ui`` to the ``got`` app."""
    app.command("ui")(ui)
