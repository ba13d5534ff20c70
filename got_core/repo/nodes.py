"""Reasoning nodes: one commit of four files per scored thought (ARCHITECTURE §1, §3).

``commit_node`` is the commit-on-score path: ``thought.md``, ``scores.json``,
``trace.jsonl`` and ``metadata.json`` in one commit with a structured message
(``Got-Node``, ``Got-Problem``, ``Got-Depth``, ``Got-Outcome``, ``Got-Score``
trailers), then the score as a note and the outcome as a tag. ``read_node`` is
replay: any revision gives the whole node back. :class:`~got_core.repo.ReasoningRepo`
exposes both as methods.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from got_core.errors import (
    ConcurrentUpdateError,
    CorruptRepositoryError,
    InvalidInputError,
    InvalidNameError,
    PayloadTooLargeError,
)
from got_core.names import decode_component, encode_component
from got_core.repo.notes import note_json, notes_commit
from got_core.storage.git import BlobId
from got_core.storage.refnames import tag_ref
from got_core.types import NODE_FILES, OUTCOME_TAG_PREFIX, Node, canonical_json
from got_core.validate import clean_revs, clean_text

if TYPE_CHECKING:
    from got_core.repo.base import RepoBase as ReasoningRepo

__all__ = ["OUTCOME_TAGS", "commit_node", "node_message", "read_node", "tag_outcome"]

#: Outcomes that get a tag, and the tag prefix for each (defined once, in :mod:`got_core.types`).
OUTCOME_TAGS = OUTCOME_TAG_PREFIX


def commit_node(
    repo: ReasoningRepo,
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
    ``failed`` outcome, the outcome tag.

    Args:
        node: the node; its ``node_id`` is derived from content when empty.
        ref: the branch to move (default: the session branch).
        parents: parent node SHAs (default: the branch tip).
        note: write ``scores`` as a note too.
        tag: tag ``success_<id>`` / ``failed_<id>`` when the outcome says so.

    Returns:
        The node as stored (``oid``, ``parents``, ``node_id`` filled in). ``node_id``
        is the id as given (or derived); refs, tags and trailers hold it encoded with
        :func:`~got_core.names.encode_component`, and ``read_node`` / ``resolve``
        accept either spelling.

    Raises:
        InvalidInputError: a field of the wrong type, or scores/trace/metadata that are
            not JSON-serialisable.
        InvalidNameError: an id that cannot be encoded (not text, or too long).
    """
    ref_name = repo.ref(ref) if ref else repo.session_ref
    problem, outcome = _check_fields(node)
    parents = clean_revs(parents)
    thought = clean_text(node.thought, "thought")
    try:
        scores_text = _canonical_json(dict(node.scores))
        trace_text = "".join(
            json.dumps(step, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n" for step in node.trace
        )
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"node scores/trace must be JSON-serialisable: {exc}") from None
    # what does not depend on the parents is rendered once (a retried attempt reuses it); the
    # four paths are ours and valid, so the files go to the tree as bytes without a path check
    limit = repo.max_file_bytes
    thought_bytes = _file_bytes(thought, "thought.md", limit)
    scores_bytes = _file_bytes(scores_text, "scores.json", limit)
    trace_bytes = _file_bytes(trace_text, "trace.jsonl", limit)
    head, tail = _message_parts(node, thought, problem, outcome)
    explicit = [repo.resolve(p) for p in parents] if parents is not None else None
    git = repo.git
    notes_ref = repo.notes_ref if note and node.scores else None
    want_tag = tag and node.outcome in OUTCOME_TAG_PREFIX
    first_tip: list[str | None] = []
    built: dict[str, Any] = {}
    known_ids: dict[tuple[str, ...], tuple[str, str]] = {}  # parents -> (node id, encoded), as derived
    tag_known: dict[str, str] = {}  # an outcome tag's name -> its full ref, judged valid before the first attempt

    def build(tips: dict[str, str | None]) -> dict[str, str | None]:
        tip = tips[ref_name]
        if explicit is not None:
            # the commit is built on the caller's parents: a branch that moved meanwhile is theirs to decide
            if first_tip and first_tip[0] != tip:
                raise ConcurrentUpdateError(
                    f"{ref_name} moved while this write was built on {first_tip[0] or 'nothing'}; "
                    "re-read its tip and retry"
                )
            first_tip[:] = [tip]
        these = explicit if explicit is not None else ([tip] if tip else [])
        ids = known_ids.get(tuple(these))
        if ids is None:
            given = node.node_id or node.derive_id(these)  # the id depends on the parents
            ids = known_ids[tuple(these)] = (given, _encoded(given, "node id"))
        given_id, node_id = ids
        meta = dict(node.metadata)
        meta.update({"node_id": node_id, "problem_id": node.problem_id, "depth": node.depth, "outcome": node.outcome})
        try:
            meta_text = _canonical_json(meta)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"node metadata must be JSON-serialisable: {exc}") from None
        scores_blob = BlobId(git.write_blob(scores_bytes))  # the note reuses it
        if notes_ref is not None:
            repo._blobs_written({scores_blob: scores_bytes})  # so the index reads the note from here
        files: dict[str, bytes | BlobId | None] = {
            "thought.md": thought_bytes,
            "scores.json": scores_blob,
            "trace.jsonl": trace_bytes,
            "metadata.json": _file_bytes(meta_text, "metadata.json", limit),
        }
        # ids are encoded (ASCII) and the thought was cleaned: the message needs no second cleaning
        message = f"node {node_id}{head}Got-Node: {node_id}\n{tail}"
        oid = repo._new_commit(git.build_tree(None, files), these, message)
        answer: dict[str, str | None] = {ref_name: oid}
        built.update(oid=oid, these=these, given_id=given_id, node_id=node_id, meta=meta, notes=None, tag=None)
        if notes_ref is not None:
            # the note is the node's scores.json blob itself: no second copy is written
            parent = tips[notes_ref]
            commit, changes = notes_commit(repo, parent, {oid: scores_blob})
            answer[notes_ref] = commit
            built["notes"] = (commit, parent, changes)
            # a fact about the commit's content, true before it is published: the index
            # applies these changes without a tree diff, in the sync of this very move
            repo._notes_written(notes_ref, commit, parent, changes)
        if want_tag:
            name = OUTCOME_TAG_PREFIX[node.outcome] + node_id
            built["tag"] = _tag_answer(repo, tips, name, oid, answer, tag_known.get(name))
        return answer

    # branch, note and tag move in ONE ref transaction: one lock-and-rename round, and no
    # walk over every packed ref per ref written (ARCHITECTURE §6)
    refs = [ref_name, notes_ref] if notes_ref is not None else [ref_name]
    # where this thread's last write left the branch and the notes ref: built on without
    # reading them; checked under the locks all the same (a stale hint costs one more attempt).
    # Not with explicit parents: their builder refuses a tip it did not see first
    hints = git.moved_tips(refs) if explicit is None else {}
    if want_tag and (explicit is not None or ref_name in hints):
        # the tag is named after the node id, which the parents the first attempt builds on
        # give here: a new node's tag is expected absent, not read (the transaction checks it
        # under its lock; a tag that exists costs one more attempt, which reads it)
        first = explicit if explicit is not None else [t for t in (hints[ref_name],) if t]
        try:
            given = node.node_id or node.derive_id(first)
            known_ids[tuple(first)] = (given, _encoded(given, "node id"))
            name = OUTCOME_TAG_PREFIX[node.outcome] + known_ids[tuple(first)][1]
            full = tag_ref(name)
        except InvalidNameError:
            pass  # the builder meets the refusal itself
        else:
            tag_known[name] = full
            hints[full] = None
            repo._remember_ref(full, full)  # judged valid: update_refs does not judge it again
    repo.update_refs(refs, build, expected=hints)
    oid, these, given_id, meta = built["oid"], built["these"], built["given_id"], built["meta"]
    stored = Node(
        thought=thought,
        scores=dict(node.scores),
        trace=list(node.trace),
        metadata=meta,
        problem_id=node.problem_id,
        depth=node.depth,
        outcome=node.outcome,
        node_id=given_id,
        oid=oid,
        parents=tuple(these),
    )
    if built["notes"] is not None and notes_ref is not None:
        stored.note = dict(node.scores)
    if built["tag"] is not None:
        name, problem = built["tag"]
        if problem is not None:
            raise problem  # the node and its note are stored; only the tag was refused, as before
        stored.tags = [name]
    return stored


