"""LlamaIndex adapter: a git-backed memory for LlamaIndex agents (extra ``llamaindex``).

::

    from got_integrations.llamaindex import GitMemory
    memory = GitMemory.from_defaults(path="agent.git", session_id="alice")
    await agent.run("What is 2 + 3?", memory=memory)   # FunctionAgent, ReActAgent, AgentWorkflow

Each write of the memory is one commit on ``refs/got/sessions/<session>``, each
message one JSON file; ``got session list|log|diff`` shows them. Names load
lazily, so importing this package does not import llama-index until a name is used.

Raises:
    MissingExtraError: on first use of a name when ``llama-index-core`` is not installed.
"""

from __future__ import annotations

import importlib
from typing import Any

from got_core.errors import MissingExtraError

__all__ = [
    "GitChatStore",
    "GitMemory",
    "LessonMemoryBlock",
    "ScriptedFunctionCallingLLM",
    "ScriptedToolCall",
    "UnsupportedOptionError",
]

_LAZY = {
    "GitMemory": "got_integrations.llamaindex.memory",
    "GitChatStore": "got_integrations.llamaindex.chat_store",
    "LessonMemoryBlock": "got_integrations.llamaindex.blocks",
    "ScriptedFunctionCallingLLM": "got_integrations.llamaindex.testing",
    "ScriptedToolCall": "got_integrations.llamaindex.testing",
    "UnsupportedOptionError": "got_integrations.llamaindex._options",
}


def _require_llama_index() -> None:
    try:
        importlib.import_module("llama_index.core")
    except ImportError as exc:
        raise MissingExtraError("LlamaIndex adapter", "llamaindex", exc) from None


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        _require_llama_index()
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'got_integrations.llamaindex' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
