"""``Memory.from_defaults`` arguments that have a git equivalent instead (no llama-index import).

llama-index's ``Memory.from_defaults`` builds a ``SQLAlchemyChatStore`` from
``table_name`` / ``async_database_uri`` / ``async_engine`` / ``db_schema``, or takes
any ``AsyncDBChatStore`` as ``chat_store``. ``GitMemory`` keeps its messages in a git
repository, so those options are refused with a message naming what to use instead;
they are accepted at their defaults, so code written for ``Memory`` runs unchanged.
"""

from __future__ import annotations

from typing import Any

from got_core.errors import ConfigError

__all__ = ["SQL_DEFAULTS", "UnsupportedOptionError", "refuse_sql_options"]

#: The SQL store's options and their defaults in ``Memory.from_defaults``.
SQL_DEFAULTS: dict[str, Any] = {
    "table_name": "llama_index_memory",
    "async_database_uri": None,
    "async_engine": None,
    "db_schema": None,
}

_INSTEAD = {
    "table_name": "sessions are git refs (refs/got/sessions/<session_id>), not table rows; "
    "pick the repository with path=... and the conversation with session_id=...",
    "async_database_uri": "the messages live in a git repository; pass path='agent.git' "
    "(or $GOT_REPO) instead of a database URI",
    "async_engine": "the messages live in a git repository; pass path='agent.git' "
    "or repo=ReasoningRepo(...) instead of a SQLAlchemy engine",
    "db_schema": "git has no schemas; use one repository (path=...) or one session_id per namespace",
}


class UnsupportedOptionError(ConfigError):
    """A ``Memory.from_defaults`` option that has no meaning for a git-backed memory.

    The message names the option and the git equivalent to use instead.
    """


def refuse_sql_options(**given: Any) -> None:
    """Raise for any SQL-store option given a value other than its default.

    Args:
        given: ``table_name``, ``async_database_uri``, ``async_engine``, ``db_schema`` as passed.

    Raises:
        UnsupportedOptionError: one of them is not at its default (the first, in signature order).
    """
    for name, default in SQL_DEFAULTS.items():
        value = given.get(name, default)
        changed = value != default if isinstance(default, str) else value is not default
        if changed:
            # the value itself is not echoed: a database URI may carry a password
            raise UnsupportedOptionError(
                f"GitMemory.from_defaults({name}=...) is a SQL chat-store option: {_INSTEAD[name]}"
            )
