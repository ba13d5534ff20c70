"""Deprecated location: this module moved to :mod:`got_core.bench.stats` (this alias goes away in 0.3)."""

import warnings as _warnings

from got_core.bench.stats import *  # noqa: F403
from got_core.bench.stats import __all__  # noqa: F401

_warnings.warn(
    "got_core.stats moved to got_core.bench.stats; import it from there (this alias goes away in 0.3)",
    DeprecationWarning,
    stacklevel=2,
)
