"""A scripted chat model: a stand-in for an LLM in tests, demos and benchmarks.

It is a real :class:`~got_core.solver.models.BaseChatModel` (every call is
recorded with token counts), but its answers come from a script, never from a
model. Zero latency makes it the right model for measuring solver overhead.

**The scripted-replies file** (``got solve --scripted FILE``, :meth:`ScriptedChatModel.from_file`)
is JSON, either a list of reply strings (used in order, each once)::

    ["Thought: 2 + 2 = 4.\nConfidence: 0.9\nFinal Answer: 4", "Verdict: correct"]

or an object with any of three keys::

    {
      "rules": [["regex", "reply"], ...],
      "replies": ["reply", ...],
      "default": "reply"
    }

For each model call the first rule whose regex matches (``re.search``) the last user
message answers (rules are reused); otherwise the next unused entry of ``replies``;
otherwise ``default``; otherwise the call fails with "no reply left", which ``got solve``
reports. The tree-of-thoughts solver makes several calls per question (four children,
a cross-check, a verifier, a lesson): rules on the prompts' wording (``"Approach 1"``,
``"Check the proposed answer"``, ``"Write ONE general lesson"``) or a ``default`` cover
them all. An example ships as ``cookbooks/data/scripted_replies.json``.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from got_core.errors import InvalidInputError, ModelError
from got_core.solver.models import BaseChatModel, ChatResponse, Usage, estimate_tokens

__all__ = ["MAX_SCRIPT_BYTES", "Reply", "ScriptedChatModel"]

#: Largest scripted-replies file :meth:`ScriptedChatModel.from_file` reads.
MAX_SCRIPT_BYTES = 16 * 1024 * 1024

_SHAPE = (
    'a JSON list of reply strings, or an object {"rules": [[regex, reply], ...], '
    '"replies": [reply, ...], "default": reply} (see `got solve --help`)'
)

#: A scripted reply: text, a full response (e.g. with ``tool_calls``), or a function of the messages.
Reply = str | ChatResponse | Callable[[list[dict[str, Any]]], str | ChatResponse]


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return ""
    return ""


class ScriptedChatModel(BaseChatModel):
    """Answers from a script instead of a model (a test double, clearly not an LLM).

    For each call, in this order:

    1. the first rule whose regex matches (``re.search``) the last user message answers
       (rules are reusable);
    2. otherwise the next unused entry of ``replies`` answers (each is used once);
    3. otherwise ``default`` answers;
    4. otherwise the call raises :class:`~got_core.errors.ModelError` (the script is exhausted).

    A reply may be a string, a :class:`ChatResponse` (to script native tool calls)
    or a callable ``f(messages) -> str | ChatResponse``. ``stop`` sequences cut the
    text as a server would. Tokens are counted approximately (whitespace words).

    Args:
        replies: replies consumed in order.
        rules: ``[(pattern, reply), ...]``; patterns are strings or compiled regexes.
        default: the reply when nothing else applies.
        model_name: reported in responses and call records.
        latency_ms: the latency to report (default 0: a scripted model takes no time).

    Attributes:
        received: the messages of recent calls (deep copies), for assertions.
        received_options: the generation options of the same calls (``temperature``,
            ``max_tokens``, ``seed``, ``stop``, ``tools`` as given), one dict per call.

    Raises:
        InvalidInputError: a rule is not a ``(pattern, reply)`` pair or a pattern does not compile.
    """

    def __init__(
        self,
        replies: Iterable[Reply] | None = None,
        *,
        rules: Iterable[tuple[str | re.Pattern[str], Reply]] | None = None,
        default: Reply | None = None,
        model_name: str = "scripted",
        latency_ms: float = 0.0,
        history: int = 1000,
    ) -> None:
        super().__init__(model_name, history=history)
        self._queue: deque[Reply] = deque(replies or [])
        self._rules: list[tuple[re.Pattern[str], Reply]] = []
        for rule in rules or []:
            try:
                pattern, reply = rule
                compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
            except (TypeError, ValueError, re.error) as exc:
                raise InvalidInputError(f"a rule must be (regex, reply); got {rule!r:.80} ({exc})") from None
            self._rules.append((compiled, reply))
        self.default = default
        self.latency_ms = latency_ms
        self.received: deque[list[dict[str, Any]]] = deque(maxlen=history)
        self.received_options: deque[dict[str, Any]] = deque(maxlen=history)
        self._lock = threading.Lock()

    @classmethod
    def from_data(cls, data: Any, *, source: str = "the script", **options: Any) -> ScriptedChatModel:
        """A model from the scripted-replies format (see the module docstring) already parsed.

        Raises:
            InvalidInputError: ``data`` is not of that shape; the message names ``source``.
        """
        if isinstance(data, list):
            data = {"replies": data}
        if not isinstance(data, dict):
            raise InvalidInputError(f"{source} must hold {_SHAPE}")
        unknown = sorted(set(data) - {"replies", "rules", "default"})
        if unknown:
            raise InvalidInputError(f"{source} has unknown keys {', '.join(map(repr, unknown))}; it must hold {_SHAPE}")
        replies, rules, default = data.get("replies", []), data.get("rules", []), data.get("default")
        if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
            raise InvalidInputError(f'{source}: "replies" must be a list of strings; it must hold {_SHAPE}')
        if not isinstance(rules, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r) for r in rules
        ):
            raise InvalidInputError(f'{source}: "rules" must be a list of [regex, reply] pairs of strings')
        if default is not None and not isinstance(default, str):
            raise InvalidInputError(f'{source}: "default" must be a string')
        if not replies and not rules and default is None:
            raise InvalidInputError(f"{source} holds no reply at all; it must hold {_SHAPE}")
        try:
            return cls(replies, rules=[(p, r) for p, r in rules], default=default, **options)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{source}: {exc}") from None

    @classmethod
    def from_file(cls, path: str | Path, **options: Any) -> ScriptedChatModel:
        """A model from a scripted-replies JSON file (see the module docstring).

        Raises:
            InvalidInputError: the file is missing, unreadable, too large, not JSON, or not
                of that shape; the message names the file.
        """
        path = Path(path)
        try:
            with path.open("rb") as f:
                raw = f.read(MAX_SCRIPT_BYTES + 1)
        except OSError as exc:
            raise InvalidInputError(f"cannot read the scripted replies {path}: {exc.strerror or exc}") from None
        if len(raw) > MAX_SCRIPT_BYTES:
            raise InvalidInputError(f"the scripted replies {path} are over {MAX_SCRIPT_BYTES} bytes")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise InvalidInputError(
                f"the scripted replies {path} are not JSON ({exc}); it must hold {_SHAPE}"
            ) from None
        return cls.from_data(data, source=f"the scripted replies {path}", **options)

    @property
    def remaining(self) -> int:
        """How many queued replies are still unused."""
        return len(self._queue)

    def add_replies(self, *replies: Reply) -> None:
        """Append replies to the queue."""
        with self._lock:
            self._queue.extend(replies)

    def _pick(self, messages: list[dict[str, Any]]) -> Reply:
        last = _last_user_text(messages)
        for pattern, reply in self._rules:
            if pattern.search(last):
                return reply
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.default is not None:
            return self.default
        raise ModelError(
            f"ScriptedChatModel has no reply left (call {self.n_calls + 1}; "
            f"last user message {last[:80]!r}); add replies, a matching rule or a default"
        )

    def _complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        self.received.append(copy.deepcopy(messages))
        self.received_options.append(copy.deepcopy(kwargs))
        reply = self._pick(messages)
        if callable(reply) and not isinstance(reply, ChatResponse):
            reply = reply(messages)
        if isinstance(reply, ChatResponse):
            response = copy.deepcopy(reply)
        elif isinstance(reply, str):
            response = ChatResponse(text=reply, finish_reason="stop")
        else:
            raise ModelError(f"a scripted reply must be str or ChatResponse, got {type(reply).__name__}")
        for stop in kwargs.get("stop") or []:
            cut = response.text.find(stop) if stop else -1
            if cut >= 0:
                response.text = response.text[:cut]
                response.finish_reason = "stop"
        if not response.finish_reason:
            response.finish_reason = "tool_calls" if response.tool_calls else "stop"
        if response.usage.total_tokens == 0:
            out = estimate_tokens(response.text) + sum(
                estimate_tokens(str(c.arguments)) + 1 for c in response.tool_calls
            )
            prompt = sum(estimate_tokens(m["content"]) for m in messages if isinstance(m.get("content"), str))
            response.usage = Usage(max(prompt, 1), max(out, 1), estimated=True)
        if response.latency_ms is None:
            response.latency_ms = self.latency_ms
        response.model = response.model or self.model_name
        return response
