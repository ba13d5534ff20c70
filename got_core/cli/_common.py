"""Deprecated location: this module moved to :mod:`got_core.cli.plugin` (this alias goes away in 0.3)."""

import warnings as _warnings

from got_core.cli.plugin import *  # noqa: F403
from got_core.cli.plugin import __all__  # noqa: F401

_warnings.warn(
    "got_core.cli._common moved to got_core.cli.plugin; import it from there (this alias goes away in 0.3)",
    DeprecationWarning,
    stacklevel=2,
)
