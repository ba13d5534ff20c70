"""``got ui``: a local web viewer over any repository this project writes (ARCHITECTURE §2, layer ui).

Trees, nodes, diffs, LangGraph threads, LlamaIndex sessions, memory, merges awaiting review and
experiment runs, read straight from git through the repository API. The server is the standard
library's; the front end (``static/``) is small vanilla JS/CSS/SVG shipped in the package.
Importing this package loads nothing heavy: the server module is imported by ``got ui``.
"""

from __future__ import annotations

__all__: list[str] = []
