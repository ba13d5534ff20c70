"""The one error tree of GitOfThoughts.

Every exception the library raises on purpose derives from :class:`GotError`.
Two families sit under it: mistakes of the caller (:class:`GotUserError`,
also a :class:`ValueError`) and failures of the environment or the data
(:class:`GotRuntimeError`). Each message says what to do next.

::

    GotError
    ├── GotUserError (ValueError)            the caller can fix it
    │   ├── InvalidNameError                 a ref, key, namespace or id git must not see raw
    │   │   └── UnsafePathError              a tree path replay will not write (reserved name, link)
    │   ├── InvalidInputError                empty, non-UTF-8 or malformed payloads
    │   │   └── PayloadTooLargeError         over a configured size limit
    │   ├── UnknownRefError (KeyError)       no such SHA, branch, tag or node
    │   ├── ConfigError                      a bad option, a missing optional extra
    │   │   ├── MissingExtraError (ImportError)
    │   │   └── UnknownBackendError
    │   ├── RepositoryNotFoundError          no repository (or memory store) at the path
    │   └── RepositoryAccessError            one is there, but this user may not open it
    └── GotRuntimeError (RuntimeError)       the world got in the way
        ├── CorruptRepositoryError           missing or damaged objects
        ├── UntrustedContentError            fetched/bundled/merged objects broke a rule or limit
        ├── ConcurrentUpdateError            a compare-and-swap on a ref kept losing
        ├── MergeConflictError               a merge needs a decision (conflicts as data)
        ├── BisectError                      a bisection's check aborted (128+, signal, timeout)
        ├── SigningError                     the signing key or tool failed
        ├── RemoteError                      a fetch/push failed (credentials are never prompted)
        │   ├── PushRejectedError            the peer refused a ref update (e.g. not a fast-forward)
        │   └── CredentialsRequiredError     the peer asked for credentials
        ├── StorageError                     the disk refused a write
        ├── ModelError                       a chat model call failed
        │   ├── ModelTimeoutError
        │   └── ModelResponseError           malformed or truncated responses
        └── ToolError                        a solver tool refused or failed
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BisectError",
    "ConcurrentUpdateError",
    "ConfigError",
    "CorruptRepositoryError",
    "CredentialsRequiredError",
    "GotError",
    "GotRuntimeError",
    "GotUserError",
    "InvalidInputError",
    "InvalidNameError",
    "MergeConflictError",
    "MissingExtraError",
    "ModelError",
    "ModelResponseError",
    "ModelTimeoutError",
    "PayloadTooLargeError",
    "PushRejectedError",
    "RemoteError",
    "RepositoryAccessError",
    "RepositoryNotFoundError",
    "SigningError",
    "StorageError",
    "ToolError",
    "UnknownBackendError",
    "UnknownRefError",
    "UnsafePathError",
    "UntrustedContentError",
]


class GotError(Exception):
    """Root of every error GitOfThoughts raises on purpose."""


class GotUserError(GotError, ValueError):
    """The caller passed something the library cannot use; fix the input."""


class GotRuntimeError(GotError, RuntimeError):
    """The repository, the disk, the network or a model failed; the input was fine."""


class InvalidNameError(GotUserError):
    """A name (ref, key, namespace, id) that cannot be used safely.

    Raised for empty names, names over the length limit, and strings that are
    not valid Unicode. Other hostile characters are percent-encoded instead.
    """


class UnsafePathError(InvalidNameError):
    """A path that cannot be written to disk safely, so nothing was written.

    Raised by replay (:meth:`got_core.repo.ReasoningRepo.materialize`) for a tree entry
    with a reserved or escaping name (any spelling of ``.git``, ``..``, not UTF-8, too
    long), a symbolic link or gitlink entry, or a symbolic link already in the target
    directory that a write would go through.

    Attributes:
        path: the offending path, printable (non-UTF-8 bytes shown as ``\\xNN``).
    """

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        super().__init__(message)


class InvalidInputError(GotUserError):
    """A payload that is empty, not UTF-8 text, or not of the expected shape."""


class PayloadTooLargeError(InvalidInputError):
    """A payload over the configured size limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"{what} is {size} bytes, over the limit of {limit} bytes; store less, or raise the limit explicitly"
        )


