"""LangGraph adapters: a git checkpointer and a git store (extra ``langgraph``).

* :class:`GitCheckpointSaver` — every checkpoint a commit; threads are ref
  namespaces, forks are branches, ``git diff`` shows what changed in the state.
* :class:`GitStore` — a ``BaseStore`` whose every batch of writes is one commit.
* :func:`default_serde` — the strict serializer the saver uses by default (wrap it in an
  ``EncryptedSerializer`` to keep it strict under encryption).

Example::

    from got_integrations.langgraph import GitCheckpointSaver
    graph = builder.compile(checkpointer=GitCheckpointSaver.from_path("agent.git"))

Importing this package without LangGraph installed raises
:class:`~got_core.errors.MissingExtraError` naming the extra to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from got_core.errors import MissingExtraError

__all__ = [
    "THREADS_REF",
    "DecryptionError",
    "GitCheckpointSaver",
    "GitStore",
    "InvalidStoreNameError",
    "UnsafePayloadError",
    "default_serde",
]

if TYPE_CHECKING:  # pragma: no cover
    from got_integrations.langgraph._serde import DecryptionError, default_serde
    from got_integrations.langgraph.checkpoint import THREADS_REF, GitCheckpointSaver, UnsafePayloadError
    from got_integrations.langgraph.store import GitStore, InvalidStoreNameError

_LAZY = {
    "GitCheckpointSaver": "got_integrations.langgraph.checkpoint",
    "UnsafePayloadError": "got_integrations.langgraph._serde",
    "DecryptionError": "got_integrations.langgraph._serde",
    "default_serde": "got_integrations.langgraph._serde",
    "THREADS_REF": "got_integrations.langgraph.checkpoint",
    "GitStore": "got_integrations.langgraph.store",
    "InvalidStoreNameError": "got_integrations.langgraph.store",
}


def _require_langgraph() -> None:
    try:
        import langgraph.checkpoint.base
        import langgraph.store.base  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("LangGraph adapters", "langgraph", exc) from exc


_require_langgraph()


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'got_integrations.langgraph' has no attribute {name!r}")
