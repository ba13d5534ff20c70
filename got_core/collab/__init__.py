"""Several agents learning at once: workers, an orchestrator, merge review and lesson layouts (docs/ARCHITECTURE.md, layer 4)."""

from got_core.collab.agents import *  # noqa: F403
from got_core.collab.agents import __all__ as _agents_all
from got_core.collab.layouts import LAYOUTS, LessonMemory, content_path, lesson_id, path_for

__all__ = [*_agents_all, "LAYOUTS", "LessonMemory", "content_path", "lesson_id", "path_for"]