#: The value types :func:`_canonical_json` writes itself (exact types: a subclass may print otherwise).
_SCALARS = frozenset((str, int, float, bool, type(None)))
_ENCODE = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False).encode


def _canonical_json(data: dict[str, Any]) -> str:
    """:func:`~got_core.types.canonical_json` of ``data``, the same text.

    A node's scores and metadata are mostly flat mappings of text keys to scalars: those are
    written here, each key and value by json's C encoder (``json.dumps`` with an indent runs
    its pure-Python encoder: about 4% of a write's CPU); anything else is handed on.

    Raises:
        ValueError: a float that is not finite (as ``canonical_json``).
    """
    if data and all(type(key) is str and type(value) in _SCALARS for key, value in data.items()):
        items = ",\n".join(f"  {_ENCODE(key)}: {_ENCODE(data[key])}" for key in sorted(data))
        return "{\n" + items + "\n}\n"
    return canonical_json(data)


def _tag_answer(
    repo: ReasoningRepo,
    tips: dict[str, str | None],
    name: str,
    oid: str,
    answer: dict[str, str | None],
    ref: str | None = None,
) -> tuple[str, Exception | None]:
    """Add the outcome tag ``name`` on ``oid`` to a transaction's ``answer`` (tags never move);
    ``ref``: its full ref when the caller judged the name valid already.

    Returns the tag's name and the error to raise once the rest is published (a name
    that is not a valid tag, or a tag that already points elsewhere), else None.
    """
    if ref is None:
        try:
            ref = tag_ref(name)
        except InvalidNameError as exc:
            return name, exc
    current = tips[ref]
    if current is None:
        answer[ref] = oid
    elif repo.git.peel_to_commit(current) != oid:
        return name, InvalidInputError(f"tag {name!r} already points at {current[:12]}; tags do not move")
    return name, None


