"""``python -m got_integrations.mcp -r REPO``: the same server as ``got mcp``, without the ``got`` script."""

import typer

from got_integrations.mcp.cli import mcp_command

typer.run(mcp_command)
