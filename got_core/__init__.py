"""GitOfThoughts core: agent reasoning stored as a git repository.

Framework-agnostic: importing this package loads pygit2 and nothing heavy
(no langgraph, langchain, llama_index, torch or chromadb).
"""

from got_core.errors import *  # noqa: F401,F403
from got_core.errors import __all__ as _errors_all

__version__ = "0.1.0"

__all__ = ["__version__", *_errors_all]
