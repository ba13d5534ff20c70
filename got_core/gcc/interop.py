"""Copy a GCC workspace to and from Contexa's ``.GCC/`` directory (:mod:`got_core.gcc.contexa`'s format).

``export_gcc`` writes the directory Contexa reads; ``import_gcc`` reads one (ours or
Contexa's) into a new workspace. The directory being imported is untrusted: only regular
files inside it are read (every file and directory is opened relative to its parent
with ``O_NOFOLLOW``, so no symbolic link is ever followed and no FIFO or device is
opened), within size limits, and branch names pass git's path rules.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from got_core.errors import InvalidInputError, InvalidNameError, PayloadTooLargeError
from got_core.gcc.contexa import (
    GCC_DIR,
    BranchMetadata,
    CommitRecord,
    OTARecord,
    check_branch_name,
    commit_header,
    log_header,
    parse_commits,
    parse_metadata,
    parse_steps,
    render_commits,
    render_metadata,
    render_steps,
)
from got_core.gcc.workspace import ROOT_BRANCH, GCCWorkspace
from got_core.names import encode_component, path_component_problem

if TYPE_CHECKING:
    from got_core.repo import ReasoningRepo

__all__ = [
    "GCC_MAX_BRANCHES",
    "GCC_MAX_FILE_BYTES",
    "GCC_MAX_TOTAL_BYTES",
    "export_gcc",
    "group_steps",
    "import_gcc",
]


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8"))  # bytes: no newline translation, so "\r" survives


def export_gcc(workspace: GCCWorkspace, directory: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``workspace`` as a ``.GCC/`` tree Contexa can read; returns the ``.GCC`` path.

    ``main.md`` comes from the root branch; each branch's ``commit.md`` and
    ``metadata.yaml`` are copied from its own git branch, and its ``log.md`` is the
    continuous trace Contexa keeps: the steps every commit compressed, in order,
    then the steps since the last commit.

    Args:
        directory: the project directory (``.GCC`` is created inside it).
        overwrite: replace an existing non-empty ``.GCC`` (else InvalidInputError).
    """
    root = Path(directory) / GCC_DIR
    if root.exists() and any(root.iterdir()):
        if not overwrite:
            raise InvalidInputError(f"{root} already exists; pass overwrite=True to replace it")
        shutil.rmtree(root)
    (root / "branches").mkdir(parents=True, exist_ok=True)
    _write(root / "main.md", workspace.roadmap(workspace.root_branch))
    for name in workspace.branches():
        target = root / "branches" / name
        target.mkdir(parents=True, exist_ok=True)
        commits = workspace.commits(name)
        steps: list[OTARecord] = []
        for c in commits:
            steps.extend(workspace.compressed_steps(c.commit_id, name))
        steps.extend(workspace.ota(name))
        _write(target / "commit.md", commit_header(name) + render_commits(commits))
        _write(target / "log.md", log_header(name) + render_steps(steps))
        _write(target / "metadata.yaml", render_metadata(workspace.metadata(name)))
    return root


