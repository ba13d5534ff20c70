"""Git Context Controller workspaces and Contexa's ``.GCC/`` file format (docs/ARCHITECTURE.md, layer 3).

:mod:`~got_core.gcc.contexa` is the file format alone (parse and render);
:mod:`~got_core.gcc.workspace` keeps a workspace on git refs; :mod:`~got_core.gcc.interop`
copies between the two.
"""

from got_core.gcc.workspace import *  # noqa: F401,F403
from got_core.gcc.workspace import __all__  # noqa: F401
