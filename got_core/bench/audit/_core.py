"""What every audit check shares: the row type, the report, and the guard that turns a
damaged object or a hostile file into a FAIL row instead of a crashed audit."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from got_core.errors import GotError

__all__ = ["STATUSES", "AuditReport", "Check", "finding", "guarded", "listing"]

T = TypeVar("T")

#: What a check can say. ``SKIP`` means the check does not apply (the detail says why).
STATUSES = ("PASS", "FAIL", "SKIP")

#: What a check may raise on damaged or hostile input: every one becomes a FAIL row.
#: (A missing object surfaces as CorruptRepositoryError; a tampered JSON file as
#: ValueError; a record of the wrong shape as KeyError / TypeError / AttributeError.)
_HOSTILE = (GotError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError)


@dataclass
class Check:
    """One line of the audit: ``status`` is ``PASS``, ``FAIL`` or ``SKIP``."""

    name: str
    status: str
    detail: str


@dataclass
class AuditReport:
    """All checks of one run; :attr:`ok` is false when any check FAILed."""

    run_dir: Path
    experiment: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed."""
        return all(c.status != "FAIL" for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "run_dir": str(self.run_dir),
            "experiment": self.experiment,
            "ok": self.ok,
            "checks": [vars(c) for c in self.checks],
        }


def guarded(name: str, check: Callable[..., T], *args: Any) -> T | Check:
    """Run one check; damaged objects and hostile files make it FAIL, never crash the audit.

    Args:
        name: the check's name (the row a failure is reported under).
        check: the check function.
        *args: its arguments.

    Returns:
        The check's row, or a FAIL row that names the error (a missing object's SHA is in
        the message of :class:`~got_core.errors.CorruptRepositoryError`).
    """
    try:
        return check(*args)
    except _HOSTILE as exc:
        return Check(
            name,
            "FAIL",
            f"the check could not be completed: {type(exc).__name__}: {str(exc)[:400]} "
            "(a damaged or tampered run; `git fsck` and the 'objects intact' row say more)",
        )


@contextmanager
def finding(bad: list[str], key: str) -> Iterator[None]:
    """Inside a check's loop: a damaged object or hostile file met for one item becomes a
    finding about that item (appended to ``bad``), and the check goes on with the next."""
    try:
        yield
    except _HOSTILE as exc:
        bad.append(f"{key}: could not be read ({type(exc).__name__}: {str(exc)[:300]})")


def listing(items: Sequence[str], n: int = 3) -> str:
    """The first ``n`` items joined, with a count of the rest."""
    shown = "; ".join(items[:n])
    return shown + (f"; … and {len(items) - n} more" if len(items) > n else "")
