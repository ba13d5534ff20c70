"""Contexa's ``.GCC/`` file formats, and export/import of a GCC workspace.

The Git Context Controller (GCC, arXiv 2508.00031) keeps an agent's context in a
``.GCC/`` directory; the Contexa project (PyPI ``contexa``, 1.1.x) writes it as::

    .GCC/
    ├── main.md                      global roadmap
    └── branches/<branch>/
        ├── commit.md                milestone records ("## Commit `id`" blocks)
        ├── log.md                   Observation–Thought–Action steps ("### Step N — ts" blocks)
        └── metadata.yaml            name, purpose, created_from/at, status, merged_into/at

Blocks in ``commit.md`` and ``log.md`` end with a ``---`` line; a content line that
is exactly ``---`` is written ``\\---`` (Contexa's own escape). We escape a little
more (any line that would read as a separator, a field label or a block header gets
one more leading backslash), so our parser gets every record back exactly; Contexa's
reader shows such lines with the backslash.

One addition keeps a round trip lossless: each commit block carries
``**Compressed OTA Steps:** N``, the number of log steps that milestone rolled up.
It sits right after the timestamp, where Contexa's reader ignores unknown lines.
Logs written by Contexa itself lack it; their steps are then assigned to commits
by timestamp.

``metadata.yaml`` is written as flat YAML with double-quoted strings (no PyYAML
needed); the reader understands what PyYAML's ``yaml.dump`` emits for flat string
mappings (plain, single- and double-quoted, folded over several lines).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from got_core.errors import InvalidInputError, InvalidNameError, PayloadTooLargeError
from got_core.names import MAX_NAME_BYTES, path_component_problem

if TYPE_CHECKING:
    from got_core.gcc.workspace import GCCWorkspace
    from got_core.repo import ReasoningRepo

__all__ = [
    "OTARecord",
    "CommitRecord",
    "BranchMetadata",
    "GCC_DIR",
    "check_branch_name",
    "render_steps",
    "render_commits",
    "parse_steps",
    "parse_commits",
    "render_metadata",
    "parse_metadata",
    "group_steps",
    "log_header",
    "commit_header",
    "export_gcc",
    "import_gcc",
    "GCC_MAX_FILE_BYTES",
    "GCC_MAX_TOTAL_BYTES",
    "GCC_MAX_BRANCHES",
]

GCC_DIR = ".GCC"

_LABELS = ("Observation", "Thought", "Action", "Timestamp", "Compressed OTA Steps",
           "Branch Purpose", "Previous Progress Summary", "This Commit's Contribution")
_STRUCTURAL = r"(?:-{3,}\s*$|\*\*(?:%s):\*\*|### Step|## Commit)" % "|".join(re.escape(x) for x in _LABELS)
_NEEDS_ESCAPE = re.compile(r"^\\*" + _STRUCTURAL)
_ESCAPED = re.compile(r"^\\+" + _STRUCTURAL)
_SEPARATOR = re.compile(r"^-{3,}\s*$")
_STEP_HEAD = re.compile(r"^### Step\s+(\d+)\s*(?:—|-)\s*(.*)$")
_COMMIT_HEAD = re.compile(r"^## Commit `([^`]*)`")
_FIELD = re.compile(r"^\*\*(%s):\*\*(.*)$" % "|".join(re.escape(x) for x in _LABELS))


@dataclass(frozen=True)
class OTARecord:
    """One Observation–Thought–Action step of an agent (GCC §3.1, a line of ``log.md``)."""

    step: int
    timestamp: str
    observation: str
    thought: str
    action: str


@dataclass(frozen=True)
class CommitRecord:
    """One GCC milestone (GCC §3.2, a block of ``commit.md``).

    Attributes:
        commit_id: 8-hex content hash (Contexa uses a random 8-char id; both are read).
        branch: the GCC branch it was committed on.
        timestamp: ISO-8601.
        branch_purpose: the branch's purpose at commit time.
        previous_summary: "Previous Progress Summary" (defaults to the last contribution).
        summary: "This Commit's Contribution" — the milestone summary itself.
        ota_steps: how many OTA steps this milestone compressed (None: unknown, as in
            logs Contexa wrote).
    """

    commit_id: str
    branch: str
    timestamp: str
    branch_purpose: str
    previous_summary: str
    summary: str
    ota_steps: int | None = None


@dataclass(frozen=True)
class BranchMetadata:
    """A branch's ``metadata.yaml``: why it exists and whether it was merged (GCC §3.3)."""

    name: str
    purpose: str
    created_from: str = ""
    created_at: str = ""
    status: str = "active"
    merged_into: str | None = None
    merged_at: str | None = None


