"""The scripted chat model (it lives in :mod:`got_core.solver.scripted`; re-exported for tests)."""

from got_core.solver.scripted import *  # noqa: F403
from got_core.solver.scripted import __all__  # noqa: F401
