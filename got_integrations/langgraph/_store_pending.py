"""The store index's record of this process's latest commits, held in memory for a while.

Writing a put's index rows as their own SQLite transaction costs about a sixth of the put
(ARCHITECTURE §6). Instead :class:`~got_integrations.langgraph._store_index.ItemIndex`
keeps the rows of this process's latest commits here, a linear chain on the store ref
(each commit's parent is the one before): a ``get``, and a batch's own look-up of the items
it overwrites, answer from them; the first read that needs the file (a search, a namespace
listing, a TTL sweep), a chain past :data:`MAX_COMMITS` commits or :data:`MAX_ROWS` rows,
another writer's move of the ref, or ``close`` writes them all in one transaction. A killed
process loses only derived data: the next read catches the index up from the tree diff, as
it does after any other process's write (ARCHITECTURE §5, invariant 2).
"""

from __future__ import annotations

from collections.abc import Sequence

from got_integrations.langgraph._store_query import Row

__all__ = ["DEFER_ROWS", "MAX_COMMITS", "MAX_ROWS", "PendingRows"]

#: A commit changing fewer item files than this is held (a bigger one is written at once).
DEFER_ROWS = 64
#: Held commits written out once the chain is this long ...
MAX_COMMITS = 64
#: ... or holds this many changed item files.
MAX_ROWS = 512


class PendingRows:
    """The rows of a chain of this process's commits that the index file does not hold yet."""

    def __init__(self) -> None:
        self.base: str | None = None  # the parent of the chain's first commit
        self.commits: list[str] = []  # the chain, oldest first
        self.by_path: dict[str, Row | None] = {}  # item path -> its row, None when deleted
        self.by_key: dict[tuple[bytes, bytes], Row | None] = {}  # (ns, key) -> the same

    def __bool__(self) -> bool:
        return bool(self.commits)

    @property
    def tip(self) -> str | None:
        """The chain's last commit (None when nothing is held)."""
        return self.commits[-1] if self.commits else None

    def extends(self, parent: str | None) -> bool:
        """Whether a commit on ``parent`` continues the chain (always, when nothing is held)."""
        return not self.commits or parent == self.commits[-1]

    def add(self, parent: str | None, commit: str, upserts: Sequence[Row], deleted: Sequence[Row]) -> None:
        """Hold ``commit`` (on ``parent``, see :meth:`extends`): its new rows and the rows it deleted."""
        if not self.commits:
            self.base = parent
        self.commits.append(commit)
        for row in deleted:
            self.by_path[row.path] = None
            self.by_key[(row.ns, row.key)] = None
        for row in upserts:
            self.by_path[row.path] = row
            self.by_key[(row.ns, row.key)] = row

    def full(self) -> bool:
        """Whether the chain should be written out now."""
        return len(self.commits) >= MAX_COMMITS or len(self.by_path) >= MAX_ROWS

    def covers(self, held: str | None) -> bool:
        """Whether an index file at ``held`` plus these rows is the store at :attr:`tip`."""
        return bool(self.commits) and (held == self.base or held in self.commits)

    def take(self) -> tuple[str | None, str, list[Row], list[str]]:
        """``(base, tip, upserts, deleted paths)`` of the whole chain; nothing is held afterwards."""
        base, tip = self.base, self.commits[-1]
        upserts = [row for row in self.by_path.values() if row is not None]
        deletes = [path for path, row in self.by_path.items() if row is None]
        self.clear()
        return base, tip, upserts, deletes

    def clear(self) -> None:
        """Forget the chain (the index catches up from git instead)."""
        self.base = None
        self.commits = []
        self.by_path = {}
        self.by_key = {}
