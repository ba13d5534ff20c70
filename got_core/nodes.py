"""Deprecated location: this module moved to :mod:`got_core.repo.nodes` (this alias goes away in 0.3)."""

import warnings as _warnings

from got_core.repo.nodes import *  # noqa: F403
from got_core.repo.nodes import __all__  # noqa: F401

_warnings.warn(
    "got_core.nodes moved to got_core.repo.nodes; import it from there (this alias goes away in 0.3)",
    DeprecationWarning,
    stacklevel=2,
)
