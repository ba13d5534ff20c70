"""The repository's foundation: handles, refs, the ref-transaction primitive, files and tags.

:class:`RepoBase` is what every verb of the repository layer stands on
(docs/ARCHITECTURE.md, layer 2): nodes, notes, retrieval, sharing, replay and
verification are modules of functions taking a ``RepoBase``;
:class:`~got_core.repo.reasoning.ReasoningRepo` composes them into one object. Nothing
here imports those verbs, so no arrow runs back up.

Every ref move goes through :meth:`RepoBase.update_ref` (the primitive of
:mod:`got_core.storage.refs`): a builder gets the current tip and answers what to publish.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

from got_core.errors import (
    ConcurrentUpdateError,
    InvalidInputError,
    InvalidNameError,
    PayloadTooLargeError,
    UnknownRefError,
)
from got_core.names import CheckedFiles, check_path, encode_component, short_ref
from got_core.signing import Signer
from got_core.storage.git import BlobId, CommitData, GitRepo, enable_fsync
from got_core.storage.index import DerivedIndex
from got_core.storage.refnames import branch_ref, check_ref_name, tag_ref
from got_core.storage.refs import Keep, Publish, RetryPolicy, update_ref, update_refs
from got_core.types import Clock, Identity, WallClock
from got_core.validate import clean_name, clean_revs, clean_text, to_bytes

__all__ = ["DEFAULT_NOTES_REF", "MAX_FILE_BYTES", "Keep", "Publish", "RepoBase"]

DEFAULT_NOTES_REF = "refs/notes/got"
#: Largest single file accepted by :meth:`RepoBase.commit_files` (override per repo).
MAX_FILE_BYTES = 32 * 1024 * 1024
_FULL_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: Ref names :meth:`RepoBase.ref` judged valid, kept (the rule is a pure function of the name)
_REF_NAMES_MAX = 1024
_MISSING: Any = object()


class RepoBase:
    """Open or create a repository: the handles and primitives the verbs share.

    Args:
        path: repository directory (bare by default; an existing work tree's repo works too).
        create: create a bare repository when none exists (else
            :class:`~got_core.errors.RepositoryNotFoundError`).
        identity: author and committer of every commit (never read from git config).
        signer: sign every commit with this key (:class:`~got_core.signing.SSHSigner` /
            :class:`~got_core.signing.GPGSigner`).
        notes_ref: where score notes live; give each agent its own to avoid contention.
        clock: timestamps (use :class:`~got_core.types.DeterministicClock` for bit-identical re-runs).
        session_branch: the default branch nodes are appended to.
        max_file_bytes: largest single file accepted.
        lock_timeout: seconds to keep retrying a lost compare-and-swap (or a held ref lock)
            before :class:`ConcurrentUpdateError`.
        stale_lock_seconds: a ref ``*.lock`` older than this is taken as left by a killed
            writer and removed (a live writer holds one for well under a millisecond).
        fsync: fsync objects and refs (durability against power loss; 5–8 ms per write
            here, and process-wide in libgit2).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        identity: Identity | None = None,
        signer: Signer | None = None,
        notes_ref: str = DEFAULT_NOTES_REF,
        clock: Clock | None = None,
        session_branch: str = "master",
        max_file_bytes: int = MAX_FILE_BYTES,
        lock_timeout: float = 15.0,
        stale_lock_seconds: float = 5.0,
        fsync: bool = False,
    ) -> None:
        self._local = threading.local()
        self._path = Path(path)
        self._git0 = GitRepo(self._path, create=create, initial_branch=short_ref(branch_ref(session_branch)))
        self._local.git = self._git0
        self.gitdir = self._git0.gitdir
        self.identity = identity or Identity()
        self.signer = signer
        self.notes_ref = check_ref_name(notes_ref if notes_ref.startswith("refs/") else "refs/notes/" + notes_ref)
        self.clock = clock or WallClock()
        self.session_ref = branch_ref(session_branch)
        self.max_file_bytes = max_file_bytes
        self.retry = RetryPolicy(timeout=lock_timeout, stale_lock_seconds=stale_lock_seconds)
        self._index: DerivedIndex | None = None
        # name as given -> full ref, for names already judged valid (every write names its refs again)
        self._ref_names: dict[str, str] = {}
        self._index_lock = threading.Lock()
        if fsync:
            enable_fsync()

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Any) -> Self:
        """Open ``path``, creating a bare repository there if needed (see the class args)."""
        return cls(path, **options)

    @classmethod
    def init(cls, path: str | os.PathLike[str], **options: Any) -> Self:
        """Create (or reopen) a bare repository at ``path``."""
        options["create"] = True
        return cls(path, **options)

    @property
    def path(self) -> Path:
        """The git directory."""
        return self.gitdir

    @property
    def git(self) -> GitRepo:
        """This thread's libgit2 handle (libgit2 repositories are not shared across threads)."""
        git = getattr(self._local, "git", None)
        if git is None:
            git = GitRepo(self.gitdir, create=False)
            self._local.git = git
        return git

    def close(self) -> None:
        """Release the derived index handle."""
        if self._index is not None:
            self._index.close()
            self._index = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.gitdir)!r})"

    # ------------------------------------------------------------------ refs
    @property
    def lock_timeout(self) -> float:
        """Seconds a writer keeps retrying a lost compare-and-swap."""
        return self.retry.timeout

    @lock_timeout.setter
    def lock_timeout(self, value: float) -> None:
        self.retry = replace(self.retry, timeout=float(value))

    @property
    def stale_lock_seconds(self) -> float:
        """Age after which a ref lock is taken as left behind by a killed writer."""
        return self.retry.stale_lock_seconds

    @stale_lock_seconds.setter
    def stale_lock_seconds(self, value: float) -> None:
        self.retry = replace(self.retry, stale_lock_seconds=float(value))

    def ref(self, name: str) -> str:
        """Full ref for a branch name or ``refs/...`` (validated)."""
        known = self._ref_names.get(name) if type(name) is str else None
        if known is not None:
            return known
        full = branch_ref(name)
        if type(name) is str:
            self._remember_ref(name, full)
        return full

    def _remember_ref(self, name: str, full: str) -> None:
        names = self._ref_names
        if len(names) >= _REF_NAMES_MAX:
            names.clear()
        names[name] = full

    def _check_full_ref(self, name: str) -> None:
        """:func:`check_ref_name` for a full ref name, once per name (a valid name stays valid)."""
        if type(name) is str and self._ref_names.get(name) == name and name.startswith("refs/"):
            return
        check_ref_name(name)
        if type(name) is str:
            self._remember_ref(name, name)

    def tip(self, ref: str) -> str | None:
        """Commit SHA a branch/ref points to, or None when it does not exist."""
        target = self.git.ref_target(self.ref(ref))
        return self.git.peel_to_commit(target) if target else None

    def resolve(self, rev: str) -> str:
        """Commit SHA of a SHA (or prefix), branch, tag, ``refs/...`` or node id.

        Raises:
            UnknownRefError: nothing by that name.
        """
        try:
            return self.git.resolve(rev)
        except UnknownRefError:
            if isinstance(rev, str) and 0 < len(rev) <= 1024:
                # Node ids are stored encoded (Got-Node trailer): the id as given first, then
                # the encoded spelling itself ("a/b" is stored "a%2Fb"; "a%2Fb" as "a%252Fb").
                wanted = []
                for spell in (encode_component, clean_text):
                    try:
                        wanted.append(spell(rev, "node id"))
                    except (InvalidInputError, InvalidNameError):
                        continue
                if wanted:
                    index = self._idx()
                    for node_id in dict.fromkeys(wanted):
                        rows = index.by_node_id(node_id)
                        if rows:
                            return rows[0].oid
            raise

    def branches(self) -> dict[str, str]:
        """Branch name -> tip SHA."""
        return {short_ref(n): o for n, o in self.git.list_refs("refs/heads/").items()}

    def refs(self, prefix: str = "refs/") -> dict[str, str]:
        """Every ref under ``prefix`` -> target SHA."""
        return self.git.list_refs(clean_name(prefix, "ref prefix"))

    def update_ref(
        self,
        ref: str,
        build: Callable[[str | None], Publish | Keep],
        *,
        retry: bool = True,
        tip_hint: str | Any | None = _MISSING,
    ) -> Any:
        """Move ``ref`` through the one ref-transaction primitive (:mod:`got_core.storage.refs`).

        ``build(tip)`` gets the current tip (None: no such ref) and returns
        :class:`Publish` (``target``, or None to delete, and the value to return) or
        :class:`Keep`; a lost compare-and-swap calls it again on the new tip, until
        ``lock_timeout``. With ``retry=False`` a lost race raises at once. ``tip_hint``
        (the tip of this process's own last write) spares the first attempt a ref read;
        the compare-and-swap still checks it.

        Raises:
            ConcurrentUpdateError: past the deadline (or raised by the builder).
        """
        if not callable(build):
            raise InvalidInputError(f"build must be a callable taking the tip, not {type(build).__name__}")
        if tip_hint is not _MISSING and tip_hint is not None and not isinstance(tip_hint, str):
            raise InvalidInputError(f"tip_hint must be a commit SHA or None, not {type(tip_hint).__name__}")
        extra = {} if tip_hint is _MISSING else {"tip_hint": tip_hint}
        return update_ref(self.git, self.ref(ref), build, self.retry, retry=bool(retry), moved=self._moved, **extra)

    def update_refs(
        self,
        refs: Sequence[str],
        build: Callable[[dict[str, str | None]], Any],
        value: Callable[[], Any] | None = None,
        *,
        expected: Mapping[str, str | None] | None = None,
    ) -> Any:
        """Move several refs in one ref transaction: ``build({ref: tip}) -> {ref: new target}``.

        The builder may read another full ref's tip (``tips["refs/..."]``) and answer for
        it too (a ref whose name depends on the others' tips).

        ``expected`` (``{ref: tip}``, None for an absent ref) are hints, e.g. where this
        thread's last write left the refs (``repo.git.moved_tips(refs)``): the first attempt
        builds on them without reading those refs. The transaction still compares each ref
        under its lock with the tip the builder saw, so a wrong hint only costs one more
        attempt (which reads every ref); no ref moves from a value that was not checked. A
        builder that refuses an unexpected tip (explicit parents) must not get hints.

        Raises:
            ConcurrentUpdateError: past the deadline (or raised by the builder).
            InvalidInputError: a hint that is not a ref name and a SHA (or None).
        """
        if isinstance(refs, (str, bytes)) or not isinstance(refs, Iterable):
            raise InvalidInputError(f"refs must be a list of ref names, not {type(refs).__name__}")
        if not callable(build) or (value is not None and not callable(value)):
            raise InvalidInputError("build (and value, when given) must be callables")
        names = tuple(dict.fromkeys(self.ref(r) for r in refs))
        if not names:
            raise InvalidInputError("update_refs needs at least one ref")

        def checked(tips: dict[str, str | None]) -> Any:
            answer = build(tips)
            if isinstance(answer, Keep):
                return answer
            if not isinstance(answer, Mapping) or not all(n in tips for n in answer):
                raise InvalidInputError("the builder must return Keep or a mapping of the refs it read to targets")
            for name in answer:
                if name not in names:
                    self._check_full_ref(name)
            return answer

        hints: dict[str, str | None] = {}
        if expected is not None:
            if not isinstance(expected, Mapping):
                raise InvalidInputError(f"expected must be a mapping of refs to tips, not {type(expected).__name__}")
            for name, tip in expected.items():
                if tip is not None and not (isinstance(tip, str) and _FULL_OID.fullmatch(tip)):
                    raise InvalidInputError(f"the expected tip of {name!r} must be a full SHA or None, not {tip!r}")
                hints[self.ref(name)] = tip
        return update_refs(self.git, names, checked, value, self.retry, moved=self._moved, expected=hints)

    def set_ref(self, ref: str, target: str, *, expected: str | Any | None = _MISSING) -> None:
        """Point ``ref`` at ``target`` (compare-and-swap against ``expected`` when given).

        Raises:
            ConcurrentUpdateError: the ref did not hold ``expected``.
        """
        name = self.ref(ref)
        oid = self.resolve(target)

        def build(tip: str | None) -> Publish:
            if expected is not _MISSING and tip != expected:
                raise ConcurrentUpdateError(f"{name} moved; it no longer points at {expected}")
            return Publish(oid)

        self.update_ref(name, build)

    def create_branch(self, name: str, target: str, *, force: bool = False) -> str:
        """Create branch ``name`` at ``target`` (a rev); returns its full ref.

        Raises:
            InvalidInputError: the branch exists and ``force`` is false.
        """
        ref = self.ref(name)
        oid = self.resolve(target)

        def build(tip: str | None) -> Publish:
            if tip is not None and not force:
                raise InvalidInputError(f"branch {name!r} already exists at {tip[:12]}; pass force=True to move it")
            return Publish(oid)

        self.update_ref(ref, build)
        return ref

    def delete_ref(self, ref: str, *, expected: str | None = None) -> bool:
        """Delete a branch or ref; False when it did not exist.

        Args:
            expected: only delete while the ref still points here (compare-and-swap).

        Raises:
            ConcurrentUpdateError: the ref moved away from ``expected``.
        """

        def build(tip: str | None) -> Publish | Keep:
            if tip is None:
                return Keep(False)
            if expected is not None and tip != expected:
                raise ConcurrentUpdateError(f"{ref} no longer points at {expected}; not deleted")
            return Publish(None, True)

        return self.update_ref(ref, build)

    # ------------------------------------------------------------------ the generic write
    def commit_files(
        self,
        ref: str,
        changes: Mapping[str, bytes | str | None],
        message: str,
        *,
        parents: Sequence[str] | None = None,
        expected: str | Any | None = _MISSING,
        fresh_tree: bool = False,
        force: bool = False,
    ) -> str:
        """Commit ``changes`` on ``ref`` and move the ref, atomically (compare-and-swap).

        The new tree is the parent's tree with ``changes`` applied (path -> bytes/str,
        ``None`` deletes), or only ``changes`` when ``fresh_tree``. Paths use ``/``;
        encode ids in them with :func:`got_core.names.encode_component`.

        Args:
            ref: branch name or full ref.
            changes: the files to write or delete.
            message: the commit message.
            parents: explicit parents (default: the ref's tip). With explicit parents the
                ref must be absent or at one of them (or ``force``), and a lost race raises.
            expected: strict compare-and-swap: the tip the ref must still hold (None: absent).
            fresh_tree: start from an empty tree instead of the first parent's.
            force: allow moving the ref to a commit that does not descend from its tip.

        Returns:
            The new commit SHA.

        Raises:
            InvalidNameError: an unsafe path.
            PayloadTooLargeError: a file over ``max_file_bytes``.
            ConcurrentUpdateError: the compare-and-swap lost (explicit parents/expected), or
                kept losing beyond the retry budget.
        """
        name = self.ref(ref)
        message = clean_text(message, "commit message")
        if not isinstance(changes, Mapping):
            raise InvalidInputError(f"changes must be a mapping of path -> content, not {type(changes).__name__}")
        parents = clean_revs(parents)
        payload = self.file_payload(changes)
        explicit = [self.resolve(p) for p in parents] if parents is not None else None

        def build(tip: str | None) -> Publish:
            if expected is not _MISSING and tip != expected:
                raise ConcurrentUpdateError(
                    f"{name} is at {tip or 'nothing'}, not {expected or 'nothing'}; re-read and retry"
                )
            these = explicit if explicit is not None else ([tip] if tip else [])
            if explicit is not None and tip is not None and tip not in these and not force:
                raise InvalidInputError(
                    f"{name} is at {tip[:12]}, which is not a parent of this commit; "
                    "commit on a new branch to fork, or pass force=True"
                )
            oid = self.prepare_commit(these, payload, message, fresh_tree=fresh_tree)
            return Publish(oid, oid)

        strict = explicit is not None or expected is not _MISSING
        return self.update_ref(name, build, retry=not strict)

    def file_payload(self, changes: Mapping[str, bytes | str | None]) -> CheckedFiles[bytes | BlobId | None]:
        """Validated file contents for a tree (bytes, an existing blob, or None to delete), as
        :class:`~got_core.names.CheckedFiles`: every path checked once, here; ``build_tree``
        takes the components it split them into. Answers ``changes`` itself when it is such a
        payload already and every content is as this would make it (a builder's retry).

        Raises:
            InvalidNameError: an unsafe path.
            InvalidInputError: content that is not bytes or valid text.
            PayloadTooLargeError: a file over ``max_file_bytes``.
        """
        if not isinstance(changes, Mapping):
            raise InvalidInputError(f"changes must be a mapping of path -> content, not {type(changes).__name__}")
        limit = self.max_file_bytes
        if type(changes) is CheckedFiles and all(
            value is None or (type(value) is bytes and len(value) <= limit) or isinstance(value, BlobId)
            for value in changes.values()
        ):
            return changes
        payload: dict[str, bytes | BlobId | None] = {}
        for path, value in changes.items():
            check_path(path)
            if value is None or isinstance(value, BlobId):
                payload[path] = value
                continue
            data = to_bytes(value, path)
            if len(data) > limit:
                raise PayloadTooLargeError(f"file {path}", len(data), limit)
            payload[path] = data
        return CheckedFiles(payload)  # its own check of each path is a lookup of the one above

    def prepare_commit(
        self,
        parents: Sequence[str],
        changes: Mapping[str, bytes | str | None],
        message: str,
        *,
        fresh_tree: bool = False,
    ) -> str:
        """Write a commit of ``changes`` on ``parents`` (the first parent's tree, or an empty
        one with ``fresh_tree``) without moving any ref; returns its SHA. A builder handed to
        :meth:`update_ref` calls this, then publishes the commit.

        Raises:
            InvalidNameError: an unsafe path.
            PayloadTooLargeError: a file over ``max_file_bytes``.
        """
        payload = self.file_payload(changes)
        message = clean_text(message, "commit message")
        parents = [self.resolve(p) for p in (clean_revs(parents) or [])]
        base = self.git.commit_tree(parents[0]) if parents and not fresh_tree else None
        # the tree was just built and the parents resolved: write_commit's checks of them would
        # read them again
        return self._new_commit(self.git.build_tree(base, payload), parents, message)

    def write_commit(self, tree: str, parents: Sequence[str], message: str) -> str:
        """A commit object by this repository's identity, clock and signer (no ref moves).

        Raises:
            InvalidInputError: ``tree`` is not a tree of this repository, or a bad message.
            UnknownRefError: a parent that is not a commit here.
        """
        message = clean_text(message, "commit message")
        if not isinstance(tree, str) or not self.git.is_tree(tree):
            raise InvalidInputError(f"{str(tree)[:80]!r} is not a tree of {self.gitdir}")
        parents = [self.resolve(p) for p in (clean_revs(parents) or [])]
        return self._new_commit(tree, parents, message)

    def _new_commit(self, tree: str, parents: Sequence[str], message: str) -> str:
        """:meth:`write_commit` for a tree and parents the caller has just written or
        resolved itself, and a cleaned message (the write path's builders): no re-reads."""
        when = self.clock.now()
        oid = self.git.write_commit(
            tree, parents, message, self.identity, self.identity, when, self.signer.sign if self.signer else None
        )
        index = self._index
        if index is not None and all(_FULL_OID.fullmatch(p) for p in parents):
            # the sync after a ref moves here indexes the commit from this, not from git
            name, email = self.identity.name, self.identity.email
            index.note_objects([CommitData(oid, tree, tuple(parents), message, name, email, int(when[0]))])
        return oid

    # ------------------------------------------------------------------ reading files
    def read_file(self, rev: str, path: str) -> bytes:
        """Bytes of ``path`` in the commit ``rev``.

        Raises:
            UnknownRefError: no such revision, or no such file in it.
        """
        commit = self.git.read_commit(self.resolve(rev))
        blob = self.git.tree_entry(commit.tree, path)
        if blob is None:
            raise UnknownRefError(f"{rev} has no file {path!r}")
        return self.git.read_blob(blob)

    def files(self, rev: str, prefix: str = "") -> dict[str, bytes]:
        """Every file (path -> bytes) in ``rev``, optionally under a directory ``prefix``."""
        commit = self.git.read_commit(self.resolve(rev))
        return {p: self.git.read_blob(b) for p, b in self.git.tree_files(commit.tree, prefix).items()}

    def list_files(self, rev: str, prefix: str = "") -> dict[str, str]:
        """Paths under ``prefix`` in ``rev`` -> blob SHA (no content read)."""
        commit = self.git.read_commit(self.resolve(rev))
        return self.git.tree_files(commit.tree, prefix)

    def list_dir(self, rev: str, path: str = "") -> list[tuple[str, bool]]:
        """Entries directly under ``path``: (name, is_directory)."""
        commit = self.git.read_commit(self.resolve(rev))
        return self.git.tree_names(commit.tree, path)

    def changed_files(self, old: str | None, new: str) -> list[tuple[str, str | None, str | None]]:
        """(path, old blob, new blob) for every file that differs between the trees of two
        commits (``old`` None: every file of ``new``); only changed subtrees are read.

        Raises:
            InvalidInputError: a commit id that is not text.
            CorruptRepositoryError: a commit or tree is missing or damaged.
        """
        for what, oid in (("old", old), ("new", new)):
            if oid is not None and not isinstance(oid, str):
                raise InvalidInputError(f"changed_files: {what} must be a commit SHA as text, not {type(oid).__name__}")
        git = self.git
        old_tree = git.read_commit(old).tree if old is not None else None
        return git.changed_tree_paths(old_tree, git.read_commit(new).tree)

    def read_blob(self, oid: str) -> bytes:
        """Bytes of a blob by SHA.

        Raises:
            CorruptRepositoryError: no such blob (or not a blob).
        """
        if not isinstance(oid, str):
            raise InvalidInputError(f"a blob SHA must be text, not {type(oid).__name__}")
        return self.git.read_blob(oid)

    # ------------------------------------------------------------------ tags
    def tag(self, name: str, target: str, *, force: bool = False) -> str:
        """Create a (lightweight) tag; returns its name.

        Raises:
            InvalidInputError: the tag exists at another commit and ``force`` is false.
        """
        return self._tag_commit(name, self.resolve(target), force=force)

    def _tag_commit(self, name: str, oid: str, *, force: bool = False) -> str:
        """:meth:`tag` for a commit SHA the caller has just written or resolved (no re-read)."""

        def build(current: str | None) -> Publish | Keep:
            if current is not None:
                if self.git.peel_to_commit(current) == oid:
                    return Keep(name)
                if not force:
                    raise InvalidInputError(f"tag {name!r} already points at {current[:12]}; tags do not move")
            return Publish(oid, name)

        return self.update_ref(tag_ref(name), build)

    def tags(self, prefix: str = "") -> dict[str, str]:
        """Tag name -> tagged commit SHA, for tags starting with ``prefix``."""
        prefix = clean_text(prefix, "tag prefix")
        out = {}
        for name, oid in self.git.list_refs("refs/tags/").items():
            short = name[len("refs/tags/") :]
            if short.startswith(prefix):
                out[short] = self.git.peel_to_commit(oid) or oid
        return out

    def tags_at(self, target: str) -> list[str]:
        """Tags pointing at the commit ``target``."""
        oid = self.resolve(target)
        return self._idx().tags_for([oid]).get(oid, [])

    def delete_tag(self, name: str) -> bool:
        """Delete a tag; False when absent."""
        return self.delete_ref(tag_ref(name))

    # ------------------------------------------------------------------ the derived index
    def _moved(self, moves: Sequence[tuple[str, str | None, str | None]]) -> None:
        """The ref-transaction primitive's report of our own moves: the index reads those refs next."""
        index = self._index
        if index is not None:  # not opened yet: its first sync looks at every directory anyway
            index.note_moves(moves)
            # applied now, so the query that follows a write has nothing to sync (ARCHITECTURE §3)
            index.sync_after_write()

    def _notes_written(self, ref: str, commit: str, parent: str | None, changes: Mapping[str, str | None]) -> None:
        """A notes commit this repository published: its tree is ``parent``'s with ``changes``
        (path -> blob, None removed). The index applies that instead of diffing the trees."""
        index = self._index
        if index is not None and ref == index.notes_ref:
            index.note_notes_commit(commit, parent, changes)

    def _blobs_written(self, bodies: Mapping[str, bytes]) -> None:
        """Blobs this repository wrote (id -> content), e.g. notes: the index reads a note it
        applies from here rather than from git."""
        index = self._index
        if index is not None:
            index.note_objects(blobs=bodies)

    def _idx(self) -> DerivedIndex:
        """The derived index, synced with git (call it once per query, and query the result)."""
        with self._index_lock:
            if self._index is None:
                self._index = DerivedIndex(GitRepo(self.gitdir, create=False), self.notes_ref)
            index = self._index
        index.sync()
        return index

    def reindex(self) -> None:
        """Rebuild the derived search index from the repository."""
        self._idx().rebuild()

    def _scope(self, refs: Sequence[str] | None) -> list[str] | None:
        if isinstance(refs, (str, bytes)):
            refs = [refs]  # one branch given on its own
        if refs is not None and not isinstance(refs, Iterable):
            raise InvalidInputError(f"refs must be a list of branch names, not {type(refs).__name__}")
        return None if refs is None else [self.ref(r) for r in refs]
