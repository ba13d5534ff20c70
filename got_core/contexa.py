"""Deprecated location: this module moved to :mod:`got_core.gcc.contexa` (this alias goes away in 0.3)."""

import warnings as _warnings

from got_core.gcc.contexa import *  # noqa: F401,F403
from got_core.gcc.contexa import __all__  # noqa: F401

_warnings.warn("got_core.contexa moved to got_core.gcc.contexa; import it from there (this alias goes away in 0.3)",
               DeprecationWarning, stacklevel=2)
