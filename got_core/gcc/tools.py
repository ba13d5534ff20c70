"""The GCC verbs as agent tools: plain functions returning text for the model (ARCHITECTURE §2).

The framework adapters (``got_integrations.gcc_tools``: LangChain, LlamaIndex) and the MCP
server (``got_integrations.mcp``) wrap these same functions, so every agent writes to the
same workspace the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from got_core.gcc.workspace import GCCWorkspace

__all__ = ["ToolSpec", "tool_specs"]


@dataclass(frozen=True)
class ToolSpec:
    """A GCC verb as an agent tool: name, description for the model, and the function."""

    name: str
    description: str
    fn: Callable[..., str]


def tool_specs(workspace: GCCWorkspace) -> list[ToolSpec]:
    """The five GCC verbs as plain functions returning text for the model.

    They raise the typed errors of :class:`GCCWorkspace`; the framework adapters in
    ``got_integrations.gcc_tools`` turn user errors into messages the model can read.
    """
    ws = workspace

    def gcc_log(observation: str, thought: str, action: str) -> str:
        rec = ws.log_ota(observation, thought, action)
        return f"logged step {rec.step} on branch {ws.current_branch}"

    def gcc_commit(summary: str, update_roadmap: str = "") -> str:
        rec = ws.commit(summary, update_roadmap=update_roadmap or None)
        return f"committed {rec.commit_id} on branch {ws.current_branch} (compressed {rec.ota_steps} OTA steps)"

    def gcc_branch(name: str, purpose: str) -> str:
        ws.branch(name, purpose)
        return f"created branch {name} and switched to it"

    def gcc_merge(branch: str, summary: str = "") -> str:
        rec = ws.merge(branch, summary=summary or None)
        return f"merged {branch} into {ws.current_branch} (milestone {rec.commit_id})"

    def gcc_context(k: int = 1) -> str:
        return ws.context(k)

    return [
        ToolSpec("gcc_log", "Log one Observation-Thought-Action step of your work.", gcc_log),
        ToolSpec(
            "gcc_commit",
            "Commit a milestone: summarise what the steps since the last commit "
            "achieved; they are compressed into this summary.",
            gcc_commit,
        ),
        ToolSpec(
            "gcc_branch", "Create a branch to explore an alternative (name, purpose) and switch to it.", gcc_branch
        ),
        ToolSpec("gcc_merge", "Merge a finished branch back into its parent branch.", gcc_merge),
        ToolSpec(
            "gcc_context",
            "Read your context: the roadmap, the last k milestone summaries and the steps since the last milestone.",
            gcc_context,
        ),
    ]
