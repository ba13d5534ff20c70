"""Test doubles users need too: a scripted chat model, deterministic embeddings, and a
stand-in OpenAI-compatible server on 127.0.0.1.

They are real implementations of our protocols (no network, no weights),
meant for unit tests and demos; names say what they are.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ScriptedChatModel", "HashEmbedder", "StandInOpenAIServer"]

_LAZY = {
    "ScriptedChatModel": "got_core.solver.scripted",
    "HashEmbedder": "got_core.testing.embeddings",
    "StandInOpenAIServer": "got_core.bench.standin",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'got_core.testing' has no attribute {name!r}")
