"""The repository layer: :class:`ReasoningRepo` and the verbs it composes (docs/ARCHITECTURE.md, layer 2).

``nodes`` (commit-on-score, replay), ``notes`` (score notes), ``retrieval`` (ranked search),
``sharing`` (fetch, merge, push, bundles, maintenance), ``replay`` (safe materialisation),
``verify`` (signatures and the objects they vouch for) each stand on
:class:`~got_core.repo.base.RepoBase`; :class:`~got_core.repo.reasoning.ReasoningRepo`
composes them.
"""

from got_core.repo.base import Keep, Publish, RepoBase
from got_core.repo.reasoning import DEFAULT_NOTES_REF, MAX_FILE_BYTES, ReasoningRepo

__all__ = ["DEFAULT_NOTES_REF", "MAX_FILE_BYTES", "Keep", "Publish", "ReasoningRepo", "RepoBase"]
