"""One chat session as files on one git ref (no llama-index import: the CLI uses it too).

Layout of the ref ``refs/got/sessions/<encoded session id>`` (outside
``refs/heads``, so sessions never clutter ``git branch``; each session has its
own ref, so writers of different sessions never contend)::

    session.json                  {"format", "session_id", "window_start", "seq_floor"}
    messages/0000000001.json      one chat message per file (llama-index's JSON form),
    messages/0000000002.json      numbered in conversation order
    ...

Every write is one commit (a batch of messages, a replacement, a reset) made by
a compare-and-swap on the session ref, retried on a lost race with a fresh read,
so concurrent writers (threads or processes) never lose a message. Messages with
``seq < window_start`` are archived: out of the short-term window, still stored.
A message's stable id is ``<commit>:<path>`` — the commit that wrote it and its
file, which is also git's own object syntax (``git show <id>``).

Commit trailers make the history readable without diffing trees::

    alice: +2 messages (assistant, tool)

    Got-Session: alice
    Got-Op: put
    Got-Added: 7-8
    Got-Window: 3
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from got_core.errors import CorruptRepositoryError, UnknownRefError
from got_core.names import decode_component, encode_component
from got_core.repo import Keep, Publish, ReasoningRepo

__all__ = [
    "FORMAT",
    "MESSAGES_DIR",
    "SESSIONS_PREFIX",
    "SESSION_FILE",
    "SHARD_SIZE",
    "Plan",
    "SessionLog",
    "SessionState",
    "StoredMessage",
    "Write",
    "list_sessions",
    "message_path",
    "session_ref",
]

SESSIONS_PREFIX = "refs/got/sessions/"
SESSION_FILE = "session.json"
MESSAGES_DIR = "messages"
FORMAT = "got.llamaindex.session/1"
#: Messages per directory: a write rewrites one small subtree, not a tree of the whole
#: conversation (tree bytes written per commit are the main write cost, ARCHITECTURE §6).
SHARD_SIZE = 100
_SEQ_WIDTH = 8
_MESSAGE_NAME = re.compile(rf"^(\d{{{_SEQ_WIDTH},}})\.json$")
_SHARD_NAME = re.compile(rf"^\d{{{_SEQ_WIDTH},}}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def session_ref(session_id: str) -> str:
    """The ref holding ``session_id`` (the id is percent-encoded, reversibly).

    Raises:
        InvalidNameError: an empty or over-long session id.
    """
    return SESSIONS_PREFIX + encode_component(session_id, "session id")


def message_path(seq: int) -> str:
    """Path of message number ``seq``: ``messages/<first number of its hundred>/<seq>.json``,
    zero-padded so git lists them in conversation order."""
    shard = seq // SHARD_SIZE * SHARD_SIZE
    return f"{MESSAGES_DIR}/{shard:0{_SEQ_WIDTH}d}/{seq:0{_SEQ_WIDTH}d}.json"


def _seq_of(path: str) -> int | None:
    match = _MESSAGE_NAME.match(path.rpartition("/")[2])
    return int(match.group(1)) if match else None


def list_sessions(repo: ReasoningRepo) -> dict[str, str]:
    """Every session in ``repo``: session id -> tip commit."""
    out = {}
    for ref, oid in repo.refs(SESSIONS_PREFIX).items():
        name = ref[len(SESSIONS_PREFIX) :]
        if "/" in name:
            continue
        out[decode_component(name)] = oid
    return dict(sorted(out.items()))


def _dump(data: Any) -> str:
    # Two-space indented JSON so `git diff` between turns is line by line.
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


@dataclass(frozen=True)
class StoredMessage:
    """One stored message: its number, file, blob and JSON payload."""

    seq: int
    path: str
    blob: str
    data: dict[str, Any]
    archived: bool

    @property
    def role(self) -> str:
        """The message's role (``user``, ``assistant``, ``tool``, ``system``...)."""
        return str(self.data.get("role", ""))


