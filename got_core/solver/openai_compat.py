"""``OpenAICompatibleModel``: the HTTP client for OpenAI-compatible servers (vLLM, ...).

Retries with back-off on 408/409/429/5xx and dropped connections, per-call timeouts, a
concurrency limit, typed errors (:class:`~got_core.errors.ModelTimeoutError`,
:class:`~got_core.errors.ModelResponseError`); every call is recorded by
:class:`~got_core.solver.models.BaseChatModel`. The ``openai`` package is imported
only when a client is built (the ``solver`` extra).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Mapping
from typing import Any

from got_core.errors import (
    ConfigError,
    MissingExtraError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
)
from got_core.solver.models import (
    START_SERVER_HINT,
    BaseChatModel,
    ChatResponse,
    ToolCall,
    Usage,
    estimate_tokens,
)

__all__ = ["OpenAICompatibleModel", "check_endpoint", "from_env"]


_RETRYABLE_STATUS = {408, 409, 429}


class OpenAICompatibleModel(BaseChatModel):
    """A client for any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, llama.cpp, ...).

    Retries are ours, not the SDK's: exponential backoff with jitter on 429, 5xx,
    408/409, connection errors and timeouts, honouring ``Retry-After``. A
    semaphore bounds concurrent requests (a ToT expansion fires four at once).

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1`` (vLLM's default).
        model: the served model name (``GET {base_url}/models`` lists them).
        api_key: vLLM accepts anything unless started with ``--api-key``.
        temperature, max_tokens, seed: defaults for calls that do not set them.
        timeout: seconds per HTTP attempt.
        max_retries: retries after the first attempt.
        backoff: base delay in seconds; attempt ``n`` waits about ``backoff * 2**n``.
        concurrency: most requests in flight at once from this client.
        stream: use server-sent events (a stream without a finish reason is an error).

    Raises:
        MissingExtraError: the ``openai`` package is missing (extra ``solver``).
        ConfigError: a non-positive timeout or concurrency, or an empty url/model.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "EMPTY",
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        concurrency: int = 8,
        stream: bool = False,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingExtraError("OpenAICompatibleModel", "solver", exc) from None
        if not base_url or not model:
            raise ConfigError(f"base_url and model are required; {START_SERVER_HINT}")
        if timeout <= 0 or concurrency < 1 or max_retries < 0 or backoff < 0:
            raise ConfigError("timeout must be > 0, concurrency >= 1, max_retries and backoff >= 0")
        super().__init__(model)
        self.base_url = base_url.rstrip("/")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.concurrency = concurrency
        self.stream = stream
        self._openai = openai
        # SDK retries off: one retry policy, ours, so records count retries truthfully.
        self._client = openai.OpenAI(base_url=self.base_url, api_key=api_key, timeout=timeout, max_retries=0)
        self._slots = threading.BoundedSemaphore(concurrency)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> OpenAICompatibleModel:
        """Build a client from ``GOT_BASE_URL``, ``GOT_MODEL`` and ``GOT_API_KEY``.

        Args:
            env: a mapping to read instead of ``os.environ``.
            **kwargs: other constructor arguments (they win over the environment).

        Raises:
            ConfigError: ``GOT_BASE_URL`` or ``GOT_MODEL`` is unset.
        """
        environ: Mapping[str, str] = os.environ if env is None else env
        base_url = kwargs.pop("base_url", None) or environ.get("GOT_BASE_URL")
        model = kwargs.pop("model", None) or environ.get("GOT_MODEL")
        if not base_url:
            raise ConfigError(f"GOT_BASE_URL is not set; {START_SERVER_HINT}")
        if not model:
            raise ConfigError(
                "GOT_MODEL is not set; set it to the served model name (GET <base_url>/models lists them)"
            )
        kwargs.setdefault("api_key", environ.get("GOT_API_KEY") or "EMPTY")
        return cls(base_url, model, **kwargs)

    def backoff_delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``attempt`` (0-based): ``backoff * 2**attempt`` with jitter.

        A server's ``Retry-After`` (seconds) is honoured when larger; waits are capped at 60 s.
        """
        delay = self.backoff * (2**attempt) * random.uniform(0.5, 1.0)
        if retry_after is not None and retry_after > delay:
            delay = retry_after
        return min(delay, 60.0)

    def _complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        request: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "temperature": kwargs.get("temperature", self.temperature),
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
        }
        seed = kwargs.get("seed", self.seed)
        if seed is not None:
            request["seed"] = seed
        if kwargs.get("stop"):
            request["stop"] = list(kwargs["stop"])
        if kwargs.get("tools"):
            request["tools"] = list(kwargs["tools"])
        if self.stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        with self._slots:
            attempt = 0
            while True:
                try:
                    response = self._attempt(request, attempt)
                except _Retry as retry:
                    time.sleep(retry.delay)
                    attempt += 1
                    continue
                response.retries = attempt
                return response

    def _attempt(self, request: dict[str, Any], attempt: int) -> ChatResponse:
        """One HTTP attempt: an answer, a :class:`_Retry`, or a typed error carrying ``.retries``."""
        oa = self._openai
        try:
            if self.stream:
                return self._read_stream(self._client.chat.completions.create(**request))
            return self._read_completion(self._client.chat.completions.create(**request))
        except oa.APIStatusError as exc:
            status = exc.status_code
            if (status >= 500 or status in _RETRYABLE_STATUS) and attempt < self.max_retries:
                raise _Retry(self.backoff_delay(attempt, _retry_after(exc))) from None
            error: ModelError = self._status_error(exc, attempt)
        except (oa.APITimeoutError, oa.APIConnectionError) as exc:
            if attempt < self.max_retries:
                raise _Retry(self.backoff_delay(attempt)) from None
            error = self._connection_error(exc, attempt)
        except ModelError as exc:
            error = exc
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            # A body that is not JSON (json.JSONDecodeError is a ValueError) or not a completion.
            error = ModelResponseError(
                f"{self.base_url} sent a malformed chat completion ({type(exc).__name__}: {exc}); "
                "is it really an OpenAI-compatible server?"
            )
        except oa.OpenAIError as exc:
            error = ModelError(f"chat completion failed at {self.base_url}: {exc}")
        error.retries = attempt  # read by BaseChatModel's record
        raise error from None

    def _status_error(self, exc: Any, attempt: int) -> ModelError:
        status = exc.status_code
        hint = {
            401: "check GOT_API_KEY / --api-key",
            404: f"check that the base URL ends in /v1 and that model {self.model_name!r} is served "
            "(GET <base_url>/models lists them)",
            429: "the server is rate limiting; lower concurrency or raise max_retries",
        }.get(status, "see the server log")
        body = str(getattr(exc, "message", exc))[:300]
        return ModelError(f"{self.base_url} answered HTTP {status} after {_retries(attempt)}: {body}; {hint}")

    def _connection_error(self, exc: Any, attempt: int) -> ModelError:
        if isinstance(exc, self._openai.APITimeoutError):
            return ModelTimeoutError(
                f"no answer from {self.base_url} within {self.timeout} s after {_retries(attempt)}; "
                "raise timeout or lower max_tokens"
            )
        return ModelError(f"cannot reach {self.base_url} ({exc}) after {_retries(attempt)}; {START_SERVER_HINT}")

    def _read_completion(self, completion: Any) -> ChatResponse:
        if isinstance(completion, (str, bytes)) or not getattr(completion, "choices", None):
            raise ModelResponseError(
                f"{self.base_url} returned no choices ({str(completion)[:200]!r}); check the server log"
            )
        choice = completion.choices[0]
        message = choice.message
        calls = [_tool_call(tc.id, tc.function.name, tc.function.arguments) for tc in (message.tool_calls or [])]
        usage_obj = getattr(completion, "usage", None)
        text = message.content or ""
        if usage_obj is not None:
            usage = Usage(usage_obj.prompt_tokens or 0, usage_obj.completion_tokens or 0)
        else:
            usage = Usage(0, estimate_tokens(text), estimated=True)
        return ChatResponse(
            text=text,
            tool_calls=calls,
            usage=usage,
            model=getattr(completion, "model", "") or self.model_name,
            finish_reason=choice.finish_reason,
        )

    def _read_stream(self, stream: Any) -> ChatResponse:
        import httpx  # a dependency of openai

        parts: list[str] = []
        tool_parts: dict[int, dict[str, Any]] = {}
        finish_reason = None
        usage = None
        model = ""
        try:
            for chunk in stream:
                model = getattr(chunk, "model", "") or model
                if getattr(chunk, "usage", None) is not None:
                    usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        parts.append(delta.content)
                    for tc in (delta.tool_calls if delta is not None else None) or []:
                        slot = tool_parts.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = tc.id or slot["id"]
                        if tc.function is not None:
                            slot["name"] += tc.function.name or ""
                            slot["arguments"] += tc.function.arguments or ""
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
        except httpx.TimeoutException:
            raise ModelTimeoutError(f"the stream from {self.base_url} stalled for over {self.timeout} s") from None
        except (httpx.TransportError, self._openai.APIError) as exc:
            raise ModelResponseError(
                f"the stream from {self.base_url} broke off after {len(parts)} chunks ({exc}); retry the call"
            ) from None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        text = "".join(parts)
        if finish_reason is None:
            raise ModelResponseError(
                f"the stream from {self.base_url} ended without a finish reason after {len(parts)} chunks "
                "(truncated); retry the call"
            )
        calls = [_tool_call(s["id"], s["name"], s["arguments"]) for _, s in sorted(tool_parts.items())]
        if usage is None:
            usage = Usage(0, estimate_tokens(text), estimated=True)
        return ChatResponse(
            text=text, tool_calls=calls, usage=usage, model=model or self.model_name, finish_reason=finish_reason
        )

    def close(self) -> None:
        """Close the underlying HTTP connections."""
        self._client.close()


class _Retry(Exception):
    """Internal signal: wait ``delay`` seconds and try again."""

    def __init__(self, delay: float) -> None:
        super().__init__(delay)
        self.delay = delay


def _retries(n: int) -> str:
    return f"{n} retr{'y' if n == 1 else 'ies'}"


def _tool_call(call_id: str | None, name: str, arguments: str | None) -> ToolCall:
    raw = arguments or ""
    try:
        parsed: dict[str, Any] | str = json.loads(raw) if raw.strip() else {}
    except ValueError:
        parsed = raw  # let the ReAct loop report the bad JSON to the model
    return ToolCall(id=call_id or "", name=name or "", arguments=parsed)


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date; the exponential delay will do


def from_env(env: dict[str, str] | None = None, **kwargs: Any) -> OpenAICompatibleModel:
    """Shorthand for :meth:`OpenAICompatibleModel.from_env`."""
    return OpenAICompatibleModel.from_env(env, **kwargs)


def check_endpoint(base_url: str, *, api_key: str | None = None, timeout: float = 5.0) -> list[str]:
    """Ask ``{base_url}/models`` whether a server answers; return the served model ids.

    Any HTTP answer counts as "something answers" (an auth error returns ``[]``).

    Raises:
        ModelError: nothing answers; the message says how to start a server.
    """
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            body = resp.read(1_000_000)
    except urllib.error.HTTPError:
        return []
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ModelError(f"no model server answers at {base_url} ({reason}); {START_SERVER_HINT}") from None
    try:
        data = json.loads(body)
        return [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m]
    except (ValueError, AttributeError, TypeError):
        return []
