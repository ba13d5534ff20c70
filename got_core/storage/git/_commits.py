"""Commits and history: writing and reading commits, revisions, walks, tree diffs (a mixin of ``GitRepo``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import cast

import pygit2
from pygit2 import GitError
from pygit2.enums import SortMode

from got_core.errors import CorruptRepositoryError, StorageError, UnknownRefError
from got_core.storage.git._handle import _TYPE_NAMES, CommitData
from got_core.storage.git._settings import _trusted_writes
from got_core.storage.git._staging import _Staging
from got_core.storage.objects import check_object, damaged_under
from got_core.storage.packs import commit_object, signed_commit
from got_core.types import Identity

_FULL_SHA = re.compile(r"[0-9a-f]{40}")
# One entry of a raw (SHA-1) tree object: "<octal mode> <name>\0<20-byte id>".
_RAW_ENTRY = re.compile(rb"[0-7]{1,7} [^\x00]+\x00.{20}", re.DOTALL)
_RAW_TREE = 0o040000
_RAW_BLOBS = frozenset((0o100000, 0o120000))  # regular files (any permission bits) and symbolic links


def _parse_entry(entry: bytes) -> tuple[bytes, tuple[int, str]]:
    """A raw tree entry -> (name, (file-mode class, hex SHA))."""
    head, _nul, oid = entry[:-20], b"", entry[-20:]
    mode, _sp, name = head[:-1].partition(b" ")
    return name, (int(mode, 8) & 0o170000, oid.hex())


#: (name, email) -> (raw name, raw email) as ``git_signature_new`` checked and trimmed them:
#: an identity is checked once per process, not at every commit. Only exact ``str`` pairs that
#: passed are kept (bounded); one libgit2 refuses is asked again, and refused again, each time.
_PEOPLE: dict[tuple[str, str], tuple[bytes, bytes]] = {}
_PEOPLE_MAX = 256


def _raw_person(who: Identity, gitdir: object) -> tuple[bytes, bytes]:
    """(raw name, raw email) of ``who``, as libgit2 writes them into a commit.

    Raises:
        StorageError: libgit2 refuses the name or email (angle brackets, empty).
    """
    name, email = who.name, who.email
    exact = type(name) is str and type(email) is str
    if exact:
        known = _PEOPLE.get((name, email))
        if known is not None:
            return known
    try:
        sig = pygit2.Signature(name, email, 0, 0)  # the time plays no part in the check
    except (GitError, ValueError) as exc:
        raise StorageError(f"cannot write a commit in {gitdir}: {exc}") from None
    raw = (sig.raw_name, sig.raw_email)
    if exact:
        if len(_PEOPLE) >= _PEOPLE_MAX:
            _PEOPLE.clear()
        _PEOPLE[name, email] = raw
    return raw


def _plain_when(when: tuple[int, int]) -> bool:
    """Whether a commit time is one ``pygit2.Signature`` takes as it is (a 32-bit time, an int offset)."""
    return type(when[0]) is int and type(when[1]) is int and 0 <= when[0] < 1 << 32 and -(1 << 31) <= when[1] < 1 << 31


def _commit_data(c: pygit2.Commit) -> CommitData:
    return CommitData(
        str(c.id),
        str(c.tree_id),
        tuple(str(p) for p in c.parent_ids),
        c.message,
        c.author.name,
        c.author.email,
        c.commit_time,
    )


class _Commits(_Staging):
    """Commits, revisions, walks and tree diffs."""

    def write_commit(
        self,
        tree: str,
        parents: Iterable[str],
        message: str,
        author: Identity,
        committer: Identity,
        when: tuple[int, int],
        sign: Callable[[str], str] | None = None,
    ) -> str:
        """Create a commit object (no ref moves); ``sign(payload) -> armored signature``.

        Inside a ref move the commit is staged (``_staging``): the bytes libgit2 would write,
        formatted here, since libgit2 formats a commit only over a tree it can read; the
        identities' raw names are libgit2's, checked once per identity (``_raw_person``).
        """
        parent_ids: list[str | pygit2.Oid] = list(parents)
        if (
            self._staging
            and len(when) == 2
            and _plain_when(when)
            and all(_FULL_SHA.fullmatch(str(p)) for p in parent_ids)
        ):
            a_name, a_email = _raw_person(author, self.gitdir)
            c_name, c_email = _raw_person(committer, self.gitdir)
            raw = commit_object(
                tree,
                [str(p) for p in parent_ids],
                (a_name, a_email, when[0], when[1]),
                (c_name, c_email, when[0], when[1]),
                message.encode("utf-8"),
            )
            if sign is not None:
                raw = signed_commit(raw, sign(raw.decode("utf-8")).encode("utf-8"))
            oid = self._stage("commit", raw)
            if oid is not None:
                self._remember_tree(oid, tree)
                return oid
        try:
            # libgit2 checks and trims the name and email (no angle brackets, not empty)
            a = pygit2.Signature(author.name, author.email, when[0], when[1])
            c = pygit2.Signature(committer.name, committer.email, when[0], when[1])
        except (GitError, ValueError) as exc:
            raise StorageError(f"cannot write a commit in {self.gitdir}: {exc}") from None
        try:
            if sign is None:
                with _trusted_writes():
                    oid = str(self._r.create_commit(None, a, c, message, tree, parent_ids))
            else:
                # pygit2's stubs say Oid; create_commit_string returns the commit's text (a str)
                payload = cast(str, self._r.create_commit_string(a, c, message, tree, parent_ids))
                oid = str(self._r.create_commit_with_signature(payload, sign(payload)))
        except (GitError, OSError) as exc:
            raise StorageError(f"cannot write a commit in {self.gitdir}: {exc}") from None
        self._remember_tree(oid, tree)
        return oid

    def _remember_tree(self, oid: str, tree: str) -> None:
        if len(self._trees) >= 64:
            self._trees.clear()
        self._trees[oid] = tree

    def commit_tree(self, oid: str) -> str:
        """The tree SHA of a commit (remembered for commits this handle wrote).

        Raises:
            CorruptRepositoryError: missing or not a commit.
        """
        tree = self._trees.get(oid)
        return tree if tree is not None else str(self._commit(oid).tree_id)

    def commit_and_tree(self, oid: str) -> tuple[str, str] | None:
        """(commit SHA, its tree SHA) of the commit an object (a commit or an annotated tag) points to,
        or None: ``peel_to_commit`` and :meth:`commit_tree` from one lookup of the object.
        """
        tree = self._trees.get(oid)
        if tree is not None:
            return oid, tree
        found = self._in_memory(oid) if isinstance(oid, str) else None
        if found is not None and found[0] == "commit":
            return oid, self.commit_tree(oid)
        self._flush_for_libgit2()
        try:
            obj = self._lookup(oid)
            if obj is None:
                return None
            commit = obj if isinstance(obj, pygit2.Commit) else obj.peel(pygit2.Commit)
            return str(commit.id), str(commit.tree_id)
        except (GitError, ValueError, AttributeError, pygit2.InvalidSpecError):
            return None

    def read_commit(self, oid: str) -> CommitData:
        """A commit as :class:`CommitData`.

        Raises:
            CorruptRepositoryError: missing or not a commit.
        """
        return _commit_data(self._commit(oid))

    def commit_signature(self, oid: str) -> tuple[bytes | None, bytes | None]:
        """(armored signature, signed payload) of a commit; (None, None) when unsigned."""
        sig, payload = self._commit(oid).gpg_signature  # (None, None) when unsigned (the stubs say bytes)
        return sig, payload

    def object_problem(self, oid: str, expected: str | None = None) -> tuple[str | None, bytes | None]:
        """Check one stored object byte for byte: ``(problem or None, raw content)``.

        The object is read raw from the object database and hashed here (``"<type>
        <size>\\0" + content``), so a flipped byte is caught even when libgit2's own
        hash check is switched off. ``expected`` is the type the referrer says it has
        (``commit``, ``tree``, ``blob``). Open a fresh :class:`GitRepo` to check what is
        on disk now: libgit2 caches objects it has read.
        """
        found = self._staged.get(oid)  # staged only: what is on disk is the question, never a copy
        if found is not None:
            return check_object(oid, found[0], found[1], expected)
        try:
            kind, data = self._odb_read(oid)
        except KeyError:
            return "is missing", None
        except (GitError, ValueError, OSError) as exc:
            text = str(exc)
            if "hash mismatch" in text:
                return "does not hash to its id (its content was altered)", None
            return f"cannot be read ({text[:120]})", None
        return check_object(oid, _TYPE_NAMES.get(int(kind), str(kind)), data, expected)

    def damaged_under(
        self, tree: str, seen: dict[str, str | None] | None = None, prefix: str = ""
    ) -> list[tuple[str, str, str]]:
        """Every tree and blob reachable from ``tree`` that is missing or does not hash to its id
        (see :func:`got_core.storage.objects.damaged_under`)."""
        return damaged_under(self.object_problem, tree, seen, prefix)

    def resolve(self, rev: str) -> str:
        """A commit SHA for any revision (SHA or prefix, branch, tag, ``refs/...``, ``x~1``).

        Raises:
            UnknownRefError: nothing by that name.
        """
        if not isinstance(rev, str) or not rev or "\x00" in rev or len(rev) > 1024:
            raise UnknownRefError(f"{str(rev)[:80]!r} is not a revision; give a SHA, branch or tag")
        if len(rev) == 40 and _FULL_SHA.fullmatch(rev):  # the hot path: a full SHA we wrote
            found = self._in_memory(rev)
            if found is not None and found[0] == "commit":
                return rev
            try:
                obj = self._lookup(rev)
            except (GitError, ValueError):
                obj = None
            if obj is not None and obj.type == pygit2.GIT_OBJECT_COMMIT:
                return rev
        self._flush_for_libgit2()
        try:
            obj = self._r.revparse_single(rev)
            return str(obj.peel(pygit2.Commit).id)
        except (KeyError, GitError, ValueError, pygit2.InvalidSpecError):
            raise UnknownRefError(
                f"no commit, branch or tag named {rev[:80]!r}; `got log` and `got tags` list them"
            ) from None

    def walk(self, tips: Iterable[str], hide: Iterable[str] = (), topo: bool = False) -> Iterator[CommitData]:
        """Commits reachable from ``tips`` but not from ``hide``, newest first."""
        tips = list(tips)
        if not tips:
            return
        mode = SortMode.TOPOLOGICAL | SortMode.TIME if topo else SortMode.TIME
        self._flush_for_libgit2()
        try:
            walker = self._r.walk(tips[0], mode)
            for t in tips[1:]:
                walker.push(t)
            for h in hide:
                walker.hide(h)
            for c in walker:
                yield _commit_data(c)
        except GitError as exc:
            raise CorruptRepositoryError(f"history walk failed in {self.gitdir}: {exc}; run `got fsck`") from None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """True when ``ancestor`` is reachable from ``descendant`` (or equal).

        Raises:
            CorruptRepositoryError: the history between them cannot be read.
        """
        self._flush_for_libgit2()
        try:
            return ancestor == descendant or self._r.descendant_of(descendant, ancestor)
        except (GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(
                f"cannot walk the history between {ancestor} and {descendant}: {exc}; run `got fsck`"
            ) from None

    def merge_base(self, a: str, b: str) -> str | None:
        """Best common ancestor of two commits, or None for unrelated histories.

        Raises:
            CorruptRepositoryError: the history of either cannot be read.
        """
        self._flush_for_libgit2()
        try:
            base = self._r.merge_base(a, b)
        except (GitError, ValueError, KeyError) as exc:
            raise CorruptRepositoryError(f"cannot find where {a} and {b} meet: {exc}; run `got fsck`") from None
        return str(base) if base else None

    def changed_paths(self, commit: CommitData) -> list[tuple[str, str | None, str | None]]:
        """(path, old blob, new blob) for every file the commit changed vs its first parent."""
        old_tree = self.read_commit(commit.parents[0]).tree if commit.parents else None
        return self.changed_tree_paths(old_tree, commit.tree)

    def changed_tree_paths(self, old_tree: str | None, new_tree: str) -> list[tuple[str, str | None, str | None]]:
        """(path, old blob, new blob) for every blob that differs between two trees (None: empty).

        Blobs are regular files and symbolic links (whose content is the link target);
        gitlinks name commits of another repository and are left out. Paths are the
        tree's names as text, bytes that are not UTF-8 shown as ``\\xNN``. Subtrees with
        the same id on both sides are not read, so a change costs the trees on its path
        (a note in a fan-out notes tree: two small trees), not a walk of everything.

        Raises:
            CorruptRepositoryError: a tree is missing, or is not a well-formed tree.
        """
        out: list[tuple[str, str | None, str | None]] = []
        stack: list[tuple[bytes, str | None, str | None]] = [(b"", old_tree, new_tree)]
        while stack:
            base, a, b = stack.pop()
            before = self._raw_entries(a) if a else frozenset()
            after = self._raw_entries(b) if b else frozenset()
            # entries are compared as raw bytes: only the ones that differ are parsed
            old = dict(_parse_entry(e) for e in before - after)
            new = dict(_parse_entry(e) for e in after - before)
            for name in old.keys() | new.keys():
                was, now = old.get(name), new.get(name)
                path = base + name
                was_tree = was is not None and was[0] == _RAW_TREE
                now_tree = now is not None and now[0] == _RAW_TREE
                if was_tree or now_tree:  # a tree on either side: compare what is under it
                    stack.append(
                        (path + b"/", was[1] if was and was_tree else None, now[1] if now and now_tree else None)
                    )
                old_blob = was[1] if was is not None and was[0] in _RAW_BLOBS else None
                new_blob = now[1] if now is not None and now[0] in _RAW_BLOBS else None
                if old_blob != new_blob:
                    out.append((path.decode("utf-8", "backslashreplace"), old_blob, new_blob))
        return out

    def _raw_entries(self, tree: str) -> frozenset[bytes]:
        """A tree's entries as the raw bytes of each (``<mode> <name>\\0<id>``).

        The last few trees are remembered (a tree never changes): the index compares each
        new notes tree, and each new node's tree, with the one it compared last time.

        Raises:
            CorruptRepositoryError: missing, not a tree, or not well formed.
        """
        known = self._entries.get(tree)
        if known is not None:
            return known
        kind, data = self._raw_read(tree)
        if kind != "tree":
            raise CorruptRepositoryError(f"object {tree} is not a tree; run `got fsck`")
        entries = _RAW_ENTRY.findall(data) if len(tree) == 40 else []
        if sum(map(len, entries)) != len(data):  # matches cover the object exactly, or it is malformed
            raise CorruptRepositoryError(f"tree {tree} is not a well-formed tree; run `got fsck`")
        found = frozenset(entries)
        if len(self._entries) >= 16:
            self._entries.pop(next(iter(self._entries)))
        self._entries[tree] = found
        return found

    def diff_trees(self, a_tree: str, b_tree: str, paths: Iterable[str] | None = None, context: int = 3) -> str:
        """Unified, git-style patch text between two trees (optionally only some paths).

        Text that is not UTF-8 (in names or content) is shown with U+FFFD replacements,
        so the result always prints.
        """
        ta, tb = self._tree(a_tree), self._tree(b_tree)
        wanted = set(paths) if paths is not None else None
        try:
            diff = ta.diff_to_tree(tb, context_lines=context)
            parts = []
            for patch in diff:
                if patch is None:  # libgit2 gives no patch for an unchanged delta
                    continue
                delta = patch.delta
                path = (delta.new_file.raw_path or delta.old_file.raw_path).decode("utf-8", "surrogateescape")
                if wanted is None or path in wanted:
                    parts.append(patch.data.decode("utf-8", "replace"))
        except GitError as exc:
            raise CorruptRepositoryError(f"cannot diff trees {a_tree} and {b_tree}: {exc}; run `got fsck`") from None
        return "".join(parts)
