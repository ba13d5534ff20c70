"""Deprecated location: this module moved to :mod:`got_core.repo.notes` (this alias goes away in 0.3)."""

import warnings as _warnings

from got_core.repo.notes import *  # noqa: F403
from got_core.repo.notes import __all__  # noqa: F401

_warnings.warn(
    "got_core.notes moved to got_core.repo.notes; import it from there (this alias goes away in 0.3)",
    DeprecationWarning,
    stacklevel=2,
)
