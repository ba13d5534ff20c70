"""GitOfThoughts core: agent reasoning stored as a git repository.

Framework-agnostic: importing this package loads pygit2 and nothing heavy
(no langgraph, langchain, llama_index, torch or chromadb).

Main entry points: :class:`ReasoningRepo` (the substrate), :class:`Node`,
:func:`got_core.memory.get_backend` (memory substrates).
"""

from got_core.errors import *  # noqa: F403
from got_core.errors import __all__ as _errors_all
from got_core.repo import DEFAULT_NOTES_REF, ReasoningRepo
from got_core.signing import GPGSigner, SSHSigner, TrustStore
from got_core.types import (
    CommitInfo,
    Conflict,
    DeterministicClock,
    Hit,
    Identity,
    MergeResult,
    Node,
    VerifyResult,
    WallClock,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "ReasoningRepo",
    "DEFAULT_NOTES_REF",
    "Node",
    "Identity",
    "CommitInfo",
    "Conflict",
    "MergeResult",
    "VerifyResult",
    "Hit",
    "DeterministicClock",
    "WallClock",
    "SSHSigner",
    "GPGSigner",
    "TrustStore",
    *_errors_all,
]
