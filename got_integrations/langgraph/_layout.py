"""How LangGraph state is laid out in git: names, file framing, readable renderings.

Pure functions (no repository access), shared by the checkpointer, the store and the
CLI. Every id that reaches a ref or a tree path goes through :func:`id_component`
(:func:`got_core.names.encode_component`, or a hash when the id is too long).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

# imported here, not on first use: a cold read's first segment should not pay for the import
import msgpack  # a LangGraph dependency (the langgraph extra)

from got_core.errors import CorruptRepositoryError, InvalidInputError, InvalidNameError
from got_core.names import decode_component, encode_component

__all__ = [
    "BUCKET",
    "CARRIED",
    "FORMAT",
    "LRU",
    "SEGMENT",
    "THREADS_REF",
    "Listing",
    "ThreadRef",
    "blob_sha",
    "channel_dir",
    "check_checkpoint_doc",
    "check_writes_doc",
    "decode_exact",
    "decode_id",
    "dump_json",
    "elem_path",
    "encode_exact",
    "fast_json",
    "frame",
    "id_component",
    "join_msgpack_array",
    "json_roundtrips",
    "jsonable",
    "message_summary",
    "ns_component",
    "one_line",
    "pack_segment",
    "parse_json",
    "render_json",
    "segment_path",
    "segment_ranges",
    "segments_dir",
    "split_msgpack_array",
    "task_file",
    "text_id",
    "unframe",
    "unpack_segment",
    "writes_bucket",
    "writes_path",
    "writes_stem",
]

#: Where thread refs live (outside refs/heads: no `git branch` noise, no shared locks).
THREADS_REF = "refs/got/threads/"
#: Version tag written into every checkpoint.json.
FORMAT = "got-langgraph-checkpoint/1"
#: List elements per directory (keeps every tree object small as a list grows).
BUCKET = 100
#: Elements per small segment (the open bucket); a full bucket has one segment of BUCKET elements.
SEGMENT = 10
#: Type tag of a segment file.
SEGMENT_TAG = "got-segment/1"
_ROOT = "root"
#: A checkpoint tree's directory of its parent's writes a running graph handed over (``<task id>.json``,
#: as in ``pending/``); '~' is never part of an encoded id, so no channel directory is named so.
CARRIED = "parent~writes"
_RESERVED = {"checkpoint.json": "%63heckpoint.json", "checkpoint.bin": "%63heckpoint.bin"}


def text_id(value: Any, what: str) -> str:
    """An id as the text that names it: strings as they are, numbers and UUIDs as ``str()``.

    Raises:
        InvalidNameError: bytes (their ``repr()`` would be stored instead of the id; LangGraph
            itself hands savers string ids, and its stores refuse bytes namespace labels).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidNameError(f"{what} must be text, not bytes ({bytes(value)[:40]!r}); decode it first")
    return str(value)


def id_component(value: str, what: str) -> str:
    """One ref/path component for an id: reversible encoding, or ``%x<sha256>`` when too long.

    Raises:
        InvalidNameError: empty, not a string, or not valid Unicode.
    """
    if not isinstance(value, str) or not value:
        raise InvalidNameError(f"{what} must be a non-empty string, not {value!r:.60}")
    # exact strings only through the cache: a str subclass could compare equal yet encode otherwise
    return _id_component(value, what) if type(value) is str else _id_component.__wrapped__(value, what)


@functools.lru_cache(maxsize=8192)  # every put and put_writes names the same few ids again; errors are not cached
def _id_component(value: str, what: str) -> str:
    try:
        return encode_component(value, what)
    except InvalidNameError:
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidNameError(f"{what} holds characters that are not valid Unicode") from None
        # Only length is left. '%x' is never produced by encode_component (it emits %XX, uppercase hex).
        return "%x" + hashlib.sha256(raw).hexdigest()[:40]


def ns_component(ns: str) -> str:
    """The ref component of a checkpoint namespace (``""`` is ``root``)."""
    if ns == "":
        return _ROOT
    if ns == _ROOT:
        return "%72oot"  # 'r' percent-encoded: decodes to "root", never the root namespace
    return id_component(ns, "checkpoint namespace")


