"""Deprecated location: Contexa's format moved to :mod:`got_core.gcc.contexa`, export and
import to :mod:`got_core.gcc.interop` (this alias goes away in 0.3)."""

import warnings as _warnings

from got_core.gcc.contexa import *  # noqa: F403
from got_core.gcc.contexa import __all__ as _format_all
from got_core.gcc.interop import *  # noqa: F403
from got_core.gcc.interop import __all__ as _interop_all

__all__ = [*_format_all, *_interop_all]

_warnings.warn(
    "got_core.contexa moved to got_core.gcc.contexa (format) and got_core.gcc.interop "
    "(export_gcc, import_gcc); import it from there (this alias goes away in 0.3)",
    DeprecationWarning,
    stacklevel=2,
)