def check_branch_name(name: object) -> str:
    """Validate a GCC branch name (it becomes a directory and a git ref).

    Contexa accepts any name without a path separator; we also refuse names git or a
    filesystem would misread. Returns the name unchanged.

    Raises:
        InvalidNameError: not a string, empty, padded with spaces, too long, ``.``/``..``,
            starting with ``-`` or ``.``, or containing ``/``, ``\\`` or control characters.
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"branch name must be a string, not {type(name).__name__}")
    problems = []
    if not name.strip():
        problems.append("it is empty")
    elif name != name.strip():
        problems.append("it starts or ends with whitespace")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES // 2:
        problems.append(f"it is longer than {MAX_NAME_BYTES // 2} bytes")
    if any(c in name for c in "/\\") or any(ord(c) < 32 or ord(c) == 127 for c in name):
        problems.append("it contains '/', '\\' or control characters")
    if name.startswith(("-", ".")):
        problems.append("it starts with '-' or '.'")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        problems.append("it is not valid Unicode")
    if problems:
        raise InvalidNameError(f"GCC branch name {name[:60]!r} is not usable: {'; '.join(problems)}; "
                               "use letters, digits, '-', '_' or '.'")
    return name


# ---------------------------------------------------------------------------- markdown
def _escape(text: str) -> str:
    return "\n".join("\\" + line if _NEEDS_ESCAPE.match(line) else line for line in text.split("\n"))


def _unescape(line: str) -> str:
    return line[1:] if _ESCAPED.match(line) else line


def log_header(branch: str) -> str:
    """First lines of a branch's ``log.md`` (as Contexa writes them)."""
    return f"# OTA Log — branch `{branch}`\n\n"


def commit_header(branch: str) -> str:
    """First lines of a branch's ``commit.md`` (as Contexa writes them)."""
    return f"# Commit History — branch `{branch}`\n\n"


def render_steps(steps: Iterable[OTARecord]) -> str:
    """``log.md`` blocks for ``steps`` (Contexa's format, without the file header)."""
    return "".join(
        f"### Step {s.step} — {s.timestamp}\n"
        f"**Observation:** {_escape(s.observation)}\n\n"
        f"**Thought:** {_escape(s.thought)}\n\n"
        f"**Action:** {_escape(s.action)}\n\n---\n" for s in steps)


def render_commits(commits: Iterable[CommitRecord], *, with_steps: bool = True) -> str:
    """``commit.md`` blocks for ``commits`` (Contexa's format, without the file header).

    Args:
        with_steps: add the ``Compressed OTA Steps`` line (Contexa's reader ignores it).
    """
    out = []
    for c in commits:
        steps = f"**Compressed OTA Steps:** {c.ota_steps}\n\n" if with_steps and c.ota_steps is not None else ""
        out.append(f"## Commit `{c.commit_id}`\n**Timestamp:** {c.timestamp}\n\n{steps}"
                   f"**Branch Purpose:** {_escape(c.branch_purpose)}\n\n"
                   f"**Previous Progress Summary:** {_escape(c.previous_summary)}\n\n"
                   f"**This Commit's Contribution:** {_escape(c.summary)}\n\n---\n")
    return "".join(out)