def decode_id(component: str, *, namespace: bool = False) -> str | None:
    """Reverse :func:`id_component` / :func:`ns_component`; None for a hashed (long) id."""
    if namespace and component == _ROOT:
        return ""
    if component.startswith("%x"):
        return None
    return decode_component(component)


def channel_dir(name: str) -> str:
    """The top-level directory of a channel in a checkpoint tree."""
    comp = id_component(name, "channel name")
    return _RESERVED.get(comp, comp)


@dataclass(frozen=True)
class ThreadRef:
    """One (thread, namespace) pair and the refs that hold it."""

    thread_id: str
    checkpoint_ns: str

    @functools.cached_property  # every put and put_writes names its refs: encode the ids once
    def prefix(self) -> str:
        """``refs/got/threads/<thread>/<ns>/``."""
        return f"{THREADS_REF}{id_component(self.thread_id, 'thread id')}/{ns_component(self.checkpoint_ns)}/"

    @property
    def head(self) -> str:
        """The ref of the line holding the latest checkpoint."""
        return self.prefix + "head"

    @property
    def writes(self) -> str:
        """The single pending-writes ref an earlier saver kept for the whole namespace (read only)."""
        return self.prefix + "writes"

    @property
    def pending_prefix(self) -> str:
        """``.../pending/``: one ref per checkpoint that has pending writes."""
        return self.prefix + "pending/"

    def pending(self, checkpoint_id: str) -> str:
        """The ref holding a checkpoint's pending writes (one ``<task id>.json`` per task)."""
        return self.pending_prefix + id_component(checkpoint_id, "checkpoint id")

    def fork(self, checkpoint_id: str) -> str:
        """A fork ref named after a checkpoint id."""
        return self.prefix + "forks/" + id_component(checkpoint_id, "checkpoint id")


# ---------------------------------------------------------------------------- bytes
def blob_sha(data: bytes) -> str:
    """Git's object id of a blob, computed locally (so unchanged files need no write)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def frame(typed: tuple[str, bytes]) -> bytes:
    """A serializer result as one file: ``<type tag>\\n<bytes>``."""
    tag, data = typed
    if not isinstance(tag, str) or "\n" in tag or not tag.isascii():
        raise InvalidInputError(f"serializer type tag {tag!r:.40} is not a one-line ASCII name")
    return tag.encode("ascii") + b"\n" + bytes(data)


def unframe(data: bytes, what: str = "a .bin file") -> tuple[str, bytes]:
    """Reverse :func:`frame`.

    Raises:
        CorruptRepositoryError: no type tag line, or one that is not a short ASCII name.
    """
    tag, sep, payload = data.partition(b"\n")
    if not sep or not tag or len(tag) > 200 or not tag.isascii():
        raise CorruptRepositoryError(f"{what} has no type tag line; it is not what the saver wrote")
    return tag.decode("ascii"), payload


def encode_exact(typed: tuple[str, bytes]) -> dict[str, str]:
    """A serializer result inside JSON (type tag + base64)."""
    tag = typed[0]
    if not isinstance(tag, str) or "\n" in tag or not tag.isascii():  # frame()'s check, without its copy
        raise InvalidInputError(f"serializer type tag {tag!r:.40} is not a one-line ASCII name")
    return {"type": tag, "base64": base64.b64encode(bytes(typed[1])).decode("ascii")}


def decode_exact(data: Any, what: str = "a stored value") -> tuple[str, bytes]:
    """Reverse :func:`encode_exact`.

    Raises:
        CorruptRepositoryError: not a ``{"type", "base64"}`` object of valid base64.
    """
    try:
        tag, text = data["type"], data["base64"]
        if not isinstance(tag, str) or not isinstance(text, str):
            raise TypeError("type and base64 must be strings")
        return tag, base64.b64decode(text, validate=True)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CorruptRepositoryError(f"{what} is damaged ({type(exc).__name__}: {str(exc)[:80]})") from None


# ---------------------------------------------------------------------------- msgpack framing
def split_msgpack_array(buf: bytes) -> list[bytes] | None:
    """The encodings of each element of a msgpack array, or None if ``buf`` is not one array.

    ormsgpack encodes elements independently, so each slice equals the element's own
    encoding: one serializer call for a whole list still yields per-element blobs.
    msgpack's unpacker finds the boundaries: ``skip()`` walks an element without building
    Python objects (ext payloads, e.g. ormsgpack's pydantic and dataclass values, are
    passed over unread) and ``tell()`` gives the offset after it.
    """
    if not buf:
        return None
    # Every limit scales with the input: no valid element can be longer than the buffer.
    unpacker = msgpack.Unpacker(max_buffer_size=len(buf))
    unpacker.feed(buf)
    out = []
    try:
        count = unpacker.read_array_header()  # ValueError when buf is not an array
        start = unpacker.tell()
        for _ in range(count):
            unpacker.skip()
            end = unpacker.tell()
            out.append(buf[start:end])
            start = end
    except (msgpack.UnpackException, ValueError):  # truncated, not msgpack, nested too deep
        return None
    return out if start == len(buf) else None


def join_msgpack_array(items: list[bytes]) -> bytes:
    """One msgpack array from element encodings (the inverse of :func:`split_msgpack_array`)."""
    return msgpack.Packer().pack_array_header(len(items)) + b"".join(items)


# ---------------------------------------------------------------------------- readable renderings
#: Types :func:`jsonable` returns as they are (exact types only: a subclass takes the general path).
_PLAIN = frozenset({str, int, bool, type(None)})
_MAX_DEPTH = 40


def jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-friendly view of a value, for people (the exact bytes are stored apart).

    Plain JSON data (dicts of string keys, lists, strings, numbers) takes a fast path that
    gives what the general one does (:func:`_jsonable`), without a call per string or number.
    """
    if depth < _MAX_DEPTH:  # a level below the depth limit: its elements are rendered, not cut
        kind = type(value)
        if kind in _PLAIN:
            return value
        if kind is dict:
            depth += 1
            return {
                (k if type(k) is str else str(k)): (v if type(v) in _PLAIN else jsonable(v, depth))
                for k, v in value.items()
            }
        if kind is list:
            depth += 1
            return [v if type(v) in _PLAIN else jsonable(v, depth) for v in value]
    return _jsonable(value, depth)


