"""Test doubles users need too, and the contract suites a new implementation must pass.

* doubles: a scripted chat model, deterministic embeddings, and a stand-in
  OpenAI-compatible server on 127.0.0.1. They are real implementations of our
  protocols (no network, no weights), meant for unit tests and demos; names say
  what they are.
* contracts: :class:`MemoryBackendContract` and :class:`ChatModelContract`, pytest
  test classes a third-party memory backend or chat model subclasses to get the
  whole contract our own implementations pass (they import pytest, so they load
  only when asked for).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ChatModelContract", "HashEmbedder", "MemoryBackendContract", "ScriptedChatModel", "StandInOpenAIServer"]

_LAZY = {
    "ScriptedChatModel": "got_core.solver.scripted",
    "HashEmbedder": "got_core.testing.embeddings",
    "StandInOpenAIServer": "got_core.bench.standin",
    "MemoryBackendContract": "got_core.testing.memory_contract",
    "ChatModelContract": "got_core.testing.chat_model_contract",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'got_core.testing' has no attribute {name!r}")
