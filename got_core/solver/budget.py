"""Per-question budgets: a wall-clock limit and a token cap around every model call.

§6 of the paper (arXiv 2606.14470) compares test-time arms at a fixed cost, so a
question gets a budget, and running out of it is an *outcome* of the question,
recorded in its repository like any other (a node with outcome ``timeout`` or
``budget``, tagged ``failed_…``), never a crash.

:class:`BudgetedModel` wraps any chat model: before a call it checks the clock
and the token count; the call itself runs in a helper thread that is abandoned
when the deadline passes (a hung HTTP request cannot hold the question past its
budget); after the call the tokens are charged and the cap checked again.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal

from got_core.errors import ConfigError, GotRuntimeError
from got_core.solver.models import BaseChatModel, CallRecord, ChatModel, ChatResponse, Usage

__all__ = ["Budget", "BudgetExceededError", "BudgetTracker", "BudgetedModel"]

BudgetReason = Literal["timeout", "budget"]


class BudgetExceededError(GotRuntimeError):
    """The question ran out of wall-clock time (``reason="timeout"``) or tokens (``"budget"``).

    The solver catches it and records the outcome; it only reaches callers who use
    :class:`BudgetedModel` directly.

    Attributes:
        reason: ``"timeout"`` or ``"budget"``.
    """

    def __init__(self, reason: BudgetReason, message: str) -> None:
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True)
class Budget:
    """What one question may spend.

    Attributes:
        wall_clock_s: seconds from the start of the solve (``None``: no limit).
        max_tokens: prompt + completion tokens over every model call of the
            question (``None``: no cap). Token counts are the server's, or word
            estimates when a backend reports none.
        max_calls: most model calls (``None``: no limit).

    Raises:
        ConfigError: a non-positive limit.
    """

    wall_clock_s: float | None = 600.0
    max_tokens: int | None = 200_000
    max_calls: int | None = None

    def __post_init__(self) -> None:
        for name in ("wall_clock_s", "max_tokens", "max_calls"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise ConfigError(f"Budget.{name} must be positive or None, got {value!r}")


class BudgetTracker:
    """Spending of one question against its :class:`Budget` (thread-safe).

    Args:
        budget: the limits.
        clock: a monotonic clock in seconds (tests may pass their own).

    Attributes:
        exceeded: the first reason the budget ran out, or ``None``.
    """

    def __init__(self, budget: Budget | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget or Budget()
        self._clock = clock
        self._start = clock()
        self._lock = threading.Lock()
        self.tokens = 0
        self.calls = 0
        self.exceeded: BudgetReason | None = None

    @property
    def elapsed_s(self) -> float:
        """Seconds since the tracker started."""
        return self._clock() - self._start

    def remaining_s(self) -> float | None:
        """Seconds left before the deadline (may be negative), or ``None`` without a limit."""
        if self.budget.wall_clock_s is None:
            return None
        return self.budget.wall_clock_s - self.elapsed_s

    def _fail(self, reason: BudgetReason, message: str) -> BudgetExceededError:
        with self._lock:
            if self.exceeded is None:
                self.exceeded = reason
        return BudgetExceededError(reason, message)

    def check(self) -> None:
        """Raise :class:`BudgetExceededError` when any limit is already spent."""
        b = self.budget
        left = self.remaining_s()
        if left is not None and left <= 0:
            raise self._fail(
                "timeout",
                f"the wall-clock budget of {b.wall_clock_s:g} s is spent "
                f"({self.elapsed_s:.2f} s elapsed); raise Budget.wall_clock_s",
            )
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            raise self._fail(
                "budget", f"the token cap of {b.max_tokens} is spent ({self.tokens} tokens); raise Budget.max_tokens"
            )
        if b.max_calls is not None and self.calls >= b.max_calls:
            raise self._fail("budget", f"the cap of {b.max_calls} model calls is spent; raise Budget.max_calls")

    def charge(self, tokens: int) -> None:
        """Count one finished call of ``tokens`` tokens; raise when it broke the token cap."""
        with self._lock:
            self.tokens += int(tokens)
            self.calls += 1
        cap = self.budget.max_tokens
        if cap is not None and self.tokens > cap:
            raise self._fail(
                "budget",
                f"the token cap of {cap} was passed ({self.tokens} tokens after "
                f"call {self.calls}); raise Budget.max_tokens",
            )

    def replay(self, tokens: int, calls: int, exceeded: str | None = None) -> None:
        """Count ``calls`` finished calls of ``tokens`` tokens recorded earlier (no cap check:
        they were checked when they were made); ``exceeded`` restores the reason they spent it."""
        with self._lock:
            self.tokens += int(tokens)
            self.calls += int(calls)
            if exceeded in ("timeout", "budget") and self.exceeded is None:
                self.exceeded = exceeded  # type: ignore[assignment]

    def timed_out(self) -> BudgetExceededError:
        """The error for a call abandoned at the deadline (also marks the tracker)."""
        return self._fail(
            "timeout",
            f"a model call was still running at the wall-clock limit of "
            f"{self.budget.wall_clock_s:g} s and was abandoned; "
            "raise Budget.wall_clock_s or use a faster model",
        )


class BudgetedModel(BaseChatModel):
    """A chat model that spends from a :class:`BudgetTracker` (and records the question's usage).

    Its own ``usage`` / ``n_calls`` / ``calls`` cover this question only, while the
    wrapped model keeps its lifetime totals.

    Args:
        inner: any :class:`~got_core.solver.models.ChatModel`.
        tracker: the question's tracker.

    Raises (from :meth:`complete`):
        BudgetExceededError: the budget was spent before, during or by the call.
        ModelError: the wrapped model failed.
    """

    def __init__(self, inner: ChatModel, tracker: BudgetTracker) -> None:
        super().__init__(getattr(inner, "model_name", "") or type(inner).__name__)
        self.inner = inner
        self.tracker = tracker

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        """Check the budget, make the call within the time left, charge its tokens."""
        self.tracker.check()
        response = super().complete(messages, **kwargs)
        self.tracker.charge(response.usage.total_tokens)
        return response

    def _complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        left = self.tracker.remaining_s()
        if left is None:
            return self.inner.complete(messages, **kwargs)
        # The call runs on a helper thread that is abandoned at the deadline: the
        # question's budget holds even when a request hangs (its late answer is dropped).
        future = _POOL.submit(lambda: self.inner.complete(messages, **kwargs))
        try:
            return future.result(timeout=max(left, 0.0))
        except FutureTimeout:
            raise self.tracker.timed_out() from None

    def replay_calls(self, calls: list[CallRecord], usage: Usage, *, exceeded: str | None = None) -> None:
        """Account for calls a durable engine recorded and replays instead of making again.

        The question's totals (``calls``, ``usage``, ``n_calls``) and its tracker's tokens and
        call count move as if the calls had been made now (see :mod:`got_core.solver.steps`).

        Args:
            calls: the recorded calls, in order (failed ones included, as recorded).
            usage: their summed tokens.
            exceeded: the tracker's reason when the budget ran out during them.
        """
        with self._record_lock:
            self.calls.extend(calls)
            self.usage = self.usage + usage
            self.n_calls += len(calls)
        self.tracker.replay(
            sum(c.prompt_tokens + c.completion_tokens for c in calls if c.error is None),
            sum(1 for c in calls if c.error is None),
            exceeded,
        )


class _DaemonPool:
    """Reusable daemon threads for budgeted calls.

    A thread per call costs 0.2–0.4 ms on a busy machine; these threads are reused.
    They are daemons (unlike ``ThreadPoolExecutor``'s), so an abandoned, hung call
    never holds up interpreter exit. The pool grows to the peak number of calls in
    flight and never shrinks.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn()`` on an idle pool thread (a new one when none is idle); returns its future."""
        future: Future[Any] = Future()
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._jobs.put((fn, future))
        if spawn:
            threading.Thread(target=self._work, name="got-budgeted-call", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            fn, future = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to the waiting caller
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1


_POOL = _DaemonPool()