def _jsonable(value: Any, depth: int) -> Any:
    """:func:`jsonable` of any value (the general path)."""
    if depth > _MAX_DEPTH:
        return repr(value)[:200]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v, depth + 1) for v in value), key=repr)
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": len(value), "sha1": hashlib.sha1(bytes(value)).hexdigest()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # pydantic models, LangChain messages
        try:
            data = dump(mode="json")
        except Exception:
            data = {"repr": repr(value)[:2000]}
        if isinstance(data, dict) and isinstance(getattr(value, "type", None), str):
            # messages: drop empty fields so each file shows what the message says
            data = {k: v for k, v in data.items() if v not in (None, "", [], {}) or k == "content"}
        return jsonable(data, depth + 1)
    if hasattr(value, "__dataclass_fields__"):
        return {
            "__type__": type(value).__name__,
            **{k: jsonable(getattr(value, k, None), depth + 1) for k in value.__dataclass_fields__},
        }
    if hasattr(value, "_asdict"):
        return jsonable(value._asdict(), depth + 1)
    if hasattr(value, "value") and hasattr(type(value), "__members__"):  # Enum
        return jsonable(value.value, depth + 1)
    slots = getattr(type(value), "__slots__", None)
    if isinstance(slots, (tuple, list)) and slots:  # e.g. langgraph's Send, Interrupt
        return {
            "__type__": type(value).__name__,
            **{s: jsonable(getattr(value, s, None), depth + 1) for s in slots if hasattr(value, s)},
        }
    if hasattr(value, "__dict__"):
        return {
            "__type__": type(value).__name__,
            **{k: jsonable(v, depth + 1) for k, v in vars(value).items() if not k.startswith("_")},
        }
    return repr(value)[:2000]


def dump_json(data: Any, indent: int = 1, **options: Any) -> bytes:
    """Deterministic JSON as UTF-8 bytes ending in a newline; text that UTF-8 cannot hold
    (lone surrogates) is written as JSON escapes, which parse back to the same string."""
    text = json.dumps(data, indent=indent, sort_keys=True, ensure_ascii=False, **options) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(data, indent=indent, sort_keys=True, ensure_ascii=True, **options) + "\n").encode("ascii")