def tag_outcome(repo: ReasoningRepo, target: str, outcome: str, node_id: str | None = None) -> str:
    """Tag a validated node ``success_<id>`` or ``failed_<id>``; returns the tag name.

    Raises:
        InvalidInputError: ``outcome`` is not one of :data:`~got_core.types.OUTCOME_TAG_PREFIX`.
    """
    if not isinstance(outcome, str) or outcome not in OUTCOME_TAG_PREFIX:
        raise InvalidInputError(f"outcome must be one of {sorted(OUTCOME_TAG_PREFIX)}, not {outcome!r}")
    oid = repo.resolve(target)
    ident = encode_component(node_id, "node id") if node_id else oid[:16]
    return repo.tag(OUTCOME_TAG_PREFIX[outcome] + ident, oid)


#: Ids :func:`~got_core.names.encode_component` returns unchanged: its safe characters but the
#: dot (a dot is encoded in some places), not starting with ``-``, within its length limit.
_PLAIN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,199}")


def _encoded(value: str, what: str) -> str:
    """:func:`~got_core.names.encode_component` of ``value``, without its loop over the
    characters of an id it leaves as it is (a derived id, ``bench``, ``success``)."""
    if isinstance(value, str) and _PLAIN_ID.fullmatch(value):
        return value
    return encode_component(value, what)


def _check_fields(node: Node) -> tuple[str, str]:
    """Refuse fields of the wrong type before anything is derived or written; returns the
    problem id and the outcome encoded (``""`` when empty), as the trailers hold them."""
    if not isinstance(node, Node):
        raise InvalidInputError(f"commit_node needs a Node, not {type(node).__name__}")
    encoded = []
    for name in ("problem_id", "outcome", "node_id"):
        value = getattr(node, name)
        if not isinstance(value, str):
            raise InvalidNameError(f"node {name} must be text (str), not {type(value).__name__}")
        # valid Unicode, not too long
        encoded.append(_encoded(value, f"node {name.replace('_', ' ')}") if value else "")
    if isinstance(node.depth, bool) or not isinstance(node.depth, int):
        raise InvalidInputError(f"node depth must be an int, not {type(node.depth).__name__}")
    for name in ("scores", "metadata"):
        if not isinstance(getattr(node, name), Mapping):
            raise InvalidInputError(f"node {name} must be a mapping, not {type(getattr(node, name)).__name__}")
    if not isinstance(node.trace, (list, tuple)) or not all(isinstance(s, Mapping) for s in node.trace):
        raise InvalidInputError("node trace must be a list of mappings (one per step)")
    return encoded[0], encoded[1]