@dataclass(frozen=True)
class SessionState:
    """What a session's tip holds (message contents are read on demand).

    Attributes:
        session_id: the session.
        tip: the commit read (None: the session has no commit yet).
        window_start: messages numbered below it are archived.
        seq_floor: numbers below it are never reused (after a reset or replacement).
        blobs: message number -> blob SHA, for every listed message.
        archived_extra: numbers at or above ``window_start`` added as archived explicitly.
        complete: every message is listed (else only the newest shards, see :meth:`SessionLog.state`).
    """

    session_id: str
    tip: str | None
    window_start: int = 1
    seq_floor: int = 1
    blobs: dict[int, str] = field(default_factory=dict)
    archived_extra: frozenset[int] = frozenset()
    complete: bool = True

    @property
    def seqs(self) -> list[int]:
        """Every listed message number, oldest first (all of them when ``complete``)."""
        return sorted(self.blobs)

    @property
    def next_seq(self) -> int:
        """The number the next message gets."""
        return max(self.seq_floor, max(self.blobs, default=0) + 1)

    def is_archived(self, seq: int) -> bool:
        """Whether message ``seq`` is out of the short-term window."""
        return seq < self.window_start or seq in self.archived_extra


@dataclass
class Plan:
    """One write: the commit a :meth:`SessionLog.write` planner asks for.

    Attributes:
        op: what kind of write (``put``, ``set``, ``reset``, ``archive``, ``delete``).
        add: message payloads to append, in order (numbered from ``next_seq``).
        delete: message numbers to remove.
        window_start: the new window start (None: unchanged).
        seq_floor: the new floor for message numbers (None: unchanged).
        archived_extra: the new set of explicitly archived numbers (None: unchanged).
        result: anything the planner wants handed back to its caller.
    """

    op: str
    add: list[dict[str, Any]] = field(default_factory=list)
    delete: Iterable[int] = ()
    window_start: int | None = None
    seq_floor: int | None = None
    archived_extra: Iterable[int] | None = None
    result: Any = None


@dataclass(frozen=True)
class Write:
    """One commit of a session's history (a turn's write), oldest is number 1."""

    number: int
    commit: str
    time: int
    op: str
    added: tuple[int, ...]
    window_start: int | None
    subject: str


