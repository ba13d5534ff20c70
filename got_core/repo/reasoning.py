"""``ReasoningRepo``: an agent's reasoning as a git repository (DESIGN §1–§3).

A scored reasoning node is one commit of four files; its combined score is a git
note on our own notes ref (fan-out layout, so writes stay O(1) at 10k+ notes);
validation outcomes are tags; sessions and the long-lived ``memory`` branch are
branches. Everything is written straight into the object database and published
with a compare-and-swap on one ref, so threads and processes writing different
refs never block each other, and a process killed mid-write leaves only
unreferenced objects behind (``git fsck`` clean; every acknowledged write is
reachable).

Example::

    repo = ReasoningRepo.open("agent.git")
    node = repo.commit_node(Node("Try x = 2", scores={"s_comb": 0.8}, problem_id="p1"))
    repo.tag_outcome(node.oid, "success", node.node_id)
    repo.grep("x = 2")
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from got_core.repo import nodes as _nodes
from got_core.repo import notes as _notes
from got_core.repo import retrieval
from got_core.repo import sharing
from got_core.storage.git import BlobId, CommitData, GitRepo, RefRace
from got_core.storage.index import DerivedIndex
from got_core.storage.inbound import InboundLimits
from got_core.errors import (
    ConcurrentUpdateError,
    InvalidInputError,
    InvalidNameError,
    PayloadTooLargeError,
    RemoteError,
    StorageError,
    UnknownRefError,
)
from got_core.names import branch_ref, check_path, check_ref_name, encode_component, short_ref, tag_ref
from got_core.repo.replay import MAX_REPLAY_BYTES, MAX_REPLAY_FILES, ReplayPlan, plan_replay, write_replay
from got_core.validate import clean_count, clean_fs_path, clean_name, clean_revs, clean_text, to_bytes
from got_core.signing import Signer, TrustStore, verify_history
from got_core.types import (
    Clock,
    CommitInfo,
    Hit,
    Identity,
    MergeResult,
    Node,
    VerifyResult,
    WallClock,
)

__all__ = ["ReasoningRepo", "DEFAULT_NOTES_REF", "MAX_FILE_BYTES"]

DEFAULT_NOTES_REF = "refs/notes/got"
#: Largest single file accepted by :meth:`ReasoningRepo.commit_files` (override per repo).
MAX_FILE_BYTES = 32 * 1024 * 1024
_MISSING: Any = object()


class ReasoningRepo:
    """Open or create a reasoning repository.

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

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 identity: Identity | None = None, signer: Signer | None = None,
                 notes_ref: str = DEFAULT_NOTES_REF, clock: Clock | None = None,
                 session_branch: str = "master", max_file_bytes: int = MAX_FILE_BYTES,
                 lock_timeout: float = 15.0, stale_lock_seconds: float = 5.0, fsync: bool = False) -> None:
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
        self.lock_timeout = lock_timeout
        self.stale_lock_seconds = stale_lock_seconds
        self._index: DerivedIndex | None = None
        self._index_lock = threading.Lock()
        if fsync:
            import pygit2  # the one setting libgit2 keeps per process

            pygit2.settings.enable_fsync_gitdir(True)

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Any) -> "ReasoningRepo":
        """Open ``path``, creating a bare repository there if needed (see the class args)."""
        return cls(path, **options)

    @classmethod
    def init(cls, path: str | os.PathLike[str], **options: Any) -> "ReasoningRepo":
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

    def __enter__(self) -> "ReasoningRepo":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ReasoningRepo({str(self.gitdir)!r})"

    # ------------------------------------------------------------------ refs
    def ref(self, name: str) -> str:
        """Full ref for a branch name or ``refs/...`` (validated)."""
        return branch_ref(name)

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
                index = self._idx() if wanted else None
                for node_id in dict.fromkeys(wanted):
                    rows = index.by_node_id(node_id)
                    if rows:
                        return rows[0][1]
            raise

    def branches(self) -> dict[str, str]:
        """Branch name -> tip SHA."""
        return {short_ref(n): o for n, o in self.git.list_refs("refs/heads/").items()}

    def refs(self, prefix: str = "refs/") -> dict[str, str]:
        """Every ref under ``prefix`` -> target SHA."""
        return self.git.list_refs(clean_name(prefix, "ref prefix"))

    def set_ref(self, ref: str, target: str, *, expected: str | None | Any = _MISSING) -> None:
        """Point ``ref`` at ``target`` (compare-and-swap against ``expected`` when given).

        Raises:
            ConcurrentUpdateError: the ref did not hold ``expected``.
        """
        name = self.ref(ref)
        oid = self.resolve(target)
        for _ in self.attempts(name):
            current = self.git.ref_target(name) if expected is _MISSING else expected
            try:
                self.git.cas_ref(name, oid, current)
                return
            except RefRace:
                if expected is not _MISSING:
                    raise ConcurrentUpdateError(f"{name} moved; it no longer points at {expected}") from None

    def create_branch(self, name: str, target: str, *, force: bool = False) -> str:
        """Create branch ``name`` at ``target`` (a rev); returns its full ref.

        Raises:
            InvalidInputError: the branch exists and ``force`` is false.
        """
        ref = self.ref(name)
        oid = self.resolve(target)
        current = self.git.ref_target(ref)
        if current is not None and not force:
            raise InvalidInputError(f"branch {name!r} already exists at {current[:12]}; pass force=True to move it")
        self.set_ref(ref, oid, expected=current)
        return ref

    def delete_ref(self, ref: str, *, expected: str | None = None) -> bool:
        """Delete a branch or ref; False when it did not exist.

        Args:
            expected: only delete while the ref still points here (compare-and-swap).

        Raises:
            ConcurrentUpdateError: the ref moved away from ``expected``.
        """
        try:
            return self.git.delete_ref(self.ref(ref), expected)
        except RefRace:
            raise ConcurrentUpdateError(f"{ref} no longer points at {expected}; not deleted") from None

    def _backoff(self, name: str) -> None:
        # A lock left by a killed writer would block this ref forever; break it once stale.
        if self.git.break_stale_lock(name, self.stale_lock_seconds):
            return
        time.sleep(random.uniform(0.0002, 0.003))

    def attempts(self, name: str) -> Iterator[int]:
        """Retry loop for compare-and-swap writers: yields attempt numbers, backing off
        between them, and raises :class:`ConcurrentUpdateError` after ``lock_timeout``."""
        deadline = time.monotonic() + self.lock_timeout
        attempt = 0
        while True:
            yield attempt
            attempt += 1
            if time.monotonic() > deadline:
                raise ConcurrentUpdateError(
                    f"{name} kept moving (or stayed locked) for {self.lock_timeout:.0f} s; "
                    "another writer is busy on it, or a lock file was left behind")
            self._backoff(name)

    # ------------------------------------------------------------------ generic primitive
    def commit_files(self, ref: str, changes: Mapping[str, bytes | str | None], message: str, *,
                     parents: Sequence[str] | None = None, expected: str | None | Any = _MISSING,
                     fresh_tree: bool = False, force: bool = False) -> str:
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
        payload: dict[str, bytes | BlobId | None] = {}
        for path, value in changes.items():
            if value is None:
                payload[path] = None
                continue
            if isinstance(value, BlobId):
                payload[path] = value
                continue
            data = to_bytes(value, path)
            if len(data) > self.max_file_bytes:
                raise PayloadTooLargeError(f"file {path}", len(data), self.max_file_bytes)
            payload[path] = data
        git = self.git
        for _ in self.attempts(name):
            tip = git.ref_target(name)
            if expected is not _MISSING and tip != expected:
                raise ConcurrentUpdateError(
                    f"{name} is at {tip or 'nothing'}, not {expected or 'nothing'}; re-read and retry")
            if parents is None:
                these = [tip] if tip else []
            else:
                these = [self.resolve(p) for p in parents]
                if tip is not None and tip not in these and not force:
                    raise InvalidInputError(
                        f"{name} is at {tip[:12]}, which is not a parent of this commit; "
                        "commit on a new branch to fork, or pass force=True")
            base = None
            if not fresh_tree and these:
                base = git.read_commit(these[0]).tree
            tree = git.build_tree(base, payload)
            oid = git.write_commit(tree, these, message, self.identity, self.identity,
                                   self.clock.now(), self.signer.sign if self.signer else None)
            try:
                git.cas_ref(name, oid, tip)
                return oid
            except RefRace:
                if parents is not None or expected is not _MISSING:
                    raise ConcurrentUpdateError(
                        f"{name} moved while committing; re-read its tip and retry") from None
        raise AssertionError("unreachable")

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

    def read_blob(self, oid: str) -> bytes:
        """Bytes of a blob by SHA.

        Raises:
            CorruptRepositoryError: no such blob (or not a blob).
        """
        if not isinstance(oid, str):
            raise InvalidInputError(f"a blob SHA must be text, not {type(oid).__name__}")
        return self.git.read_blob(oid)

    def replay_plan(self, rev: str, *, links: str = "refuse", max_files: int = MAX_REPLAY_FILES,
                    max_bytes: int = MAX_REPLAY_BYTES) -> ReplayPlan:
        """Judge the tree of ``rev`` for replay without writing anything (see :mod:`got_core.repo.replay`).

        Args:
            rev: the commit.
            links: ``"refuse"`` (default) symbolic-link and gitlink entries, or ``"skip"`` them.
            max_files: most files the replay may write.
            max_bytes: most bytes in all; each file is also limited to ``max_file_bytes``.

        Returns:
            The files that would be written, and the links skipped.

        Raises:
            UnsafePathError: an entry replay refuses (reserved or escaping name, not UTF-8, a link).
            PayloadTooLargeError: over ``max_file_bytes`` or ``max_bytes``.
            InvalidInputError: over ``max_files``.
        """
        commit = self.git.read_commit(self.resolve(rev))
        return plan_replay(self.git, commit.tree, links=links, max_file_bytes=self.max_file_bytes,
                           max_files=clean_count(max_files, "max_files"),
                           max_bytes=clean_count(max_bytes, "max_bytes"))

    def materialize(self, rev: str, directory: str | os.PathLike[str], *, links: str = "refuse",
                    max_files: int = MAX_REPLAY_FILES, max_bytes: int = MAX_REPLAY_BYTES) -> Path:
        """Write the files of ``rev`` into ``directory`` (replay onto disk); returns it.

        The whole tree is judged first (:meth:`replay_plan`), so a tree with one bad
        entry writes nothing. Nothing is ever written outside ``directory``: no
        ``.git`` in any spelling, no ``..``, no links created or followed (an existing
        symbolic link inside ``directory`` on the way is refused). Files are written as
        plain, non-executable files.

        Raises:
            UnsafePathError: an entry replay refuses, or a symbolic link in ``directory``
                where a write would go; nothing was written.
            PayloadTooLargeError: over ``max_file_bytes`` or ``max_bytes``.
            StorageError: the filesystem refused a write.
        """
        directory = clean_fs_path(directory, "replay directory")
        plan = self.replay_plan(rev, links=links, max_files=max_files, max_bytes=max_bytes)
        return write_replay(self.git, plan, directory)

    # ------------------------------------------------------------------ nodes
    def commit_node(self, node: Node, *, ref: str | None = None, parents: Sequence[str] | None = None,
                    note: bool = True, tag: bool = True) -> Node:
        """Record one scored reasoning node (DESIGN §2's commit-on-score path).

        One commit of ``thought.md``, ``scores.json``, ``trace.jsonl``, ``metadata.json``
        with a structured message; then the score as a note and, for a ``success`` /
        ``failed`` outcome, the outcome tag (see :mod:`got_core.repo.nodes`).

        Args:
            node: the node; its ``node_id`` is derived from content when empty.
            ref: the branch to move (default: the session branch).
            parents: parent node SHAs (default: the branch tip).
            note: write ``scores`` as a note too.
            tag: tag ``success_<id>`` / ``failed_<id>`` when the outcome says so.

        Returns:
            The node as stored (``oid``, ``parents``, ``node_id`` filled in).
        """
        return _nodes.commit_node(self, node, ref=ref, parents=parents, note=note, tag=tag)

    def read_node(self, rev: str) -> Node:
        """Replay: the whole node at a SHA, tag, branch or node id.

        Raises:
            UnknownRefError: no such revision.
            CorruptRepositoryError: the commit is not a node or its files do not parse.
        """
        return _nodes.read_node(self, rev)

    # ------------------------------------------------------------------ notes (see got_core.repo.notes)
    def _notes_ref(self, ref: str | None) -> str:
        return _notes.notes_ref_name(self, ref)

    def set_note(self, target: str, content: Mapping[str, Any] | str | bytes, *, ref: str | None = None) -> str:
        """Attach (or replace) the note on ``target`` (fan-out layout); returns the notes commit."""
        target = clean_name(target, "note target")
        return _notes.set_notes(self, {target: content}, ref=clean_name(ref, "notes ref", True))

    def set_notes(self, notes: Mapping[str, Mapping[str, Any] | str | bytes], *, ref: str | None = None) -> str:
        """Attach (or replace) several notes in ONE notes commit; returns it."""
        if not isinstance(notes, Mapping):
            raise InvalidInputError(f"notes must be a mapping of commit -> note, not {type(notes).__name__}")
        notes = {clean_name(t, "note target"): c for t, c in notes.items()}
        return _notes.set_notes(self, notes, ref=clean_name(ref, "notes ref", True))

    def get_note(self, target: str, *, ref: str | None = None) -> bytes | None:
        """The note bytes on ``target``, or None."""
        return _notes.get_note(self, clean_name(target, "note target"), ref=clean_name(ref, "notes ref", True))

    def note_json(self, target: str, *, ref: str | None = None) -> dict[str, Any] | None:
        """The note on ``target`` parsed as a JSON object, or None."""
        return _notes.note_json(self, clean_name(target, "note target"), ref=clean_name(ref, "notes ref", True))

    def notes(self, *, ref: str | None = None) -> dict[str, bytes]:
        """Every note on the notes ref: annotated commit SHA -> note bytes."""
        return _notes.all_notes(self, ref=clean_name(ref, "notes ref", True))

    # ------------------------------------------------------------------ tags
    def tag(self, name: str, target: str, *, force: bool = False) -> str:
        """Create a (lightweight) tag; returns its name.

        Raises:
            InvalidInputError: the tag exists at another commit and ``force`` is false.
        """
        ref = tag_ref(name)
        oid = self.resolve(target)
        for _ in self.attempts(ref):
            current = self.git.ref_target(ref)
            if current is not None:
                if self.git.peel_to_commit(current) == oid:
                    return name
                if not force:
                    raise InvalidInputError(f"tag {name!r} already points at {current[:12]}; tags do not move")
            try:
                self.git.cas_ref(ref, oid, current)
                return name
            except RefRace:
                continue
        raise AssertionError("unreachable")

    def tag_outcome(self, target: str, outcome: str, node_id: str | None = None) -> str:
        """Tag a validated node ``success_<id>`` or ``failed_<id>``; returns the tag name."""
        if not isinstance(outcome, str) or outcome not in _nodes.OUTCOME_TAGS:
            raise InvalidInputError(f"outcome must be one of {sorted(_nodes.OUTCOME_TAGS)}, not {outcome!r}")
        oid = self.resolve(target)
        ident = encode_component(node_id, "node id") if node_id else oid[:16]
        return self.tag(_nodes.OUTCOME_TAGS[outcome] + ident, oid)

    def mark_best(self, target: str, name: str = "best") -> str:
        """Point the (movable) ``best`` tag at ``target``."""
        return self.tag(name, target, force=True)

    def tags(self, prefix: str = "") -> dict[str, str]:
        """Tag name -> tagged commit SHA, for tags starting with ``prefix``."""
        prefix = clean_text(prefix, "tag prefix")
        out = {}
        for name, oid in self.git.list_refs("refs/tags/").items():
            short = name[len("refs/tags/"):]
            if short.startswith(prefix):
                out[short] = self.git.peel_to_commit(oid) or oid
        return out

    def tags_at(self, target: str) -> list[str]:
        """Tags pointing at the commit ``target``."""
        oid = self.resolve(target)
        return self._idx().tags_for([oid]).get(oid, [])

    def delete_tag(self, name: str) -> bool:
        """Delete a tag; False when absent."""
        return self.git.delete_ref(tag_ref(name))

    # ------------------------------------------------------------------ history
    def commit_info(self, rev: str) -> CommitInfo:
        """One commit with its tags and score."""
        oid = self.resolve(rev)
        c = self.git.read_commit(oid)
        note = self.note_json(oid)
        return self._info(c, self.tags_at(oid), note)

    @staticmethod
    def _info(c: CommitData, tags: Iterable[str] = (), note: dict | None = None) -> CommitInfo:
        score = None
        if note and isinstance(note.get("s_comb"), (int, float)):
            score = float(note["s_comb"])
        else:
            for line in c.message.splitlines():
                if line.startswith("Got-Score: "):
                    try:
                        score = float(line[len("Got-Score: "):])
                    except ValueError:
                        pass
        return CommitInfo(c.oid, c.message, c.parents, c.time, c.author_name, (), tuple(tags), score)

    def log(self, rev: str | None = None, *, limit: int | None = None, all_refs: bool = False,
            decorate: bool = True) -> list[CommitInfo]:
        """Commits reachable from ``rev`` (default: the session branch), newest first.

        Args:
            rev: where to start.
            limit: at most this many commits.
            all_refs: start from every branch and tag instead.
            decorate: add tags and note scores (this syncs the search index; pass False
                for a plain walk of messages and parents).
        """
        limit = clean_count(limit, "limit", optional=True)
        if all_refs:
            tips = [t for n, o in self.git.list_refs().items()
                    if not n.startswith("refs/notes/") and (t := self.git.peel_to_commit(o))]
        else:
            if rev is None:
                tip = self.git.ref_target(self.session_ref)
                tips = [tip] if tip else []
            else:
                tips = [self.resolve(rev)]
        out: list[CommitData] = []
        for c in self.git.walk(tips, topo=True):
            out.append(c)
            if limit is not None and len(out) >= limit:
                break
        if not decorate:
            return [self._info(c) for c in out]
        idx = self._idx()
        tags = idx.tags_for(c.oid for c in out)
        notes = {r[1]: r[5] for r in idx.rows("c.oid IN (%s)" % ",".join("?" * len(out)), [c.oid for c in out])} if out else {}
        infos = []
        for c in out:
            info = self._info(c, tags.get(c.oid, ()))
            if notes.get(c.oid) is not None:
                info = CommitInfo(info.oid, info.message, info.parents, info.time, info.author,
                                  info.refs, info.tags, notes[c.oid])
            infos.append(info)
        return infos

    def diff(self, a: str, b: str, path: str | None = None, *, context: int = 3) -> str:
        """Line-level unified diff (git's patch format) between two nodes/commits.

        Args:
            a, b: revisions (``success_X``, ``failed_Y``, SHAs, branches).
            path: only this file (e.g. ``thought.md``); default every changed file.
        """
        context = clean_count(context, "context")
        if path is not None:
            check_path(path)
        ta = self.git.read_commit(self.resolve(a)).tree
        tb = self.git.read_commit(self.resolve(b)).tree
        return self.git.diff_trees(ta, tb, [path] if path else None, context=min(context, 1 << 20))

    # ------------------------------------------------------------------ retrieval
    def _idx(self) -> DerivedIndex:
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

    def grep(self, pattern: str, *, refs: Sequence[str] | None = None, fixed: bool = False,
             ignore_case: bool = False) -> list[CommitInfo]:
        """Commits whose message matches ``pattern`` (``git log -P --grep``; ``fixed`` = ``-F``).

        Raises:
            InvalidInputError: ``pattern`` is not text, or not a valid regular expression.
        """
        pattern = clean_text(pattern, "pattern")
        rows = self._idx().grep(pattern, fixed=fixed, ignore_case=ignore_case, refs=self._scope(refs))
        return retrieval.rows_to_infos(self._idx(), rows)

    def pickaxe(self, needle: str, *, refs: Sequence[str] | None = None) -> list[CommitInfo]:
        """Commits that add or remove occurrences of ``needle`` in any file (``git log -S``)."""
        needle = clean_text(needle, "search string")
        if not needle:
            raise InvalidInputError("pickaxe needs a non-empty string")
        return retrieval.rows_to_infos(self._idx(), self._idx().pickaxe(needle, self._scope(refs)))

    def tagged(self, prefix: str = "success_") -> list[CommitInfo]:
        """Commits carrying a tag that starts with ``prefix``."""
        prefix = clean_text(prefix, "tag prefix")
        return retrieval.rows_to_infos(self._idx(), self._idx().tagged(prefix))

    def frontier(self, base: str = "master", tip: str = "memory") -> list[CommitInfo]:
        """Commits on ``tip`` not on ``base`` (``git log master..memory``)."""
        return retrieval.rows_to_infos(self._idx(), self._idx().frontier(self.ref(base), self.ref(tip)))

    def search(self, query: str, k: int = 5, *, refs: Sequence[str] | None = None,
               weights: Mapping[str, float] | None = None) -> list[Hit]:
        """Ranked retrieval: keyword and pickaxe hits ranked by ρ (see :mod:`got_core.repo.retrieval`)."""
        return retrieval.search(self._idx(), query, k, refs=self._scope(refs), weights=weights)

    # ------------------------------------------------------------------ sharing, signing
    def fetch(self, source: str | os.PathLike[str], **options: Any) -> dict[str, str]:
        """Fetch a peer's branches (and tags/notes) under ``refs/remotes/<name>/``; see :mod:`got_core.repo.sharing`."""
        source = clean_fs_path(source, "fetch source", text=True)
        try:
            return sharing.fetch(self, source, **options)
        except OSError as exc:  # a source path the filesystem cannot even look at
            raise RemoteError(f"cannot fetch from {source[:200]!r}: {exc.strerror or exc}") from None

    def push(self, dest: str | os.PathLike[str], **options: Any) -> list[str]:
        """Push branches/tags/notes to another repository; see :mod:`got_core.repo.sharing`."""
        dest = clean_fs_path(dest, "push destination", text=True)
        try:
            return sharing.push(self, dest, **options)
        except OSError as exc:
            raise RemoteError(f"cannot push to {dest[:200]!r}: {exc.strerror or exc}") from None

    def merge(self, theirs: str, *, into: str = "memory", message: str | None = None,
              strategy: str | Callable[..., bytes | None] = "review",
              limits: InboundLimits | None = None) -> MergeResult:
        """Three-way merge ``theirs`` into branch ``into``; conflicts come back as data.

        ``limits`` bounds what the merged trees may hold (see :class:`got_core.inbound.InboundLimits`).
        """
        return sharing.merge(self, theirs, into=into, message=message, strategy=strategy, limits=limits)

    def bundle(self, path: str | os.PathLike[str], refs: Sequence[str] | None = None) -> Path:
        """Export branches, tags and notes as one ``git bundle`` file."""
        if refs is not None:
            if isinstance(refs, (str, bytes)):
                refs = [refs]
            if not isinstance(refs, Iterable):
                raise InvalidInputError(f"refs must be a list of ref names, not {type(refs).__name__}")
            refs = [clean_name(r, "ref name") for r in refs]
        path = clean_fs_path(path, "bundle path")
        try:
            return sharing.bundle(self, Path(path), refs)
        except OSError as exc:
            raise StorageError(f"cannot write the bundle {path[:200]!r}: {exc.strerror or exc}") from None

    def unbundle(self, path: str | os.PathLike[str], *, limits: InboundLimits | None = None) -> dict[str, str]:
        """Import every ref of a bundle (verified and quarantined first), bit-identically.

        ``limits`` bounds what it may bring in (see :class:`got_core.inbound.InboundLimits`).
        """
        path = clean_fs_path(path, "bundle path")
        try:
            return sharing.unbundle(self, Path(path), limits=limits)
        except OSError as exc:
            raise StorageError(f"cannot read the bundle {path[:200]!r}: {exc.strerror or exc}") from None

    def verify(self, rev: str | None = None, *, trust: TrustStore | None = None,
               limit: int | None = None) -> list[VerifyResult]:
        """Signature verdict for every commit reachable from ``rev`` (default: all refs).

        Args:
            rev: where to start; None walks every branch, tag and notes ref.
            trust: which keys are trusted (SSH allowed-signers file / GnuPG home).
            limit: stop after this many commits.
        """
        return verify_history(self, rev, trust=trust or TrustStore(), limit=clean_count(limit, "limit", optional=True))

    # ------------------------------------------------------------------ maintenance
    def maintenance(self) -> dict[str, int]:
        """Pack loose objects and refs (libgit2 never runs gc; loose storage is ~12× packed)."""
        return sharing.repack(self)

    def fsck(self) -> tuple[bool, str]:
        """Run ``git fsck --strict``; returns (clean, output)."""
        return sharing.fsck(self)
