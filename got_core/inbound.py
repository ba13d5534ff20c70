"""Deprecated location: this module moved to :mod:`got_core.storage.inbound` (this alias goes away in 0.3)."""

import warnings as _warnings

from got_core.storage.inbound import *  # noqa: F403
from got_core.storage.inbound import __all__  # noqa: F401

_warnings.warn(
    "got_core.inbound moved to got_core.storage.inbound; import it from there (this alias goes away in 0.3)",
    DeprecationWarning,
    stacklevel=2,
)