try:  # a LangSmith dependency, so installed with LangGraph; the standard library otherwise
    import orjson as _orjson
except ImportError:  # pragma: no cover - the langgraph extra installs it
    _orjson = None  # type: ignore[assignment]
_ORJSON_OPTIONS = (_orjson.OPT_INDENT_2 | _orjson.OPT_SORT_KEYS | _orjson.OPT_APPEND_NEWLINE) if _orjson else 0


def fast_json(data: Any) -> bytes:
    """:func:`dump_json` with ``indent=2``, ten times faster: orjson's encoder writes the same
    layout (sorted keys, two-space indent, UTF-8, a final newline); data it cannot take
    (integers beyond 64 bits, non-string keys, lone surrogates) goes to the standard library.
    Only for JSON-native data (the output of :func:`jsonable`, parsed JSON, ids and versions).
    """
    if _orjson is not None:
        try:
            return _orjson.dumps(data, option=_ORJSON_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
    return dump_json(data, indent=2)


def json_roundtrips(data: Any) -> bytes | None:
    """``fast_json(data)`` when parsing it gives back ``data`` exactly (no NaN, tuples, non-string
    keys or types JSON turns into others), else None."""
    if _orjson is not None:
        try:
            encoded = _orjson.dumps(data, option=_ORJSON_OPTIONS)
        except TypeError:
            pass
        else:
            return encoded if _orjson.loads(encoded) == data else None
    try:
        encoded = dump_json(data, indent=2, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return encoded if json.loads(encoded) == data else None


def render_json(value: Any) -> bytes:
    """Readable, deterministic JSON of a value (what ``git diff`` shows), ending in a newline."""
    return fast_json(jsonable(value))


def elem_path(base: str, i: int) -> str:
    """Path stem of list element ``i`` under ``base`` (``base/000/000003``)."""
    return f"{base}/{i // BUCKET:03d}/{i:06d}"


# ---------------------------------------------------------------------------- segments
def segments_dir(base: str) -> str:
    """The directory of a list channel's segments (``base/segments``)."""
    return base + "/segments"


def segment_path(base: str, start: int, count: int) -> str:
    """``base/segments/<start>+<count>.bin``: elements ``start`` to ``start + count - 1`` in one file."""
    return f"{base}/segments/{start:06d}+{count}.bin"


def segment_ranges(length: int) -> list[tuple[int, int]]:
    """The segments a list of ``length`` elements has: one per full bucket, then one per
    :data:`SEGMENT` elements of the open bucket. A cold read takes at most
    ``length / BUCKET + 2 * (BUCKET / SEGMENT - 1)`` blobs of it (segments, then elements)."""
    full = length // BUCKET
    out = [(k * BUCKET, BUCKET) for k in range(full)]
    start = full * BUCKET
    while start + SEGMENT <= length:
        out.append((start, SEGMENT))
        start += SEGMENT
    return out


def pack_segment(items: list[tuple[str, bytes]]) -> bytes:
    """Several list elements (type tag, serializer bytes) in one file: a framed msgpack array of pairs.

    Reading a long list takes a few blobs instead of one per element. An element a
    segment holds has no ``.bin`` of its own unless it had one before the segment was
    written; its ``.json`` rendering stays for ``git diff``.
    """
    return frame((SEGMENT_TAG, msgpack.packb([[tag, bytes(data)] for tag, data in items], use_bin_type=True)))


def unpack_segment(data: bytes, count: int, what: str) -> list[tuple[str, bytes]]:
    """Reverse :func:`pack_segment`, checking it holds ``count`` well-formed elements.

    Raises:
        CorruptRepositoryError: not a segment, not ``count`` elements, or a damaged element.
    """
    tag, payload = unframe(data, what)
    _need(tag == SEGMENT_TAG, what, f"is not a segment (type tag {tag[:40]!r})")
    try:
        # every limit of unpackb scales with the input; raw=False checks the tags are UTF-8
        items = msgpack.unpackb(payload, raw=False, use_list=True)
    except (msgpack.UnpackException, ValueError, TypeError, RecursionError) as exc:
        raise CorruptRepositoryError(f"{what} does not parse ({type(exc).__name__}); run `got fsck`") from None
    _need(isinstance(items, list) and len(items) == count, what, f"does not hold {count} elements")
    out = []
    for item in items:
        _need(
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and 0 < len(item[0]) <= 200
            and item[0].isascii()
            and "\n" not in item[0]
            and isinstance(item[1], bytes),
            what,
            "holds an element that is not a (type tag, bytes) pair",
        )
        out.append((item[0], item[1]))
    return out


def task_file(task_id: str) -> str:
    """``<task id>.json``: a task's writes file in its checkpoint's ``pending/<id>`` tree."""
    return id_component(task_id, "task id") + ".json"


def writes_bucket(checkpoint_id: str) -> str:
    """The directory of a checkpoint's files in the single ``writes`` ref an earlier saver
    kept (2 hex of sha1 of the id); still read, never written."""
    # surrogatepass: a malformed id is refused by id_component, not by this hash
    return hashlib.sha1(checkpoint_id.encode("utf-8", "surrogatepass")).hexdigest()[:2]


def writes_stem(checkpoint_id: str) -> str:
    """``<bucket>/<checkpoint id>~``: every file of a checkpoint in the earlier ``writes`` ref starts with it."""
    return f"{writes_bucket(checkpoint_id)}/{id_component(checkpoint_id, 'checkpoint id')}~"


def writes_path(checkpoint_id: str, task_id: str) -> str:
    """``<bucket>/<checkpoint id>~<task id>.json`` in the earlier ``writes`` ref; '~' is never part of an encoded id."""
    return f"{writes_stem(checkpoint_id)}{id_component(task_id, 'task id')}.json"


def message_summary(message: Any, limit: int = 60) -> str | None:
    """``"<type>: <content or tool calls>"`` for a chat message, None for other values."""
    kind = getattr(message, "type", None)
    if not isinstance(kind, str) or not hasattr(message, "content"):
        return None
    text = message.content if isinstance(message.content, str) else json.dumps(jsonable(message.content))
    if not text.strip():
        calls = getattr(message, "tool_calls", None) or []
        text = ", ".join(f"{c.get('name')}({json.dumps(c.get('args', {}), ensure_ascii=False)})" for c in calls)
    return f"{kind}: {one_line(text or '(empty)', limit)}"


def one_line(text: Any, limit: int = 72) -> str:
    """``text`` on one line, without NUL, cut to ``limit`` characters."""
    text = str(text)
    window = 4 * limit + 64
    if limit > 0 and len(text) > window:
        # a long text (a message's content): its first words decide what is shown. The words
        # of a prefix are a prefix of the words, so when they fill the line, the line is theirs
        head = " ".join(text[:window].replace("\x00", " ").split())
        if len(head) > limit:
            return head[: limit - 1] + "…"
    text = " ".join(text.replace("\x00", " ").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Listing(dict[str, "str | None"]):
    """A checkpoint's files as the saver keeps them in memory: path -> blob id, where None
    marks a path the checkpoint does not have (a tombstone).

    A put starts from its parent's listing: a copy that costs a memcpy when the dict holds no
    deleted slots, and ~8x that once a key was ever popped (CPython then re-inserts every
    entry), on a listing that grows with the thread (a 1,000-message thread has ~1,000 paths).
    So a path that goes is set to None instead of popped; :meth:`copy_for_child` drops the
    tombstones once they are a third of the entries (amortised: a super-step leaves a few).
    Read it with ``get`` (None: absent) and :meth:`live`; never with ``in`` or plain iteration.
    """

    __slots__ = ("dead",)

    def __init__(self, files: dict[str, str] | dict[str, str | None] | None = None, dead: int = 0) -> None:
        super().__init__(files or ())
        self.dead = dead

    def copy_for_child(self) -> Listing:
        """A copy to change for a child checkpoint (tombstones dropped when they are many)."""
        if self.dead > 32 and self.dead * 3 > len(self):
            return Listing({p: s for p, s in self.items() if s is not None})
        return Listing(self, self.dead)

    def set(self, path: str, sha: str) -> bool:
        """Point ``path`` at ``sha``; True when that changed the listing."""
        old = self.get(path)
        if old == sha:
            return False
        if old is None and path in self:
            self.dead -= 1
        self[path] = sha
        return True

    def drop(self, path: str) -> bool:
        """Remove ``path`` (a tombstone); True when it was there."""
        if self.get(path) is None:
            return False
        self[path] = None
        self.dead += 1
        return True

    def live(self) -> dict[str, str]:
        """The paths present, as a plain dict."""
        return {p: s for p, s in self.items() if s is not None}


class LRU:
    """A small thread-safe LRU map bounded by total weight."""

    def __init__(self, max_weight: int) -> None:
        self._data: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._weight = 0
        self._max = max_weight
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        """The value for ``key`` or None."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[0]

    def put(self, key: Any, value: Any, weight: int = 1) -> None:
        """Store ``value``; evicts the least recently used entries beyond the weight budget."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            self._data[key] = (value, weight)
            self._weight += weight
            while self._weight > self._max and len(self._data) > 1:
                _, (_, w) = self._data.popitem(last=False)
                self._weight -= w

    def weight(self, key: Any) -> int | None:
        """The weight ``key`` was stored with, or None (does not count as a use)."""
        with self._lock:
            hit = self._data.get(key)
            return None if hit is None else hit[1]

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._data.clear()
            self._weight = 0


# ---------------------------------------------------------------------------- validating what is read
_KINDS: dict[str, dict[str, type]] = {
    "inline": {"exact": dict},
    "value": {"dir": str},
    "list": {"dir": str, "length": int},
}


def _need(cond: bool, what: str, problem: str) -> None:
    if not cond:
        raise CorruptRepositoryError(f"{what} {problem}; it is not what the saver wrote (run `got fsck`)")


def check_checkpoint_doc(doc: Any, what: str) -> dict[str, Any]:
    """``doc`` (a parsed ``checkpoint.json``) when it has the fields and types the saver writes.

    Raises:
        CorruptRepositoryError: naming ``what`` and the first field that is wrong.
    """
    _need(isinstance(doc, dict), what, "is not a JSON object")
    for key, kind in (
        ("thread_id", str),
        ("checkpoint_ns", str),
        ("checkpoint_id", str),
        ("checkpoint", dict),
        ("channels", dict),
    ):
        _need(isinstance(doc.get(key), kind), what, f"has no valid {key!r}")
    _need(
        doc.get("parent_checkpoint_id") is None or isinstance(doc["parent_checkpoint_id"], str),
        what,
        "has no valid 'parent_checkpoint_id'",
    )
    _need(bool(doc.get("exact")) or isinstance(doc.get("metadata"), dict), what, "has no valid 'metadata'")
    for name, info in doc["channels"].items():
        _need(isinstance(info, dict) and info.get("kind") in _KINDS, what, f"has a bad entry for channel {name!r}")
        for field_name, field_type in _KINDS[info["kind"]].items():
            _need(
                isinstance(info.get(field_name), field_type) and not isinstance(info.get(field_name), bool),
                what,
                f"has a bad {field_name!r} for channel {name!r}",
            )
        _need(
            info["kind"] != "list" or 0 <= info["length"] <= 10_000_000, what, f"has a bad length for channel {name!r}"
        )
    return doc


def check_writes_doc(doc: Any, what: str) -> dict[str, Any]:
    """``doc`` (a parsed writes file) when it has the fields and types the saver writes.

    Raises:
        CorruptRepositoryError: naming ``what`` and the first field that is wrong.
    """
    _need(isinstance(doc, dict), what, "is not a JSON object")
    _need(isinstance(doc.get("task_id"), str), what, "has no valid 'task_id'")
    _need(isinstance(doc.get("task_path", ""), str), what, "has no valid 'task_path'")
    _need(isinstance(doc.get("writes"), list), what, "has no valid 'writes' list")
    for w in doc["writes"]:
        _need(
            isinstance(w, dict)
            and isinstance(w.get("idx"), int)
            and not isinstance(w["idx"], bool)
            and isinstance(w.get("channel"), str)
            and isinstance(w.get("exact"), dict),
            what,
            "has a write without a valid idx, channel and exact value",
        )
    return doc


def parse_json(data: bytes, what: str) -> Any:
    """``json.loads`` of stored bytes.

    Raises:
        CorruptRepositoryError: not UTF-8 JSON (naming ``what``).
    """
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise CorruptRepositoryError(
            f"{what} does not parse as JSON ({str(exc)[:80]}); it is not what the saver wrote"
        ) from None
