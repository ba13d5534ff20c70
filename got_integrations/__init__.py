"""Thin adapters from agent frameworks onto the GitOfThoughts substrate.

Each subpackage is an optional extra: ``got_integrations.langgraph``
(``pip install 'gitofthoughts[langgraph]'``) and ``got_integrations.llamaindex``
(``pip install 'gitofthoughts[llamaindex]'``).
"""

__all__: list[str] = []