def _blocks(text: str) -> list[tuple[str, dict[str, str]]]:
    """Split into blocks at separator lines; each block: (head line, {label: value})."""
    out = []
    head, current = "", None
    lines: dict[str, list[str]] = {}

    def flush() -> None:
        if head or lines:
            out.append((head, {k: "\n".join(v).strip() for k, v in lines.items()}))

    for line in text.split("\n"):
        if _SEPARATOR.match(line):
            flush()
            head, lines, current = "", {}, None
            continue
        if line.startswith(("### Step", "## Commit")):
            head, current = line, None
            continue
        m = _FIELD.match(line)
        if m:
            current = m.group(1)
            rest = m.group(2)
            lines[current] = [_unescape(rest[1:] if rest.startswith(" ") else rest)]
        elif current is not None:
            lines[current].append(_unescape(line))
    flush()
    return out


def parse_steps(text: str) -> list[OTARecord]:
    """Every OTA step of a ``log.md`` (ours or Contexa's, old ``Step N-ts`` headers too)."""
    steps = []
    for head, f in _blocks(text):
        m = _STEP_HEAD.match(head)
        if not m and not any(k in f for k in ("Observation", "Thought", "Action")):
            continue
        steps.append(OTARecord(int(m.group(1)) if m else 0, m.group(2).strip() if m else "",
                               f.get("Observation", ""), f.get("Thought", ""), f.get("Action", "")))
    return steps


def parse_commits(text: str, branch: str) -> list[CommitRecord]:
    """Every commit record of a ``commit.md`` (blocks without an id are skipped, as Contexa does)."""
    commits = []
    for head, f in _blocks(text):
        m = _COMMIT_HEAD.match(head)
        if not m or not m.group(1):
            continue
        n = f.get("Compressed OTA Steps", "").strip()
        commits.append(CommitRecord(
            m.group(1), branch, f.get("Timestamp", ""), f.get("Branch Purpose", ""),
            f.get("Previous Progress Summary", ""), f.get("This Commit's Contribution", ""),
            int(n) if n.isdigit() else None))
    return commits


# ---------------------------------------------------------------------------- metadata.yaml
_META_KEYS = ("created_at", "created_from", "merged_at", "merged_into", "name", "purpose", "status")
#: what YAML cannot hold raw in a double-quoted string (non-printables, and NEL/LS/PS, which it folds)
_UNPRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _yaml_str(value: str | None) -> str:
    if value is None:
        return "null"
    text = json.dumps(value, ensure_ascii=False)
    return _UNPRINTABLE.sub(lambda m: "\\u%04x" % ord(m.group(0)), text)


def render_metadata(meta: BranchMetadata) -> str:
    """``metadata.yaml`` for a branch: PyYAML's key order, double-quoted strings."""
    values = {"created_at": meta.created_at, "created_from": meta.created_from, "merged_at": meta.merged_at,
              "merged_into": meta.merged_into, "name": meta.name, "purpose": meta.purpose, "status": meta.status}
    return "".join(f"{k}: {_yaml_str(values[k])}\n" for k in _META_KEYS)


_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
            "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
            "_": "\xa0", "L": "\u2028", "P": "\u2029"}


def _fold(lines: list[str], double: bool) -> str:
    """YAML flow-scalar line folding: a break is a space, each blank line a newline."""
    out, pending = lines[0].rstrip(" \t") if len(lines) > 1 else lines[0], 0
    for i, raw in enumerate(lines[1:], 1):
        line = raw.strip(" \t") if i < len(lines) - 1 else raw.lstrip(" \t")
        if not line:
            pending += 1
            continue
        if double and out.endswith("\\") and (len(out) - len(out.rstrip("\\"))) % 2 == 1:
            out, pending = out[:-1] + "\n" * pending + line, 0  # escaped line break
            continue
        out += ("\n" * pending if pending else " ") + line
        pending = 0
    return out + "\n" * pending


