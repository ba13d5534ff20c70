"""The GCC context tools as LangChain tools and LlamaIndex ``FunctionTool``s.

Both adapters wrap the same plain functions (:func:`got_core.gcc.tool_specs`), so an
agent in LangGraph, in LlamaIndex or in our own solver writes to the same workspace
in the same repository. Frameworks are imported when an adapter is built, never at
module import; a missing one raises :class:`~got_core.errors.MissingExtraError`
naming the extra (``langgraph`` or ``llamaindex``).

A user error (an empty summary, an unknown branch, a hostile name) becomes a tool
error the model can read and correct — ``ToolException`` handled by LangChain, an
``is_error`` tool output in LlamaIndex agents — instead of ending the run.

Example::

    tools = as_langchain_tools(GCCWorkspace(repo, roadmap="Prove the lemma"))
    graph.add_node("tools", ToolNode(tools))
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from got_core.errors import GotUserError, MissingExtraError
from got_core.gcc import GCCWorkspace, tool_specs

__all__ = ["as_langchain_tools", "as_llamaindex_tools"]


def as_langchain_tools(workspace: GCCWorkspace) -> list[Any]:
    """The five GCC verbs as LangChain ``StructuredTool``s (usable in a LangGraph ``ToolNode``).

    Raises:
        MissingExtraError: langchain-core is not installed (extra ``langgraph``).
    """
    try:
        from langchain_core.tools import StructuredTool, ToolException
    except ImportError as exc:
        raise MissingExtraError("GCC tools for LangChain/LangGraph", "langgraph", exc) from None

    def wrap(fn: Callable[..., str]) -> Callable[..., str]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> str:
            try:
                return fn(*args, **kwargs)
            except GotUserError as exc:  # the model can fix its input; tell it how
                raise ToolException(f"error: {exc}") from exc

        return call

    return [
        StructuredTool.from_function(
            func=wrap(spec.fn), name=spec.name, description=spec.description, handle_tool_error=True
        )
        for spec in tool_specs(workspace)
    ]


def as_llamaindex_tools(workspace: GCCWorkspace) -> list[Any]:
    """The five GCC verbs as LlamaIndex ``FunctionTool``s (for ``FunctionAgent`` and friends).

    Typed errors propagate; LlamaIndex agents report them to the model as tool errors.

    Raises:
        MissingExtraError: llama-index-core is not installed (extra ``llamaindex``).
    """
    try:
        from llama_index.core.tools import FunctionTool
    except ImportError as exc:
        raise MissingExtraError("GCC tools for LlamaIndex", "llamaindex", exc) from None
    return [
        FunctionTool.from_defaults(fn=spec.fn, name=spec.name, description=spec.description)
        for spec in tool_specs(workspace)
    ]
