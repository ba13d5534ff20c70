"""Where the short-term window may start, so a tool call never loses its results.

Pure functions over roles and token counts (no llama-index, no git), so the rule
can be tested over many message sequences.

Chat APIs reject a history whose first message is a tool result ("messages with
role 'tool' must be a response to a preceding message with 'tool_calls'"): a
window cut between an assistant tool call and its results breaks every later
call of the session, and since our history is durable it breaks it after every
reload too. The window is always a *suffix* of the conversation and results
always follow their call, so a cut is safe exactly when the first kept message
is not a tool result. Like llama-index's own ``Memory`` we prefer to start the
window at a user message (some providers require it), which also keeps whole
turns together.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

__all__ = ["TOOL_RESULT_ROLES", "choose_window_start", "first_safe_index", "is_safe_start"]

#: Roles of messages that answer an earlier tool call (OpenAI's legacy "function" too).
TOOL_RESULT_ROLES = frozenset({"tool", "function"})


def is_safe_start(roles: Sequence[str], index: int) -> bool:
    """Whether a window may begin at ``roles[index]`` (it is not a tool result)."""
    return 0 <= index < len(roles) and roles[index] not in TOOL_RESULT_ROLES


def first_safe_index(roles: Sequence[str], start: int = 0) -> int:
    """The first index ``>= start`` where a window may begin (``len(roles)`` when none).

    Used on reads: a window written by someone else (a hand edit, an old version)
    that begins with orphaned tool results is shown from its first safe message.
    """
    index = max(0, start)
    while index < len(roles) and roles[index] in TOOL_RESULT_ROLES:
        index += 1
    return index


def choose_window_start(roles: Sequence[str], tokens: Sequence[int], limit: float, flush_tokens: int = 0) -> int:
    """Index of the first message to keep in the short-term window.

    Messages before it are flushed (archived and handed to the memory blocks).

    Args:
        roles: the roles of the current window's messages, oldest first.
        tokens: their estimated token counts (same length).
        limit: the token budget of the window (``token_limit * chat_history_token_ratio``).
        flush_tokens: flush at least this many tokens once over the limit, so the
            window does not move on every write (llama-index's ``token_flush_size``).

    Returns:
        ``0`` when nothing is flushed; otherwise a cut index ``s`` with ``0 < s < len(roles)``
        where ``roles[s]`` is a user message, or, in a conversation without user
        messages, any message that is not a tool result. The latest turn is always
        kept, even when it alone is over the limit (as llama-index's ``Memory`` does).

    Raises:
        ValueError: ``roles`` and ``tokens`` differ in length.
    """
    if len(roles) != len(tokens):
        raise ValueError("roles and tokens must have the same length")
    n = len(roles)
    total = sum(tokens)
    if n <= 1 or total <= limit:
        return 0
    goal = max(total - limit, flush_tokens)
    if any(role == "user" for role in roles):
        candidates = [i for i in range(1, n) if roles[i] == "user"]
    else:
        candidates = [i for i in range(1, n) if roles[i] not in TOOL_RESULT_ROLES]
    if not candidates:
        return 0
    removed = [0, *accumulate(tokens)]  # removed[s] = tokens before index s
    for s in candidates:
        if removed[s] >= goal:
            return s
    return candidates[-1]