def node_message(node: Node, node_id: str, thought: str) -> str:
    """The structured commit message of a node: summary, thought, ``Got-*`` trailers."""
    problem = encode_component(node.problem_id, "problem id") if node.problem_id else ""
    outcome = encode_component(node.outcome, "outcome") if node.outcome else ""
    head, tail = _message_parts(node, thought, problem, outcome)
    return f"node {node_id}{head}Got-Node: {node_id}\n{tail}"


def _message_parts(node: Node, thought: str, problem: str, outcome: str) -> tuple[str, str]:
    """A node's message around its id (``"node " + id + head + "Got-Node: " + id + "\\n" + tail``):
    the parts that do not depend on the parents, so a retried write renders them once.
    ``problem`` and ``outcome`` come encoded."""
    body = thought.strip()
    first = body.split("\n", 1)[0][:72] or "(empty thought)"
    score = node.scores.get("s_comb")
    lines = []
    if problem:
        lines.append(f"Got-Problem: {problem}")
    lines.append(f"Got-Depth: {int(node.depth)}")
    if outcome:
        lines.append(f"Got-Outcome: {outcome}")
    if isinstance(score, (int, float)):
        lines.append(f"Got-Score: {float(score):.6f}")
    return f": {first}\n\n{body[:4000]}\n\n", "\n".join(lines) + "\n"


def _file_bytes(text: str, path: str, limit: int) -> bytes:
    """One of a node's files as bytes (UTF-8), within the repository's file size limit.

    Raises:
        InvalidInputError: text that is not valid Unicode (a lone surrogate).
        PayloadTooLargeError: over ``limit``.
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(f"content of {path} is not valid Unicode text") from None
    if len(data) > limit:
        raise PayloadTooLargeError(f"file {path}", len(data), limit)
    return data


def _decoded_id(value: Any) -> str:
    """A stored (encoded) id back as the caller gave it; ids we did not write stay as stored."""
    if not isinstance(value, str):
        return ""
    try:
        return decode_component(value)
    except InvalidNameError:
        return value


def read_node(repo: ReasoningRepo, rev: str) -> Node:
    """Replay: the whole node at a SHA, tag, branch or node id.

    Raises:
        UnknownRefError: no such revision.
        CorruptRepositoryError: the commit is not a node or its files do not parse.
    """
    oid = repo.resolve(rev)
    commit = repo.git.read_commit(oid)
    files = {p: repo.git.read_blob(b) for p, b in repo.git.tree_files(commit.tree).items() if p in NODE_FILES}
    if "thought.md" not in files:
        raise CorruptRepositoryError(f"{rev} ({oid[:12]}) is not a reasoning node (no thought.md)")
    try:
        scores = json.loads(files.get("scores.json", b"{}") or b"{}")
        meta = json.loads(files.get("metadata.json", b"{}") or b"{}")
        trace = [
            json.loads(line) for line in files.get("trace.jsonl", b"").decode("utf-8").splitlines() if line.strip()
        ]
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CorruptRepositoryError(f"node {oid[:12]} has unreadable files: {exc}") from None
    depth = meta.get("depth", 0) if isinstance(meta, dict) else None
    if (
        not isinstance(scores, dict)
        or not isinstance(meta, dict)
        or not all(isinstance(s, dict) for s in trace)
        or isinstance(depth, bool)
        or not isinstance(depth, int)
        or not all(isinstance(meta.get(k, ""), str) for k in ("problem_id", "outcome", "node_id"))
    ):
        raise CorruptRepositoryError(
            f"node {oid[:12]} has files of the wrong shape (scores.json and metadata.json must be objects, "
            "trace.jsonl one object per line, depth a number); it was not written by GitOfThoughts"
        )
    return Node(
        thought=files["thought.md"].decode("utf-8", "replace"),
        scores=scores,
        trace=trace,
        metadata=meta,
        problem_id=meta.get("problem_id", ""),
        depth=depth,
        outcome=meta.get("outcome", ""),
        node_id=_decoded_id(meta.get("node_id", "")),
        oid=oid,
        parents=commit.parents,
        note=note_json(repo, oid),
        tags=repo.tags_at(oid),
    )