class UnknownRefError(GotUserError, KeyError):
    """No commit, branch, tag, node or session by that name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "unknown ref"


class ConfigError(GotUserError):
    """A bad option or configuration value."""


class MissingExtraError(ConfigError, ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, feature: str, extra: str, cause: BaseException | None = None) -> None:
        self.extra = extra
        detail = f" ({cause})" if cause else ""
        super().__init__(f"{feature} needs the optional extra '{extra}': pip install 'gitofthoughts[{extra}]'{detail}")


class UnknownBackendError(ConfigError):
    """A memory backend name that is not registered."""


class RepositoryNotFoundError(GotUserError):
    """No git repository (or memory store) at the given path, and creation was not asked
    for or would overwrite what is there."""


class RepositoryAccessError(GotUserError):
    """A repository is at the path, but this user may not open it.

    Either it belongs to another user (git's ``safe.directory`` rule, which libgit2
    enforces) or the filesystem refuses to read it. The message says which, and how to
    trust it or fix the permissions. Nothing is ever created over it.
    """


class CorruptRepositoryError(GotRuntimeError):
    """Objects are missing or damaged, or the data is not what we wrote."""


class UntrustedContentError(GotRuntimeError):
    """Objects from a peer, a bundle or a branch being merged were refused.

    They broke one of ``git fsck --strict``'s checks, one of our tree-path rules
    (:func:`got_core.names.check_path`), or an inbound limit
    (:class:`got_core.inbound.InboundLimits`). Nothing was imported or merged: the
    repository's refs and objects are exactly as they were.

    Attributes:
        oid: the offending object, when one is known.
        path: the offending tree path, when one is known.
        limit: the name of the :class:`~got_core.inbound.InboundLimits` field that was
            exceeded (the knob to raise), or None when a rule, not a limit, refused it.
    """

    def __init__(
        self, message: str, *, oid: str | None = None, path: str | None = None, limit: str | None = None
    ) -> None:
        self.oid = oid
        self.path = path
        self.limit = limit
        super().__init__(message)


class ConcurrentUpdateError(GotRuntimeError):
    """A ref moved under us more times than the retry budget allows."""


class BisectError(GotRuntimeError):
    """A bisection stopped: its check aborted (status 128+, a signal, a timeout) or answered nothing usable."""


class MergeConflictError(GotRuntimeError):
    """A merge produced conflicts that need a decision.

    Attributes:
        conflicts: the :class:`got_core.types.Conflict` records (path, base, ours, theirs).
    """

    def __init__(self, message: str, conflicts: list[Any] | None = None) -> None:
        self.conflicts = list(conflicts or [])
        super().__init__(message)


class SigningError(GotRuntimeError):
    """Signing or verification could not run (missing key, tool failure)."""


class RemoteError(GotRuntimeError):
    """Talking to another repository failed (it could not be reached, or it wanted credentials)."""


class PushRejectedError(RemoteError):
    """The peer refused a pushed ref update (not a fast-forward, or its hooks said no)."""


class CredentialsRequiredError(RemoteError):
    """The peer asked for credentials; GitOfThoughts never prompts for them."""


class StorageError(GotRuntimeError):
    """The filesystem refused a write (read-only, full, permissions)."""


class ModelError(GotRuntimeError):
    """A chat-model call failed after its retries."""

    #: How many retries the call made before it gave up (set by the model adapter).
    retries: int = 0


class ModelTimeoutError(ModelError):
    """A chat-model call did not answer within its timeout."""


class ModelResponseError(ModelError):
    """A chat-model answer was malformed, truncated or empty."""


class ToolError(GotRuntimeError):
    """A solver tool refused its input or could not finish within its limits."""
