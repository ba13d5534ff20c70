"""``got mcp``: serve a reasoning repository to any MCP client (stdio, or streamable HTTP).

Registered by the ``got.cli`` entry point (``mcp = got_integrations.mcp.cli:register``)::

    got mcp -r agent.git                      stdio: what desktop assistants and IDE agents launch
    got mcp -r agent.git --http --port 8770   streamable HTTP on http://127.0.0.1:8770/mcp
    got mcp -r agent.git --read-only          only the reading tools
"""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["mcp_command", "register"]


def mcp_command(
    repo: Path | None = typer.Option(
        None, "--repo", "-r", envvar="GOT_REPO", help="Reasoning repository (default: ./got.git, or $GOT_REPO)."
    ),
    http: bool = typer.Option(False, "--http", help="Serve streamable HTTP instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="With --http: the address to bind (default loopback only)."),
    port: int = typer.Option(8770, "--port", min=1, max=65535, help="With --http: the port."),
    read_only: bool = typer.Option(False, "--read-only", help="Serve only the reading tools; change nothing."),
    namespace: str = typer.Option("gcc", "--namespace", help="The GCC workspace's namespace."),
) -> None:
    """Serve the repository's GCC verbs, memory, history and merge status as MCP tools.

    Stdio by default (stdout carries the protocol; messages go to stderr). The
    repository is created when missing unless --read-only.
    """
    from got_core.cli.plugin import check_target, created_on_failure_removed, open_repo, repo_path
    from got_integrations.mcp import build_server

    # The repository is checked (and, unless --read-only, created) before serving: a bad
    # path is one line and exit 2 here, not an error on every tool call later.
    target = repo_path(repo)
    check_target(target, "the repository path", directory=True)
    with created_on_failure_removed(target):
        server = build_server(open_repo(target, create=not read_only), read_only=read_only, namespace=namespace)
    if http:
        typer.echo(f"got mcp: streamable HTTP on http://{host}:{port}/mcp", err=True)
        server.run("streamable-http", host=host, port=port)
    else:
        server.run("stdio")


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to the ``got`` app."""
    app.command("mcp")(mcp_command)