class SessionLog:
    """Reads and writes one session on a :class:`~got_core.repo.ReasoningRepo`.

    Thread-safe: the repository keeps a libgit2 handle per thread, and the blob
    cache is guarded by a lock.

    Args:
        repo: the repository.
        session_id: the session (any non-empty string; encoded for the ref).
        validate: called on every message payload read back (once per blob); whatever it
            raises marks the file damaged (the chat store passes llama-index's own model
            validation, so a stored file that no longer makes a ``ChatMessage`` is caught
            where it is read, with its path).

    Raises:
        InvalidNameError: an unusable session id.
    """

    def __init__(
        self, repo: ReasoningRepo, session_id: str, validate: Callable[[dict[str, Any]], Any] | None = None
    ) -> None:
        self.repo = repo
        self.session_id = session_id
        self.ref = session_ref(session_id)
        self._validate = validate
        self._cache: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reading
    def tip(self) -> str | None:
        """The session's newest commit, or None when it was never written."""
        return self.repo.tip(self.ref)

    def require(self) -> str:
        """The tip of an existing session.

        Raises:
            UnknownRefError: the session was never written (the message lists the known ones).
        """
        tip = self.tip()
        if tip is None:
            known = ", ".join(list(list_sessions(self.repo))[:10]) or "none yet"
            raise UnknownRefError(
                f"no session {self.session_id!r} in {self.repo.gitdir} (known: {known}); "
                "check the id, or write to it first"
            )
        return tip

    def state(self, tip: str | Any | None = ..., *, full: bool = True) -> SessionState:
        """The session's state at ``tip`` (default: the current tip).

        Args:
            tip: the commit to read.
            full: list every message; when false only the short-term window and the
                newest messages are listed (what appending needs, at a cost independent
                of the session's length).

        Raises:
            CorruptRepositoryError: ``session.json`` is damaged or a path is not ours.
        """
        if tip is ...:
            tip = self.tip()
        if tip is None:
            return SessionState(self.session_id, None)
        try:
            raw = self.repo.read_file(tip, SESSION_FILE)
            meta = json.loads(raw.decode("utf-8"))
            window_start = int(meta["window_start"])
            seq_floor = int(meta.get("seq_floor", 1))
            extra = frozenset(int(s) for s in meta.get("archived", ()))
        except UnknownRefError:
            raise CorruptRepositoryError(
                f"session {self.session_id!r}: commit {tip[:12]} on {self.ref} has no {SESSION_FILE}; "
                "the ref was moved by another tool — point it back at a session commit "
                "(`git log` on the ref lists them)"
            ) from None
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError) as exc:
            raise CorruptRepositoryError(
                f"session {self.session_id!r}: {SESSION_FILE} in {tip[:12]} is damaged ({exc}); "
                f"restore it from an earlier commit (git show {tip[:12]}~1:{SESSION_FILE})"
            ) from None
        blobs: dict[int, str] = {}
        shards = []
        for name, is_dir in self.repo.list_dir(tip, MESSAGES_DIR):
            if not is_dir or not _SHARD_NAME.match(name):
                raise self._stray(tip, f"{MESSAGES_DIR}/{name}")
            shards.append(int(name))
        shards.sort()
        # The window and the next number live in the newest shards: list only those,
        # unless every message is wanted (a replacement, a full read).
        keep = [s for i, s in enumerate(shards) if full or i == len(shards) - 1 or s + SHARD_SIZE > window_start]
        for shard in keep:
            for path, blob in self.repo.list_files(tip, f"{MESSAGES_DIR}/{shard:0{_SEQ_WIDTH}d}").items():
                seq = _seq_of(path)
                if seq is None or message_path(seq) != path:
                    raise self._stray(tip, path)
                blobs[seq] = blob
        return SessionState(self.session_id, tip, window_start, seq_floor, blobs, extra, complete=full)

    def _stray(self, tip: str, path: str) -> CorruptRepositoryError:
        return CorruptRepositoryError(
            f"session {self.session_id!r}: unexpected entry {path!r} in {tip[:12]}; only numbered "
            f"message files belong under {MESSAGES_DIR}/ (restore the ref to an earlier commit)"
        )

    def load(self, state: SessionState, seqs: Iterable[int]) -> list[StoredMessage]:
        """The stored messages ``seqs`` of ``state``, oldest first (payloads cached by blob).

        Raises:
            CorruptRepositoryError: a message file is not a JSON chat message.
        """
        out = []
        for seq in sorted(seqs):
            blob = state.blobs[seq]
            with self._lock:
                data = self._cache.get(blob)
            if data is None:
                data = self._parse(state, seq, self.repo.read_blob(blob))
                with self._lock:
                    self._cache[blob] = data
            out.append(StoredMessage(seq, message_path(seq), blob, data, state.is_archived(seq)))
        return out

    def _parse(self, state: SessionState, seq: int, raw: bytes) -> dict[str, Any]:
        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("role"), str):
                raise ValueError("not an object with a 'role'")
            if self._validate is not None:
                self._validate(data)
        except Exception as exc:
            where = state.tip[:12] if state.tip else "?"
            raise CorruptRepositoryError(
                f"session {self.session_id!r}: {message_path(seq)} in {where} is not a stored chat "
                f"message ({type(exc).__name__}: {str(exc)[:160]}); restore it from the commit that wrote it "
                f"(`got session log {self.session_id}`)"
            ) from None
        return data

    def messages(self, state: SessionState | None = None, *, archived: bool | None = None) -> list[StoredMessage]:
        """Messages of ``state`` (default: the tip): all, only archived, or only active ones."""
        state = state if state is not None else self.state()
        seqs = [s for s in state.seqs if archived is None or state.is_archived(s) == archived]
        return self.load(state, seqs)

    # ------------------------------------------------------------------ writing
    def write(self, planner: Callable[[SessionState], Plan | None], *, full: bool = True) -> tuple[str | None, Any]:
        """Make one commit from ``planner(state)``; a lost race re-reads and re-plans.

        The planner must be a pure function of the state it is given (it may run
        more than once). Returning None, or a plan that changes nothing, writes nothing.
        ``full=False`` hands it a state listing only the newest messages (see :meth:`state`).

        Returns:
            ``(commit or None, plan.result)``.

        Raises:
            ConcurrentUpdateError: the ref kept moving beyond the repository's retry budget.
            CorruptRepositoryError: the session's files are damaged (nothing is written).
        """

        def build(tip: str | None) -> Publish | Keep:
            state = self.state(tip, full=full)
            plan = planner(state)
            if plan is None:
                return Keep((None, None))
            changes, message = self._changes(state, plan)
            if not changes:
                return Keep((None, plan.result))
            oid = self.repo.prepare_commit([tip] if tip else [], changes, message)
            return Publish(oid, (oid, plan.result))

        return self.repo.update_ref(self.ref, build)

    def _changes(self, state: SessionState, plan: Plan) -> tuple[dict[str, str | None], str]:
        changes: dict[str, str | None] = {}
        deleted = set(plan.delete)
        for seq in deleted:
            if seq in state.blobs:
                changes[message_path(seq)] = None
        start = state.next_seq if plan.seq_floor is None else max(state.next_seq, plan.seq_floor)
        added = list(range(start, start + len(plan.add)))
        roles = []
        for seq, payload in zip(added, plan.add):
            changes[message_path(seq)] = _dump(payload)
            roles.append(str(payload.get("role", "?")))
        window = state.window_start if plan.window_start is None else plan.window_start
        floor = state.seq_floor if plan.seq_floor is None else plan.seq_floor
        extra = state.archived_extra if plan.archived_extra is None else frozenset(plan.archived_extra)
        meta = {"format": FORMAT, "session_id": self.session_id, "window_start": window, "seq_floor": floor}
        if extra:
            meta["archived"] = sorted(extra)
        meta_changed = (
            state.tip is None
            or window != state.window_start
            or floor != state.seq_floor
            or extra != state.archived_extra
        )
        if meta_changed:
            changes[SESSION_FILE] = _dump(meta)
        if not changes:
            return {}, ""
        return changes, self._message(plan.op, roles, added, deleted & set(state.blobs), window)

    def _message(self, op: str, roles: Sequence[str], added: Sequence[int], deleted: set[int], window: int) -> str:
        label = _CONTROL.sub(" ", self.session_id)[:80]
        parts = []
        if added:
            parts.append(f"+{len(added)} message{'s' if len(added) != 1 else ''} ({', '.join(roles)})")
        if deleted:
            parts.append(f"-{len(deleted)} message{'s' if len(deleted) != 1 else ''}")
        if not parts:
            parts.append(f"window from #{window}")
        lines = [
            f"{label}: {'; '.join(parts)}",
            "",
            f"Got-Session: {encode_component(self.session_id)}",
            f"Got-Op: {op}",
        ]
        if added:
            lines.append(f"Got-Added: {added[0]}-{added[-1]}")
        lines.append(f"Got-Window: {window}")
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ history
    def history(self) -> list[Write]:
        """Every write of the session, oldest first (number 1 is the first write).

        Raises:
            UnknownRefError: the session does not exist.
        """
        tip = self.require()
        infos = self.repo.log(tip, decorate=False)
        writes = []
        for number, info in enumerate(reversed(infos), start=1):
            trailers = info.trailers()
            added: tuple[int, ...] = ()
            if "Added" in trailers:
                lo, _, hi = trailers["Added"].partition("-")
                try:
                    added = tuple(range(int(lo), int(hi or lo) + 1))
                except ValueError:
                    added = ()
            window = trailers.get("Window")
            writes.append(
                Write(
                    number,
                    info.oid,
                    info.time,
                    trailers.get("Op", "?"),
                    added,
                    int(window) if window and window.isdigit() else None,
                    info.message.splitlines()[0] if info.message else "",
                )
            )
        return writes

    def message_ids(self) -> dict[int, str]:
        """Message number -> stable id ``<commit>:<path>`` (the commit that wrote it)."""
        ids: dict[int, str] = {}
        for write in self.history():
            for seq in write.added:
                ids[seq] = f"{write.commit}:{message_path(seq)}"
        return ids
