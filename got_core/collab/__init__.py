"""Several agents learning at once: workers, an orchestrator and merge review (docs/ARCHITECTURE.md, layer 3)."""

from got_core.collab.agents import *  # noqa: F403
from got_core.collab.agents import __all__  # noqa: F401
