"""``ReasoningRepo``: an agent's reasoning as a git repository (ARCHITECTURE §1, §3).

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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from got_core.errors import InvalidInputError, RemoteError, StorageError
from got_core.names import check_path
from got_core.repo import nodes as _nodes
from got_core.repo import notes as _notes
from got_core.repo import retrieval, sharing
from got_core.repo.base import DEFAULT_NOTES_REF, MAX_FILE_BYTES, RepoBase
from got_core.repo.replay import MAX_REPLAY_BYTES, MAX_REPLAY_FILES, ReplayPlan, plan_replay, write_replay
from got_core.repo.verify import verify_history
from got_core.signing import TrustStore
from got_core.storage.git import CommitData
from got_core.storage.inbound import InboundLimits
from got_core.types import CommitInfo, Hit, MergeResult, Node, VerifyResult, parse_trailers, trailer_score
from got_core.validate import clean_count, clean_fs_path, clean_name, clean_text

__all__ = ["DEFAULT_NOTES_REF", "MAX_FILE_BYTES", "ReasoningRepo"]


class ReasoningRepo(RepoBase):
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

    def replay_plan(
        self, rev: str, *, links: str = "refuse", max_files: int = MAX_REPLAY_FILES, max_bytes: int = MAX_REPLAY_BYTES
    ) -> ReplayPlan:
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
        return plan_replay(
            self.git,
            commit.tree,
            links=links,
            max_file_bytes=self.max_file_bytes,
            max_files=clean_count(max_files, "max_files"),
            max_bytes=clean_count(max_bytes, "max_bytes"),
        )

    def materialize(
        self,
        rev: str,
        directory: str | os.PathLike[str],
        *,
        links: str = "refuse",
        max_files: int = MAX_REPLAY_FILES,
        max_bytes: int = MAX_REPLAY_BYTES,
    ) -> Path:
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
    def commit_node(
        self,
        node: Node,
        *,
        ref: str | None = None,
        parents: Sequence[str] | None = None,
        note: bool = True,
        tag: bool = True,
    ) -> Node:
        """Record one scored reasoning node (ARCHITECTURE §3's commit-on-score path).

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

    # ------------------------------------------------------------------ outcomes
    def tag_outcome(self, target: str, outcome: str, node_id: str | None = None) -> str:
        """Tag a validated node ``success_<id>`` or ``failed_<id>``; returns the tag name."""
        return _nodes.tag_outcome(self, target, outcome, node_id)

    def mark_best(self, target: str, name: str = "best") -> str:
        """Point the (movable) ``best`` tag at ``target``."""
        return self.tag(name, target, force=True)

    # ------------------------------------------------------------------ history
    def commit_info(self, rev: str) -> CommitInfo:
        """One commit with its tags and score."""
        oid = self.resolve(rev)
        c = self.git.read_commit(oid)
        note = self.note_json(oid)
        return self._info(c, self.tags_at(oid), note)

    @staticmethod
    def _info(c: CommitData, tags: Iterable[str] = (), note: dict | None = None) -> CommitInfo:
        if note and isinstance(note.get("s_comb"), (int, float)):
            score: float | None = float(note["s_comb"])
        else:
            score = trailer_score(parse_trailers(c.message))
        return CommitInfo(c.oid, c.message, c.parents, c.time, c.author_name, (), tuple(tags), score)

    def log(
        self, rev: str | None = None, *, limit: int | None = None, all_refs: bool = False, decorate: bool = True
    ) -> list[CommitInfo]:
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
            tips = [
                t
                for n, o in self.git.list_refs().items()
                if not n.startswith("refs/notes/") and (t := self.git.peel_to_commit(o))
            ]
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
        notes = {r.oid: r.score for r in idx.by_oids([c.oid for c in out])}
        infos = []
        for c in out:
            info = self._info(c, tags.get(c.oid, ()))
            if notes.get(c.oid) is not None:
                info = CommitInfo(
                    info.oid, info.message, info.parents, info.time, info.author, info.refs, info.tags, notes[c.oid]
                )
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
    def grep(
        self, pattern: str, *, refs: Sequence[str] | None = None, fixed: bool = False, ignore_case: bool = False
    ) -> list[CommitInfo]:
        """Commits whose message matches ``pattern`` (``git log -P --grep``; ``fixed`` = ``-F``).

        Raises:
            InvalidInputError: ``pattern`` is not text, or not a valid regular expression.
        """
        pattern = clean_text(pattern, "pattern")
        scope = self._scope(refs)
        idx = self._idx()  # one sync per query
        return idx.grep_infos(pattern, fixed=fixed, ignore_case=ignore_case, refs=scope)

    def pickaxe(self, needle: str, *, refs: Sequence[str] | None = None) -> list[CommitInfo]:
        """Commits that add or remove occurrences of ``needle`` in any file (``git log -S``)."""
        needle = clean_text(needle, "search string")
        if not needle:
            raise InvalidInputError("pickaxe needs a non-empty string")
        idx = self._idx()
        return retrieval.rows_to_infos(idx, idx.pickaxe(needle, self._scope(refs)))

    def tagged(self, prefix: str = "success_") -> list[CommitInfo]:
        """Commits carrying a tag that starts with ``prefix``."""
        prefix = clean_text(prefix, "tag prefix")
        idx = self._idx()
        return retrieval.rows_to_infos(idx, idx.tagged(prefix))

    def frontier(self, base: str = "master", tip: str = "memory") -> list[CommitInfo]:
        """Commits on ``tip`` not on ``base`` (``git log master..memory``)."""
        idx = self._idx()
        return retrieval.rows_to_infos(idx, idx.frontier(self.ref(base), self.ref(tip)))

    def search(
        self, query: str, k: int = 5, *, refs: Sequence[str] | None = None, weights: Mapping[str, float] | None = None
    ) -> list[Hit]:
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

    def merge(
        self,
        theirs: str,
        *,
        into: str = "memory",
        message: str | None = None,
        strategy: str | sharing.Resolver = "review",
        limits: InboundLimits | None = None,
    ) -> MergeResult:
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

    def verify(
        self, rev: str | None = None, *, trust: TrustStore | None = None, limit: int | None = None
    ) -> list[VerifyResult]:
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
