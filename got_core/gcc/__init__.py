"""Git Context Controller workspaces and Contexa's ``.GCC/`` file format (docs/ARCHITECTURE.md, layer 3).

:mod:`~got_core.gcc.contexa` is the file format alone (parse and render);
:mod:`~got_core.gcc.workspace` keeps a workspace on git refs; :mod:`~got_core.gcc.tools` offers its verbs as agent tools; :mod:`~got_core.gcc.interop`
copies between the two.
"""

from got_core.gcc.interop import GCC_MAX_BRANCHES, GCC_MAX_FILE_BYTES, GCC_MAX_TOTAL_BYTES, export_gcc, import_gcc
from got_core.gcc.tools import ToolSpec, tool_specs
from got_core.gcc.workspace import *  # noqa: F403
from got_core.gcc.workspace import __all__ as _workspace_all

__all__ = [
    *_workspace_all,
    "export_gcc",
    "import_gcc",
    "GCC_MAX_FILE_BYTES",
    "GCC_MAX_TOTAL_BYTES",
    "GCC_MAX_BRANCHES",
    "ToolSpec",
    "tool_specs",
]