def _moment(ts: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(ts.strip())
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def group_steps(commits: list[CommitRecord], steps: list[OTARecord]) -> tuple[list[list[OTARecord]], list[OTARecord]]:
    """Assign a continuous log's steps to the commits that compressed them.

    Uses each commit's ``ota_steps`` count when every commit has one (our exports);
    otherwise a step belongs to the first commit stamped at or after it (Contexa's
    logs). Returns (steps per commit, steps after the last commit).
    """
    groups: list[list[OTARecord]] = [[] for _ in commits]
    if all(c.ota_steps is not None for c in commits):
        pos = 0
        for i, c in enumerate(commits):
            groups[i] = steps[pos : pos + (c.ota_steps or 0)]
            pos += c.ota_steps or 0
        return groups, steps[pos:]
    stamps = [m for c in commits if (m := _moment(c.timestamp)) is not None]
    moments = [m for s in steps if (m := _moment(s.timestamp)) is not None]
    if len(stamps) < len(commits) or len(moments) < len(steps):  # a time that does not parse
        return groups, list(steps)
    j = 0
    rest: list[OTARecord] = []
    for step, when in zip(steps, moments):
        while j < len(commits) and stamps[j] < when:
            j += 1
        (groups[j] if j < len(commits) else rest).append(step)
    return groups, rest


#: Largest single file :func:`import_gcc` reads (a Contexa ``log.md`` of a long run is a few MB).
GCC_MAX_FILE_BYTES = 16 * 1024 * 1024
#: Most bytes one import reads in all.
GCC_MAX_TOTAL_BYTES = 256 * 1024 * 1024
#: Most branch directories one import accepts.
GCC_MAX_BRANCHES = 1000

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for a writer


class _Reader:
    """Reads a ``.GCC/`` tree without ever leaving it.

    Every directory and file is opened relative to its parent's descriptor with
    ``O_NOFOLLOW``, so a symbolic link (to ``/etc/passwd``, to a directory elsewhere)
    is refused even if it appears between the check and the open; only regular files
    are read, within size limits. Unsafe entries are refused with a typed error, or,
    with ``skip_unsafe``, left out and recorded in :attr:`skipped`.
    """

    def __init__(self, skip_unsafe: bool, max_file_bytes: int, max_total_bytes: int) -> None:
        self.skip_unsafe = skip_unsafe
        self.max_file_bytes = max_file_bytes
        self.left = max_total_bytes
        self.max_total_bytes = max_total_bytes
        self.skipped: list[str] = []
        self._fds: list[int] = []

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()

    def unsafe(self, where: Path, why: str) -> None:
        """Refuse ``where`` (or skip it, when asked to)."""
        if self.skip_unsafe:
            self.skipped.append(f"{where}: {why}")
            return
        raise InvalidInputError(
            f"{where} {why}; GCC import reads only regular files inside the directory being "
            "imported: replace it with the file itself, or import with skip_unsafe=True "
            "(`got gcc import --skip-unsafe`) to leave it out"
        )

    def kind(self, dir_fd: int, name: str, where: Path) -> str | None:
        """``dir``, ``file``, None when absent; links and special files are reported unsafe."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InvalidInputError(f"cannot read {where}: {exc}") from None
        if stat.S_ISLNK(st.st_mode):
            self.unsafe(where, "is a symbolic link (it could point outside the directory being imported)")
            return "unsafe"
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        if stat.S_ISREG(st.st_mode):
            return "file"
        self.unsafe(where, "is not a regular file (a device, FIFO or socket)")
        return "unsafe"

    def open_dir(self, dir_fd: int | None, name: str | Path, where: Path) -> int:
        flags = os.O_RDONLY | _DIRECTORY | (_NOFOLLOW if dir_fd is not None else 0)
        try:
            fd = os.open(name, flags, dir_fd=dir_fd) if dir_fd is not None else os.open(name, flags)
        except OSError as exc:
            raise InvalidInputError(f"cannot open {where} as a directory: {exc}") from None
        self._fds.append(fd)
        return fd

    def names(self, dir_fd: int, where: Path, limit: int) -> list[str]:
        try:
            with os.scandir(dir_fd) as listing:
                names = []
                for entry in listing:
                    names.append(entry.name)
                    if len(names) > limit:
                        raise PayloadTooLargeError(f"{where} (entries)", len(names), limit)
        except OSError as exc:
            raise InvalidInputError(f"cannot list {where}: {exc}") from None
        return sorted(names)

    def text(self, dir_fd: int, name: str, where: Path) -> str:
        """A regular file's UTF-8 text ("" when absent or skipped)."""
        if self.kind(dir_fd, name, where) != "file":
            return ""
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK, dir_fd=dir_fd)
        except OSError as exc:  # ELOOP: it became a link after the check
            self.unsafe(where, f"cannot be opened safely ({exc.strerror})")
            return ""
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.unsafe(where, "is not a regular file")
                return ""
            limit = min(self.max_file_bytes, self.left)
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read(limit + 1)
        finally:
            os.close(fd)
        if len(data) > limit:
            if limit < self.max_file_bytes:
                raise PayloadTooLargeError(
                    f"the files read up to {where}", self.max_total_bytes - self.left + len(data), self.max_total_bytes
                )
            raise PayloadTooLargeError(str(where), max(st.st_size, len(data)), self.max_file_bytes)
        self.left -= len(data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInputError(f"{where} is not UTF-8 text") from None


def import_gcc(
    directory: str | Path,
    repo: ReasoningRepo,
    *,
    namespace: str = "gcc",
    skip_unsafe: bool = False,
    max_file_bytes: int = GCC_MAX_FILE_BYTES,
    max_total_bytes: int = GCC_MAX_TOTAL_BYTES,
    max_branches: int = GCC_MAX_BRANCHES,
) -> GCCWorkspace:
    """Read a ``.GCC/`` tree (Contexa's or ours) into a new workspace in ``repo``.

    Every record is kept: the roadmap, each branch's metadata, commit records and OTA
    steps (each step rolled into the commit that compressed it). Branches become git
    branches created from their ``created_from`` branch; branches marked merged are
    merged into their target with a real git merge.

    The directory is hostile input: symbolic links (files or directories, ``.GCC``
    itself included) are never followed, devices, FIFOs and sockets are never opened,
    only regular files are read and only within the size limits, and branch names must
    pass :func:`check_branch_name` and git's path rules.

    Args:
        directory: the project directory holding ``.GCC``, or the ``.GCC`` directory itself.
        namespace: the workspace namespace in ``repo`` (must not exist yet).
        skip_unsafe: leave out links, special files and unusable branch names instead of
            refusing the import; what was left out is in the workspace's ``skipped``.
        max_file_bytes: largest file read (:data:`GCC_MAX_FILE_BYTES`).
        max_total_bytes: most bytes read in all (:data:`GCC_MAX_TOTAL_BYTES`).
        max_branches: most branch directories (:data:`GCC_MAX_BRANCHES`).

    Raises:
        InvalidInputError: no ``.GCC`` there, the namespace exists, a file does not parse,
            or (unless ``skip_unsafe``) a link or special file inside it.
        PayloadTooLargeError: a file, or the whole tree, over its limit.
        InvalidNameError: a branch directory has a name we refuse (see :func:`check_branch_name`).
    """

    base = Path(directory)
    reader = _Reader(skip_unsafe, max_file_bytes, max_total_bytes)
    try:
        if not base.is_dir():
            raise InvalidInputError(f"no .GCC workspace at {directory} (expected main.md and branches/)")
        top = reader.open_dir(None, base, base)  # the directory the caller named is theirs to choose
        kind = reader.kind(top, GCC_DIR, base / GCC_DIR)
        root, root_fd = (
            (base / GCC_DIR, reader.open_dir(top, GCC_DIR, base / GCC_DIR)) if kind == "dir" else (base, top)
        )
        if kind == "unsafe":  # only with skip_unsafe: left out, so there is nothing to import
            raise InvalidInputError(f"{base / GCC_DIR} is not a directory inside {base}; nothing was imported")
        has_main = reader.kind(root_fd, "main.md", root / "main.md")
        has_branches = reader.kind(root_fd, "branches", root / "branches")
        if has_main != "file" and has_branches != "dir":
            raise InvalidInputError(f"no .GCC workspace at {directory} (expected main.md and branches/)")
        branches: dict[str, tuple[BranchMetadata, list[CommitRecord], list[list[OTARecord]], list[OTARecord]]] = {}
        if has_branches == "dir":
            bfd = reader.open_dir(root_fd, "branches", root / "branches")
            for raw_name in reader.names(bfd, root / "branches", max_branches):
                where = root / "branches" / raw_name
                if reader.kind(bfd, raw_name, where) != "dir":
                    continue  # files beside the branch directories are not branches; links were reported
                try:
                    name = check_branch_name(raw_name)
                    problem = path_component_problem(name)
                    if problem is not None:
                        raise InvalidNameError(f"GCC branch name {name[:60]!r} has {problem}")
                except InvalidNameError as exc:
                    if not skip_unsafe:
                        raise
                    reader.skipped.append(f"{where}: {exc}")
                    continue
                dfd = reader.open_dir(bfd, raw_name, where)
                meta_text = reader.text(dfd, "metadata.yaml", where / "metadata.yaml")
                meta = parse_metadata(meta_text, name) if meta_text.strip() else BranchMetadata(name, "")
                meta = replace(meta, name=name)
                commits = parse_commits(reader.text(dfd, "commit.md", where / "commit.md"), name)
                groups, current = group_steps(commits, parse_steps(reader.text(dfd, "log.md", where / "log.md")))
                commits = [replace(c, ota_steps=len(g)) for c, g in zip(commits, groups)]
                branches[name] = (meta, commits, groups, current)
        roadmap = reader.text(root_fd, "main.md", root / "main.md") if has_main == "file" else ""
    finally:
        reader.close()
    ws = _write_workspace(repo, namespace, roadmap, branches, root_branch=ROOT_BRANCH)
    ws.skipped = tuple(reader.skipped)
    return ws


def _write_workspace(
    repo: ReasoningRepo,
    namespace: str,
    roadmap: str,
    branches: dict[str, tuple[BranchMetadata, list[CommitRecord], list[list[OTARecord]], list[OTARecord]]],
    *,
    root_branch: str = ROOT_BRANCH,
) -> GCCWorkspace:
    """A new workspace ``namespace`` holding the imported branches: parents first, merges replayed."""
    ws = GCCWorkspace(repo, namespace=namespace)
    if ws.exists:
        raise InvalidInputError(
            f"GCC workspace {namespace!r} already exists in {repo.gitdir}; import into another namespace"
        )
    if root_branch not in branches:
        branches = {
            root_branch: (BranchMetadata(root_branch, "Primary reasoning trajectory"), [], [], []),
            **branches,
        }

    def files(name: str) -> dict[str, str | None]:
        meta, commits, groups, current = branches[name]
        d = ws._dir(name)
        out: dict[str, str | None] = {
            f"{d}/metadata.yaml": render_metadata(meta),
            f"{d}/commit.md": commit_header(name) + render_commits(commits),
            f"{d}/log.md": log_header(name) + render_steps(current),
        }
        for c, steps in zip(commits, groups):
            if steps:
                out[f"{d}/ota/{encode_component(c.commit_id, 'commit id')}.md"] = log_header(name) + render_steps(steps)
        return out

    repo.commit_files(
        ws._ref(root_branch),
        {"main.md": roadmap, **files(root_branch)},
        f"gcc(import): {root_branch}\n",
        parents=[],
        expected=None,
    )
    pending = [n for n in branches if n != root_branch]
    while pending:  # parents before children; an unknown or cyclic parent means the root
        ready = [n for n in pending if branches[n][0].created_from not in pending] or pending[:1]
        for name in ready:
            parent = branches[name][0].created_from
            parent = parent if parent in branches and parent not in pending else root_branch
            repo.commit_files(
                ws._ref(name),
                files(name),
                f"gcc(import): {name} from {parent}\n",
                parents=[ws._tip(parent)],
                expected=None,
            )
            pending.remove(name)
    merged = [
        (m.merged_at or "", n, m.merged_into)
        for n, (m, *_rest) in branches.items()
        if m.status == "merged" and m.merged_into in branches and m.merged_into != n
    ]
    for _when, name, into in sorted(merged):
        repo.merge(
            ws._ref(name),
            into=ws._ref(into),
            strategy=GCCWorkspace._resolve_roadmap,
            message=f"gcc(import): merge {name} into {into}\n",
        )
    return ws
