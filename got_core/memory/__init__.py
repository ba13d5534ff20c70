"""Memory substrates behind one protocol, chosen by name.

``get_backend("git", path=...)`` returns one of the five backends of the paper's
controlled comparison (§4.2): ``none``, ``markdown``, ``vector``, ``graph``, ``git``.
Heavy dependencies (chromadb, sentence-transformers, networkx) load only when
their backend is asked for.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from got_core.errors import UnknownBackendError
from got_core.memory.base import (
    MAX_LESSON_BYTES,
    BaseMemory,
    CostMeter,
    Lesson,
    MemoryBackend,
    Outcome,
    topic_key_for,
    validate_text,
)

__all__ = [
    "BACKENDS",
    "MAX_LESSON_BYTES",
    "BaseMemory",
    "CostMeter",
    "Lesson",
    "MemoryBackend",
    "Outcome",
    "get_backend",
    "topic_key_for",
    "validate_text",
]

#: registry name -> "module:class"; modules are imported on first use.
BACKENDS: dict[str, str] = {
    "none": "got_core.memory.none:NoMemory",
    "markdown": "got_core.memory.markdown:MarkdownMemory",
    "vector": "got_core.memory.vector:VectorMemory",
    "graph": "got_core.memory.graph:GraphMemory",
    "git": "got_core.memory.git:GitMemory",
}


def get_backend(name: str, path: str | Path | None = None, **options: Any) -> BaseMemory:
    """Open (or create) the memory backend called ``name`` at ``path``.

    Args:
        name: one of :data:`BACKENDS`.
        path: where the backend persists (a directory; ``none`` ignores it).
        **options: backend-specific options; for all of them ``read_only=True`` (refuse
            writes, create nothing) and ``create=False`` (the store must exist already:
            :class:`~got_core.errors.RepositoryNotFoundError` otherwise).

    Raises:
        UnknownBackendError: ``name`` is not registered.
        MissingExtraError: the backend's optional extra is not installed.
        RepositoryNotFoundError: ``create=False`` and nothing is stored at ``path``.
    """
    if not isinstance(name, str) or name.strip().lower() not in BACKENDS:
        raise UnknownBackendError(f"unknown memory backend {name!r}; choose one of {', '.join(BACKENDS)}")
    module_name, _, cls_name = BACKENDS[name.strip().lower()].partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(path, **options)
