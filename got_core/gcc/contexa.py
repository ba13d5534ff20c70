"""Contexa's ``.GCC/`` file formats (parse and render).

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

``metadata.yaml`` is written and read with PyYAML (safe dumper and loader only: no
tags, no Python objects). This module is the file format alone; copying between a
workspace and a directory is :mod:`got_core.gcc.interop`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import yaml

from got_core.errors import InvalidInputError, InvalidNameError
from got_core.names import MAX_NAME_BYTES

__all__ = [
    "GCC_DIR",
    "BranchMetadata",
    "CommitRecord",
    "OTARecord",
    "check_branch_name",
    "commit_header",
    "log_header",
    "parse_commits",
    "parse_metadata",
    "parse_steps",
    "render_commits",
    "render_metadata",
    "render_steps",
]

GCC_DIR = ".GCC"

_LABELS = (
    "Observation",
    "Thought",
    "Action",
    "Timestamp",
    "Compressed OTA Steps",
    "Branch Purpose",
    "Previous Progress Summary",
    "This Commit's Contribution",
)
_STRUCTURAL = r"(?:-{{3,}}\s*$|\*\*(?:{}):\*\*|### Step|## Commit)".format("|".join(re.escape(x) for x in _LABELS))
_NEEDS_ESCAPE = re.compile(r"^\\*" + _STRUCTURAL)
_ESCAPED = re.compile(r"^\\+" + _STRUCTURAL)
_SEPARATOR = re.compile(r"^-{3,}\s*$")
_STEP_HEAD = re.compile(r"^### Step\s+(\d+)\s*(?:—|-)\s*(.*)$")
_COMMIT_HEAD = re.compile(r"^## Commit `([^`]*)`")
_FIELD = re.compile(r"^\*\*({}):\*\*(.*)$".format("|".join(re.escape(x) for x in _LABELS)))


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
        raise InvalidNameError(
            f"GCC branch name {name[:60]!r} is not usable: {'; '.join(problems)}; use letters, digits, '-', '_' or '.'"
        )
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
        f"**Action:** {_escape(s.action)}\n\n---\n"
        for s in steps
    )


def render_commits(commits: Iterable[CommitRecord], *, with_steps: bool = True) -> str:
    """``commit.md`` blocks for ``commits`` (Contexa's format, without the file header).

    Args:
        with_steps: add the ``Compressed OTA Steps`` line (Contexa's reader ignores it).
    """
    out = []
    for c in commits:
        steps = f"**Compressed OTA Steps:** {c.ota_steps}\n\n" if with_steps and c.ota_steps is not None else ""
        out.append(
            f"## Commit `{c.commit_id}`\n**Timestamp:** {c.timestamp}\n\n{steps}"
            f"**Branch Purpose:** {_escape(c.branch_purpose)}\n\n"
            f"**Previous Progress Summary:** {_escape(c.previous_summary)}\n\n"
            f"**This Commit's Contribution:** {_escape(c.summary)}\n\n---\n"
        )
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
        steps.append(
            OTARecord(
                int(m.group(1)) if m else 0,
                m.group(2).strip() if m else "",
                f.get("Observation", ""),
                f.get("Thought", ""),
                f.get("Action", ""),
            )
        )
    return steps


def parse_commits(text: str, branch: str) -> list[CommitRecord]:
    """Every commit record of a ``commit.md`` (blocks without an id are skipped, as Contexa does)."""
    commits = []
    for head, f in _blocks(text):
        m = _COMMIT_HEAD.match(head)
        if not m or not m.group(1):
            continue
        n = f.get("Compressed OTA Steps", "").strip()
        commits.append(
            CommitRecord(
                m.group(1),
                branch,
                f.get("Timestamp", ""),
                f.get("Branch Purpose", ""),
                f.get("Previous Progress Summary", ""),
                f.get("This Commit's Contribution", ""),
                int(n) if n.isdigit() else None,
            )
        )
    return commits


# ---------------------------------------------------------------------------- metadata.yaml
_META_KEYS = ("created_at", "created_from", "merged_at", "merged_into", "name", "purpose", "status")


def render_metadata(meta: BranchMetadata) -> str:
    """``metadata.yaml`` for a branch, as Contexa writes it (PyYAML, sorted keys, unicode kept)."""
    values = {
        "created_at": meta.created_at,
        "created_from": meta.created_from,
        "merged_at": meta.merged_at,
        "merged_into": meta.merged_into,
        "name": meta.name,
        "purpose": meta.purpose,
        "status": meta.status,
    }
    return yaml.safe_dump(values, sort_keys=True, allow_unicode=True, default_style='"', width=1 << 16)


def parse_metadata(text: str, default_name: str = "") -> BranchMetadata:
    """Read ``metadata.yaml`` (ours, or Contexa's) with PyYAML's safe loader: no tags, no objects.

    Raises:
        InvalidInputError: not YAML, or not a flat mapping of strings.
    """
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"metadata.yaml is not valid YAML: {str(exc)[:200]}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict) or any(not isinstance(k, str) for k in data):
        raise InvalidInputError("metadata.yaml is not a flat mapping of names to strings")
    values: dict[str, str | None] = {}
    for key, value in data.items():
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise InvalidInputError(f"metadata.yaml: {key!r} is not a plain value")
        values[key] = None if value is None else str(value)
    return BranchMetadata(
        name=values.get("name") or default_name,
        purpose=values.get("purpose") or "",
        created_from=values.get("created_from") or "",
        created_at=values.get("created_at") or "",
        status=values.get("status") or "active",
        merged_into=values.get("merged_into"),
        merged_at=values.get("merged_at"),
    )