def _unquote_double(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            try:
                out.append(chr(int(body[i + 2:i + 2 + width], 16)))
            except ValueError:
                raise InvalidInputError(f"bad escape in metadata.yaml: {body[i:i + 2 + width]!r}") from None
            i += 2 + width
        else:
            raise InvalidInputError(f"bad escape in metadata.yaml: \\{nxt}")
    return "".join(out)


def _scalar(raw: str) -> str | None:
    value = raw.strip()
    if value in ("", "~", "null", "Null", "NULL"):
        return None
    if value[0] in "\"'":
        quote = value[0]
        end = len(value) - 1
        if end < 1 or value[end] != quote:
            raise InvalidInputError(f"unterminated quoted value in metadata.yaml: {value[:60]!r}")
        lines = value[1:end].split("\n")
        if quote == "'":
            return _fold(lines, False).replace("''", "'")
        return _unquote_double(_fold(lines, True))
    if value[0] in "|>":
        raise InvalidInputError("block scalars (| or >) in metadata.yaml are not supported; use quoted strings")
    return _fold(value.split("\n"), False)


def parse_metadata(text: str, default_name: str = "") -> BranchMetadata:
    """Read a flat ``metadata.yaml`` (ours, or PyYAML's as Contexa writes it).

    Raises:
        InvalidInputError: the file is not a flat mapping of strings.
    """
    entries: dict[str, list[str]] = {}
    key = None
    for line in text.split("\n"):
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*)|)$", line)
        if m:
            key = m.group(1)
            entries[key] = [m.group(2) or ""]
        elif key is not None:
            entries[key].append(line)
        elif line.strip() and not line.lstrip().startswith("#") and line.strip() != "---":
            raise InvalidInputError(f"metadata.yaml is not a flat mapping (line {line[:60]!r})")
    values = {k: _scalar("\n".join(v).rstrip("\n")) for k, v in entries.items()}
    return BranchMetadata(
        name=values.get("name") or default_name, purpose=values.get("purpose") or "",
        created_from=values.get("created_from") or "", created_at=values.get("created_at") or "",
        status=values.get("status") or "active", merged_into=values.get("merged_into"),
        merged_at=values.get("merged_at"))


# ---------------------------------------------------------------------------- export / import
def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8"))  # bytes: no newline translation, so "\r" survives


def export_gcc(workspace: "GCCWorkspace", directory: str | Path, *, overwrite: bool = False) -> Path:
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
            groups[i] = steps[pos:pos + (c.ota_steps or 0)]
            pos += c.ota_steps or 0
        return groups, steps[pos:]
    stamps = [_moment(c.timestamp) for c in commits]
    if any(s is None for s in stamps) or any(_moment(s.timestamp) is None for s in steps):
        return groups, list(steps)
    j, rest = 0, []
    for step in steps:
        when = _moment(step.timestamp)
        while j < len(commits) and stamps[j] < when:  # type: ignore[operator]
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
            "(`got gcc import --skip-unsafe`) to leave it out")

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
                raise PayloadTooLargeError(f"the files read up to {where}",
                                           self.max_total_bytes - self.left + len(data), self.max_total_bytes)
            raise PayloadTooLargeError(str(where), max(st.st_size, len(data)), self.max_file_bytes)
        self.left -= len(data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInputError(f"{where} is not UTF-8 text") from None


def import_gcc(directory: str | Path, repo: "ReasoningRepo", *, namespace: str = "gcc",
               skip_unsafe: bool = False, max_file_bytes: int = GCC_MAX_FILE_BYTES,
               max_total_bytes: int = GCC_MAX_TOTAL_BYTES,
               max_branches: int = GCC_MAX_BRANCHES) -> "GCCWorkspace":
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
    from got_core.gcc.workspace import ROOT_BRANCH, GCCWorkspace

    base = Path(directory)
    reader = _Reader(skip_unsafe, max_file_bytes, max_total_bytes)
    try:
        if not base.is_dir():
            raise InvalidInputError(f"no .GCC workspace at {directory} (expected main.md and branches/)")
        top = reader.open_dir(None, base, base)  # the directory the caller named is theirs to choose
        kind = reader.kind(top, GCC_DIR, base / GCC_DIR)
        root, root_fd = (base / GCC_DIR, reader.open_dir(top, GCC_DIR, base / GCC_DIR)) if kind == "dir" \
            else (base, top)
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
    ws = GCCWorkspace._import(repo, namespace, roadmap, branches, root_branch=ROOT_BRANCH)
    ws.skipped = tuple(reader.skipped)
    return ws
