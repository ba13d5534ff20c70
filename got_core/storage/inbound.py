"""Objects from elsewhere (a peer, a bundle) are untrusted: they come in through a quarantine.

A fetch or an unbundle never writes into the repository directly. The objects land in a
scratch bare repository (a *quarantine*) inside the repository's git directory, whose
``objects/info/alternates`` borrows the repository's own object store, so only new
objects travel. There they are checked, and only when every check passes are the packs
moved in and the refs updated; on refusal the quarantine is deleted and the repository
is exactly as it was (the same refs, no new object).

The checks, in order:

1. while the pack streams in: the number of objects and bytes (:class:`InboundLimits`);
2. only the objects the refs being taken in reach (and the repository lacks) are kept,
   repacked by ``git pack-objects --revs --local``; the rest of what was sent is dropped;
3. every kept object's size (``max_blob_bytes``, from the pack index, without
   inflating anything);
4. a walk of every kept tree: each entry's mode (one of git's five), each name
   (:func:`got_core.names.path_component_problem`: no ``..``, no ``.git`` in any spelling,
   no ``/``, ``\\`` or NUL, at most 255 bytes; names that are not UTF-8 are allowed as git
   allows them), the depth of nesting (``max_tree_depth``) and the length of every path
   (``max_path_bytes``), without recursion and visiting each tree once;
5. ``git index-pack --strict`` on the kept pack: all of ``git fsck --strict``'s object
   checks (malformed trees, commits and tags, duplicate or unsorted entries, zero-padded
   modes, ``.gitmodules`` rules) and that every object they name exists.

Anything refused raises :class:`~got_core.errors.UntrustedContentError` naming the object,
the path and the limit (the knob to raise) when one applies.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from got_core.errors import ConfigError, CorruptRepositoryError, StorageError, UntrustedContentError
from got_core.names import MAX_PATH_BYTES, MAX_PATH_COMPONENT_BYTES, is_dotgit, path_component_problem
from got_core.storage.git import GitRepo, init_bare
from got_core.storage.gitcli import GitCommandError, run_git
from got_core.storage.objects import TreeFormatError, tree_entries

__all__ = [
    "DEFAULT_LIMITS",
    "QUARANTINE_PREFIX",
    "InboundLimits",
    "Quarantine",
    "check_merge",
    "entry_name_problem",
]

#: Name prefix of quarantine directories inside a git directory.
QUARANTINE_PREFIX = "got-incoming-"
_HAVE_PREFIX = "refs/got-have/"  # the repository's refs mirrored into the quarantine (negotiation only)
# The file modes git itself writes; git fsck --strict refuses the rest (100664, 100600, ...).
_MODES = {b"100644": "blob", b"100755": "blob", b"120000": "blob", b"40000": "tree", b"160000": "commit"}


@dataclass(frozen=True)
class InboundLimits:
    """Limits on what one fetch or one unbundle may bring in.

    Every field is a knob: pass ``limits=InboundLimits(max_blob_bytes=...)`` to
    :func:`got_core.sharing.fetch` / :func:`~got_core.sharing.unbundle` /
    :func:`~got_core.sharing.verify_bundle` (or ``--max-blob-bytes`` etc. on the command
    line). A value of 0 or less is refused; raise a limit rather than switching it off.

    Attributes:
        max_blob_bytes: largest single object, a file's blob or any tree, commit or tag
            (default 32 MiB, as :data:`got_core.repo.MAX_FILE_BYTES` for what we write).
        max_tree_depth: most path components of any file or directory (default 64).
        max_path_bytes: longest path, all components, in bytes (default 4096, PATH_MAX).
        max_objects: most objects received at once (default 1,000,000).
        max_total_bytes: most pack bytes received at once (default 1 GiB).
    """

    max_blob_bytes: int = 32 * 1024 * 1024
    max_tree_depth: int = 64
    max_path_bytes: int = MAX_PATH_BYTES
    max_objects: int = 1_000_000
    max_total_bytes: int = 1024**3

    def __post_init__(self) -> None:
        for name in ("max_blob_bytes", "max_tree_depth", "max_path_bytes", "max_objects", "max_total_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"InboundLimits.{name} must be a positive integer, not {value!r}")


DEFAULT_LIMITS = InboundLimits()

_FLAGS = {
    "max_blob_bytes": "--max-blob-bytes",
    "max_tree_depth": "--max-tree-depth",
    "max_path_bytes": "--max-path-bytes",
    "max_objects": "--max-objects",
    "max_total_bytes": "--max-total-bytes",
}


def _over(
    source: str,
    what: str,
    value: int,
    limit: str,
    limits: InboundLimits,
    *,
    oid: str | None = None,
    path: str | None = None,
) -> UntrustedContentError:
    return UntrustedContentError(
        f"refusing {source}: {what} is {value:,}, over {limit}={getattr(limits, limit):,}; nothing was "
        f"taken in (raise it with InboundLimits({limit}=...) or {_FLAGS[limit]} if you trust the source)",
        oid=oid,
        path=path,
        limit=limit,
    )


def _said(exc: GitCommandError) -> str:
    """What git said, on one line."""
    return "; ".join(line.strip() for line in exc.stderr.splitlines() if line.strip())[:600]


def entry_name_problem(raw: bytes) -> str | None:
    """Why a raw tree-entry name must not come in, or None when it may.

    UTF-8 names get every rule of :func:`got_core.names.path_component_problem` (git
    fsck's ``.``/``..``/``.git``/``/`` rules, backslash, NUL, 255 bytes). Names that are
    not UTF-8 are valid in git and are let in, under the same byte-level rules.
    """
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        if b"/" in raw or b"\\" in raw or b"\x00" in raw:
            return "a '/', '\\' or NUL inside a name"
        if len(raw) > MAX_PATH_COMPONENT_BYTES:
            return f"a name of {len(raw)} bytes (limit {MAX_PATH_COMPONENT_BYTES})"
        if is_dotgit(raw.decode("latin-1")):
            return "a spelling of '.git'"
        return None
    return path_component_problem(name)


def _show(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


def _clip(path: str) -> str:
    """A path short enough for one line of an error message."""
    return repr(path if len(path) <= 160 else path[:90] + "…" + path[-50:])


def _tree_entries(data: bytes, oid: str) -> Iterator[tuple[bytes, bytes, str]]:
    """(mode, name, child oid) of a raw tree object; refuses a malformed one."""
    try:
        yield from tree_entries(data)
    except TreeFormatError:
        raise UntrustedContentError(f"tree {oid} is malformed (an entry is cut short)", oid=oid) from None


def _sweep_stale(gitdir: Path, max_age: float = 24 * 3600) -> None:
    """Delete quarantines a killed process left behind (a day old: no transfer lasts that long)."""
    now = time.time()
    for stale in gitdir.glob(QUARANTINE_PREFIX + "*"):
        try:
            if now - stale.stat().st_mtime > max_age:
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            continue


class Quarantine:
    """A scratch bare repository that receives objects before the real one trusts them.

    Args:
        target: the repository that will adopt the objects (None: a standalone scratch
            repository in the system temp directory, e.g. to verify a bundle).
        source: how to name the source in error messages.
        limits: the :class:`InboundLimits` to enforce.

    Use as a context manager; :meth:`check` validates, :meth:`adopt` moves the packs in.
    The directory is deleted on exit either way.
    """

    def __init__(self, target: GitRepo | None, source: str, limits: InboundLimits = DEFAULT_LIMITS) -> None:
        self.target = target
        self.source = source
        self.limits = limits
        parent = target.gitdir if target is not None else None
        if parent is not None:
            _sweep_stale(parent)
        try:
            self.path = Path(tempfile.mkdtemp(prefix=QUARANTINE_PREFIX, dir=parent))
        except OSError as exc:
            raise StorageError(f"cannot receive objects into {parent or 'the temp directory'}: {exc}") from None
        try:
            init_bare(self.path)  # libgit2's own minimal layout: no hooks, a default config
            if target is not None:
                objects = (target.gitdir / "objects").resolve()
                (self.path / "objects" / "info" / "alternates").write_text(f"{objects}\n")
                # The target's refs, so a fetch negotiates only what is new (named by their
                # targets: sorted, as the "sorted" trait promises).
                lines = "".join(f"{oid} {_HAVE_PREFIX}{oid}\n" for oid in sorted(set(target.list_refs().values())))
                (self.path / "packed-refs").write_text("# pack-refs with: sorted \n" + lines)
            self._git: GitRepo | None = GitRepo(self.path, create=False)  # reopened: libgit2 reads alternates on open
        except BaseException as exc:
            shutil.rmtree(self.path, ignore_errors=True)
            if isinstance(exc, OSError):
                raise StorageError(f"cannot set up a quarantine in {self.path.parent}: {exc}") from None
            raise

    @property
    def git(self) -> GitRepo:
        """The quarantine's own repository.

        Raises:
            StorageError: the quarantine was closed.
        """
        if self._git is None:
            raise StorageError(f"the quarantine {self.path} is closed; receive into a new one")
        return self._git

    def __enter__(self) -> Quarantine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Delete the quarantine (whatever it still holds was refused or already moved)."""
        self._git = None
        shutil.rmtree(self.path, ignore_errors=True)

    # ------------------------------------------------------------------ transfer
    def progress(self, announced: int, received: int, nbytes: int) -> None:
        """Transfer-progress check for :meth:`got_core._git.GitRepo.fetch`: aborts a transfer over the limits."""
        if max(announced, received) > self.limits.max_objects:
            raise _over(self.source, "the number of objects sent", max(announced, received), "max_objects", self.limits)
        if nbytes > self.limits.max_total_bytes:
            raise _over(self.source, "the bytes sent", nbytes, "max_total_bytes", self.limits)

    def incoming_refs(self) -> dict[str, str]:
        """Refs the transfer created in the quarantine (the mirrored target refs left out)."""
        return {name: oid for name, oid in self.git.list_refs().items() if not name.startswith(_HAVE_PREFIX)}

    def _packs(self) -> list[Path]:
        return sorted((self.path / "objects" / "pack").glob("pack-*.pack"))

    def _keep_reachable(self, tips: Sequence[str]) -> None:
        """Replace what came in by one pack of exactly the objects ``tips`` reach that the
        target lacks: libgit2's local transport sends all of a peer's history, and objects
        no fetched ref needs should neither be judged nor kept."""
        pack_dir = self.path / "objects" / "pack"
        received = self._packs()
        if not received:
            return  # nothing new came in (loose objects never arrive: both transports write packs)
        haves = [oid for name, oid in self.git.list_refs().items() if name.startswith(_HAVE_PREFIX)]
        out = self.path / "reachable"
        out.mkdir()
        if tips:
            revs = "".join(f"{t}\n" for t in sorted(set(tips))) + "".join(f"^{h}\n" for h in haves)
            try:
                run_git(
                    ["pack-objects", "--revs", "--local", "-q", str(out / "pack")],
                    git_dir=self.path,
                    input=revs.encode(),
                )
            except GitCommandError as exc:
                raise UntrustedContentError(
                    f"refusing {self.source}: git cannot walk what it sent ({_said(exc)}); nothing was changed"
                ) from None
        for pack in received:
            for suffix in (".pack", ".idx", ".rev"):
                pack.with_suffix(suffix).unlink(missing_ok=True)
        for idx in out.glob("*.idx"):
            if not _idx_oids(idx):  # everything was known already
                continue
            for suffix in (".pack", ".rev", ".idx"):
                if idx.with_suffix(suffix).exists():
                    os.replace(idx.with_suffix(suffix), pack_dir / ("pack-" + idx.stem.rsplit("-", 1)[1] + suffix))

    # ------------------------------------------------------------------ checks
    def check(self, tips: Sequence[str]) -> int:
        """Keep only the objects ``tips`` (the refs that will be taken in) reach, and
        validate every one of them; returns how many there are.

        Raises:
            UntrustedContentError: a limit or rule was broken (see the module docstring).
        """
        self._keep_reachable(tips)
        received: dict[str, tuple[str, int]] = {}
        total = 0
        for pack in self._packs():
            total += pack.stat().st_size
            for oid in _idx_oids(pack.with_suffix(".idx")):
                header = self.git.object_header(oid)
                if header is None:
                    raise UntrustedContentError(
                        f"refusing {self.source}: object {oid} of the pack cannot be read", oid=oid
                    )
                received[oid] = header
        lim = self.limits
        if len(received) > lim.max_objects:
            raise _over(self.source, "the number of objects", len(received), "max_objects", lim)
        if total > lim.max_total_bytes:
            raise _over(self.source, "the pack size", total, "max_total_bytes", lim)
        for oid, (kind, size) in received.items():  # trees, commits, tags: before reading any
            if kind != "blob" and size > lim.max_blob_bytes:
                raise _over(self.source, f"{kind} {oid}", size, "max_blob_bytes", lim, oid=oid)
        _TreeChecker(self.git, self.source, lim, received).walk(self._roots(received))  # names a big blob's path
        for oid, (kind, size) in received.items():  # blobs no received tree names
            if size > lim.max_blob_bytes:
                raise _over(self.source, f"{kind} {oid}", size, "max_blob_bytes", lim, oid=oid)
        for pack in self._packs():
            # git's own object checks (those of `git fsck --strict`) on exactly what came in.
            try:
                with tempfile.TemporaryDirectory() as scratch:
                    run_git(
                        ["index-pack", "--strict", "-o", str(Path(scratch) / "check.idx"), str(pack)], git_dir=self.path
                    )
            except GitCommandError as exc:
                raise UntrustedContentError(
                    f"refusing {self.source}: git fsck --strict rejects what it sent: {_said(exc)}; nothing was changed"
                ) from None
        return len(received)

    def _roots(self, received: dict[str, tuple[str, int]]) -> list[tuple[str, str]]:
        """Trees to walk: those of received commits first (errors then name the commit), then every received tree."""
        roots: list[tuple[str, str]] = []
        for oid, (kind, _size) in received.items():
            if kind == "commit":
                _kind, data = self.git.read_raw(oid)
                if not (data.startswith(b"tree ") and data[45:46] == b"\n"):
                    raise UntrustedContentError(f"refusing {self.source}: commit {oid} is malformed", oid=oid)
                roots.append((data[5:45].decode("ascii", "replace"), f"commit {oid}"))
        return roots + [(oid, f"tree {oid}") for oid, (kind, _s) in received.items() if kind == "tree"]

    # ------------------------------------------------------------------ adopt
    def adopt(self) -> None:
        """Move the checked packs into the target's object store (pack first, index last,
        so a reader never sees an index without its pack)."""
        if self.target is None:
            return
        dest = self.target.gitdir / "objects" / "pack"
        try:
            dest.mkdir(parents=True, exist_ok=True)
            for pack in self._packs():
                for suffix in (".pack", ".rev", ".idx"):
                    src = pack.with_suffix(suffix)
                    if src.exists() and not (dest / src.name).exists():
                        os.replace(src, dest / src.name)
        except OSError as exc:
            raise StorageError(f"cannot move the checked objects into {dest}: {exc}") from None


class _TreeChecker:
    """Walks trees: entry modes and names of the ``received`` ones, depth and path length of all.

    ``received`` maps the object ids under scrutiny to (type, size); trees outside it
    (already trusted) are read only to measure the depth and path lengths they add.
    """

    def __init__(self, git: GitRepo, source: str, limits: InboundLimits, received: dict[str, tuple[str, int]]) -> None:
        self.git, self.source, self.limits, self.received = git, source, limits, received
        self.memo: dict[str, tuple[int, int]] = {}  # tree -> (most components below, longest path below)

    def walk(self, roots: list[tuple[str, str]]) -> None:
        """Check every tree reachable from ``roots`` ((tree oid, label for messages) pairs)."""
        for root, label in roots:
            if root not in self.memo:
                self._walk_one(root, label)

    def _walk_one(self, root: str, label: str) -> None:
        lim, src, received, memo = self.limits, self.source, self.received, self.memo
        # An explicit stack (a hostile tree may be thousands of levels deep): each frame is
        # [tree oid, its entries, next entry, height so far, longest path so far].
        frames: list[list] = []
        names: list[bytes] = []  # the path to the current frame
        prefix: list[int] = [0]  # bytes of that path, with its trailing '/'

        def where(name: bytes) -> str:
            return "/".join(_show(n) for n in (*names, name))

        def enter(oid: str) -> None:
            here = "/".join(_show(n) for n in names)
            try:
                kind, data = self.git.read_raw(oid)
            except CorruptRepositoryError:
                raise UntrustedContentError(
                    f"refusing {src}: tree {oid} at {_clip(here)} in {label} is missing or unreadable",
                    oid=oid,
                    path=here,
                ) from None
            if kind != "tree":
                raise UntrustedContentError(
                    f"refusing {src}: {_clip(here or '/')} in {label} is a directory entry, but {oid} is a {kind}",
                    oid=oid,
                    path=here,
                )
            entries = list(_tree_entries(data, oid))
            if oid in received:
                for mode, name, _child in entries:
                    if mode not in _MODES:
                        raise UntrustedContentError(
                            f"refusing {src}: tree entry {_clip(where(name))} (tree {oid}) in {label} has file mode "
                            f"{mode.decode('ascii', 'replace')!r}, which git fsck --strict refuses; nothing was changed",
                            oid=oid,
                            path=where(name),
                        )
                    problem = entry_name_problem(name)
                    if problem is not None:
                        raise UntrustedContentError(
                            f"refusing {src}: tree entry {_clip(where(name))} (tree {oid}) in {label} has {problem}; "
                            "nothing was changed",
                            oid=oid,
                            path=where(name),
                        )
            frames.append([oid, entries, 0, 0, 0])

        enter(root)
        while frames:
            frame = frames[-1]
            oid, entries, i = frame[0], frame[1], frame[2]
            if i == len(entries):
                frames.pop()
                memo[oid] = (frame[3], frame[4])
                if frames:
                    name = names.pop()
                    prefix.pop()
                    parent = frames[-1]
                    parent[3] = max(parent[3], 1 + frame[3])
                    parent[4] = max(parent[4], len(name) + (1 + frame[4] if frame[4] else 0))
                continue
            frame[2] = i + 1
            mode, name, child = entries[i]
            depth = len(frames)  # components of this entry's path
            is_tree = _MODES.get(mode) == "tree"
            height, longest = memo.get(child, (0, 0)) if is_tree else (0, 0)
            if depth + height > lim.max_tree_depth:
                raise _over(
                    src,
                    f"the depth of {_clip(where(name))} in {label}",
                    depth + height,
                    "max_tree_depth",
                    lim,
                    oid=child,
                    path=where(name),
                )
            length = prefix[-1] + len(name) + (1 + longest if longest else 0)
            if length > lim.max_path_bytes:
                raise _over(
                    src,
                    f"the path length under {_clip(where(name))} in {label}",
                    length,
                    "max_path_bytes",
                    lim,
                    oid=child,
                    path=where(name),
                )
            if not is_tree:
                if _MODES.get(mode) == "blob" and child in received:
                    kind, size = received[child]
                    if kind != "blob":
                        raise UntrustedContentError(
                            f"refusing {src}: {_clip(where(name))} in {label} is a file entry, but {child} is a {kind}",
                            oid=child,
                            path=where(name),
                        )
                    if size > lim.max_blob_bytes:
                        raise _over(
                            src,
                            f"the file {_clip(where(name))} in {label} (blob {child})",
                            size,
                            "max_blob_bytes",
                            lim,
                            oid=child,
                            path=where(name),
                        )
                frame[3] = max(frame[3], 1)
                frame[4] = max(frame[4], len(name))
            elif child in memo:
                frame[3] = max(frame[3], 1 + height)
                frame[4] = max(frame[4], len(name) + (1 + longest if longest else 0))
            else:
                names.append(name)
                prefix.append(prefix[-1] + len(name) + 1)
                enter(child)


def check_merge(
    git: GitRepo,
    theirs_tree: str,
    others: Sequence[str | None],
    source: str,
    limits: InboundLimits = DEFAULT_LIMITS,
    label: str = "their tree",
) -> None:
    """Check the trees a merge (or a fast-forward) would bring onto our branch.

    Only the trees of ``theirs_tree`` that differ from the tree at the same path in every
    one of ``others`` (our tree, the merge base's) are walked: their entries must have
    git's modes and names our path rules accept, within ``limits``' depth and path
    length. Trees equal to ours are ours already.

    Raises:
        UntrustedContentError: a tree breaks a rule; the message names the path.
    """
    changed: dict[str, tuple[str, int]] = {}
    same: set[str] = set()
    stack: list[tuple[str, list[str]]] = [(theirs_tree, [t for t in others if t])]
    while stack:
        tree, counterparts = stack.pop()
        if tree in counterparts:
            same.add(tree)
            continue
        if tree in changed:
            continue
        changed[tree] = ("tree", 0)
        try:
            kind, data = git.read_raw(tree)
        except CorruptRepositoryError:
            continue  # the checker's walk reports it with its path
        if kind != "tree":
            continue
        mine: dict[bytes, list[str]] = {}
        for other in counterparts:
            other_kind, other_data = git.read_raw(other)
            if other_kind == "tree":
                for mode, name, child in _tree_entries(other_data, other):
                    if _MODES.get(mode) == "tree":
                        mine.setdefault(name, []).append(child)
        for mode, name, child in _tree_entries(data, tree):
            if _MODES.get(mode) == "tree":
                stack.append((child, mine.get(name, [])))
    checker = _TreeChecker(git, source, limits, changed)
    checker.memo.update(dict.fromkeys(same - changed.keys(), (0, 0)))  # ours already: not walked again
    checker.walk([(theirs_tree, label)])


def _idx_oids(idx: Path) -> list[str]:
    """Object ids listed by a pack index (version 2, as git and libgit2 write them)."""
    data = idx.read_bytes()
    if data[:8] != b"\xfftOc\x00\x00\x00\x02":
        raise UntrustedContentError(f"pack index {idx.name} is not a version-2 index")
    count = struct.unpack(">I", data[8 + 255 * 4 : 8 + 256 * 4])[0]
    start = 8 + 256 * 4
    table = data[start : start + 20 * count]
    if len(table) != 20 * count:
        raise UntrustedContentError(f"pack index {idx.name} is cut short")
    return [table[i : i + 20].hex() for i in range(0, len(table), 20)]
