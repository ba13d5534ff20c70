"""The stand-in OpenAI-compatible server (it lives in :mod:`got_core.bench.standin`; re-exported for tests)."""

from got_core.bench.standin import *  # noqa: F403
from got_core.bench.standin import __all__  # noqa: F401
