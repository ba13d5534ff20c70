"""The solver (§3.2 and §6 of arXiv 2606.14470): models, tools, the ReAct and tree-of-thoughts loops, arms.

Every name below is loaded on first use, so ``import got_core.solver`` stays
light (no openai, sympy or pulp until a model is built or a tool runs)::

    from got_core.solver import OpenAICompatibleModel, solve
    model = OpenAICompatibleModel("http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-7B-Instruct")
    result = solve("What is 17 * 23?", model=model, repo_root="runs/trees")
    print(result.answer, result.outcome, result.repo_path)
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ARMS",
    "START_SERVER_HINT",
    "TOOLS",
    "BaseChatModel",
    # budgets and the hook
    "Budget",
    "BudgetExceededError",
    "BudgetTracker",
    "BudgetedModel",
    "CallRecord",
    # models
    "ChatModel",
    "ChatResponse",
    "NodeRecorder",
    "OpenAICompatibleModel",
    "ReactResult",
    "SolveResult",
    # tools
    "Tool",
    "ToolCall",
    "ToolResult",
    "TreeEntry",
    "Usage",
    "arun_react",
    "calculate",
    "check_endpoint",
    "format_tool_instructions",
    "from_env",
    "get_tools",
    "majority_vote",
    "parse_action",
    "problem_id_for",
    "run_arm",
    # ReAct
    "run_react",
    "shutdown_worker",
    # tree of thoughts and arms
    "solve",
    "tot_arm",
]

_LAZY = {
    **dict.fromkeys(
        ["ChatModel", "BaseChatModel", "ChatResponse", "ToolCall", "Usage", "CallRecord", "START_SERVER_HINT"],
        "got_core.solver.models",
    ),
    **dict.fromkeys(["OpenAICompatibleModel", "from_env", "check_endpoint"], "got_core.solver.openai_compat"),
    **dict.fromkeys(
        ["Tool", "ToolResult", "TOOLS", "get_tools", "calculate", "shutdown_worker"], "got_core.solver.tools"
    ),
    **dict.fromkeys(
        ["run_react", "arun_react", "ReactResult", "parse_action", "format_tool_instructions"], "got_core.solver.react"
    ),
    **dict.fromkeys(["Budget", "BudgetTracker", "BudgetedModel", "BudgetExceededError"], "got_core.solver.budget"),
    "NodeRecorder": "got_core.solver.hook",
    **dict.fromkeys(["solve", "SolveResult", "TreeEntry", "problem_id_for", "run_arm"], "got_core.solver.run"),
    "tot_arm": "got_core.solver.tot",
    **dict.fromkeys(["ARMS", "majority_vote"], "got_core.solver.arms"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'got_core.solver' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
