"""The one package that talks to pygit2 (ARCHITECTURE §5, invariant 4).

Everything above speaks hex SHAs, bytes and our own types. Objects are written
straight into the object database (blob → tree → commit) and refs are moved with
compare-and-swap; there is no working tree, no index file and no repository-wide
lock on the hot path (ARCHITECTURE §3, §5).

:class:`GitRepo` is composed from one mixin per part (ARCHITECTURE §2): ``_objects``
(blobs and trees), ``_commits`` (commits, revisions, walks, tree diffs), ``_refs`` (ref
transactions, locks, packing), ``_merge`` (three-way merges in memory), ``_remotes``
(fetch, push, ls-remote; credentials and host checks) and ``_raw`` (raw objects for the
inbound checks), over the shared handle and plain types in ``_handle``. libgit2's
process-wide settings live in ``_settings``, set once when this package is imported.
"""

from __future__ import annotations

from got_core.storage.git import _settings  # noqa: F401  (libgit2's process-wide settings, first)
from got_core.storage.git._handle import EMPTY_TREE, READ_ERRORS, BlobId, CommitData, RefRace
from got_core.storage.git._refs import is_valid_ref_name
from got_core.storage.git._remotes import HOSTS_ENV as HOSTS_ENV
from got_core.storage.git._remotes import SSH_KEY_ENV as SSH_KEY_ENV
from got_core.storage.git._remotes import TOKEN_ENV as TOKEN_ENV
from got_core.storage.git._remotes import USER_ENV as USER_ENV
from got_core.storage.git._repo import GitRepo, init_bare
from got_core.storage.git._settings import enable_fsync, fsync_enabled
from got_core.storage.git._staging import flush_staged_writes

__all__ = [
    "EMPTY_TREE",
    "READ_ERRORS",
    "BlobId",
    "CommitData",
    "GitRepo",
    "RefRace",
    "enable_fsync",
    "flush_staged_writes",
    "fsync_enabled",
    "init_bare",
    "is_valid_ref_name",
]
