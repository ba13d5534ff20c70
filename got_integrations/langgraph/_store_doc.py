"""The store's item documents: names, paths, validation, encoding, filters.

Pure functions and one codec class, no repository access: what an item file is, how it
is written and read back, and how LangGraph's filters and namespace conditions match.
:mod:`got_integrations.langgraph.store` (the verbs) and
:mod:`got_integrations.langgraph._store_index` (the derived index) share them.

An item file, at ``ns.<h>/<h>/<h>/<label 1>/.../<key>.json`` (each label and the key
through :func:`~got_integrations.langgraph._layout.id_component`; the three ``<h>`` are the
first hex digits of a hash of the namespace's directory, see :func:`namespace_dir`)::

    {"namespace", "key", "value" | "exact", "created_at", "updated_at", "ttl", "expires_at", "index"}

Stores written before the fan-out hold items at ``<label 1>/.../<key>.json`` (the
*legacy* layout, :func:`legacy_item_path`); readers accept both, and a store's first
write moves the legacy files (``_store_migrate``).
"""

from __future__ import annotations

import dataclasses
import decimal
import hashlib
import json
import math
import pathlib
import re
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import InvalidNamespaceError, MatchCondition

from got_core.errors import CorruptRepositoryError, InvalidInputError, InvalidNameError
from got_integrations.langgraph._layout import decode_exact, dump_json, encode_exact, id_component, parse_json
from got_integrations.langgraph._serde import UnsafePayloadError, safe_loads

__all__ = [
    "EPOCH",
    "InvalidStoreNameError",
    "ItemCodec",
    "check_item",
    "check_key",
    "check_namespace",
    "check_placement",
    "dump",
    "is_bucket",
    "item_path",
    "key_blob",
    "legacy_item_path",
    "loads_value",
    "matches",
    "matches_filter",
    "namespace_dir",
    "ns_blob",
    "ns_from_blob",
    "to_us",
    "utc_now",
    "value_json",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


class InvalidStoreNameError(InvalidNameError, InvalidNamespaceError):
    """A namespace label or key the store cannot use (empty, not text, a '.' or NUL in a label)."""


def utc_now(clock: Callable[[], datetime]) -> datetime:
    """``clock()``, read as UTC when it has no timezone."""
    now = clock()
    return now if now.tzinfo else now.replace(tzinfo=UTC)


def to_us(moment: datetime | str) -> int:
    """Microseconds since the epoch, exactly (no float rounding at the boundary of an expiry)."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // _US


# ---------------------------------------------------------------------------- names and paths
def check_key(key: Any) -> None:
    """Refuse bytes keys (their ``repr()`` would be stored instead).

    Raises:
        InvalidStoreNameError: ``key`` is bytes.
    """
    if isinstance(key, (bytes, bytearray, memoryview)):
        raise InvalidStoreNameError(f"store keys are text, not bytes ({bytes(key)[:40]!r}); decode the key first")


def check_namespace(namespace: Any, *, allow_empty: bool) -> tuple[str, ...]:
    """``namespace`` when it is a tuple of labels LangGraph allows.

    Raises:
        InvalidStoreNameError: not a tuple, empty (unless ``allow_empty``), or a label that is
            empty, not text, or holds ``.`` or NUL.
    """
    if not isinstance(namespace, tuple) or (not namespace and not allow_empty):
        raise InvalidStoreNameError(f"a namespace is a non-empty tuple of strings, not {namespace!r:.80}")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidStoreNameError(
                f"namespace labels are non-empty strings; got {label!r:.80} in {namespace!r:.80}"
            )
        if "." in label or "\x00" in label:
            raise InvalidStoreNameError(f"namespace label {label!r:.80} contains '.' or NUL (LangGraph forbids both)")
    return namespace


#: Hex digits of the namespace hash, one directory level each (16 entries a level: 4,096
#: buckets, so a put rewrites trees of about 16 entries whatever the number of namespaces).
FANOUT_LEVELS = 3
#: The first fan-out level's names start so (a label never holds ``.``, an item file ends in
#: ``.json``): a root entry is a bucket or a legacy namespace directory, never both.
BUCKET_PREFIX = "ns."


@lru_cache(maxsize=4096)
def _ns_dir(namespace: tuple[str, ...]) -> str:
    return "/".join(id_component(label, "namespace label") for label in namespace)


@lru_cache(maxsize=4096)
def namespace_dir(namespace: tuple[str, ...]) -> str:
    """The tree directory of a namespace's items: ``ns.<h>/<h>/<h>/<labels...>``.

    The ``<h>`` are the first :data:`FANOUT_LEVELS` hex digits of the SHA-256 of the
    labels' directory (``memories/user5``), so the namespaces spread over 4,096 small
    directories and a write never rewrites one listing every namespace; the labels stay
    readable below: ``git log <ref> -- ':(glob)ns.*/*/*/memories/user5/**'`` lists that
    namespace's commits (or give :meth:`GitStore.namespace_path`'s answer as the path).

    Raises:
        InvalidNameError: a label that cannot be a path component.
    """
    labels = _ns_dir(namespace)
    digits = hashlib.sha256(labels.encode("utf-8", "surrogatepass")).hexdigest()[:FANOUT_LEVELS]
    return BUCKET_PREFIX + "/".join(digits) + "/" + labels


def is_bucket(name: str) -> bool:
    """Whether a root entry of the store's tree is a fan-out bucket (else a legacy namespace directory)."""
    return name.startswith(BUCKET_PREFIX)


def _key_file(key: str) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidStoreNameError(f"a key is a non-empty string, not {key!r:.80}")
    return id_component(key, "key") + ".json"


def item_path(namespace: tuple[str, ...], key: str) -> str:
    """The tree path of an item (labels and key encoded; over-long ones hashed).

    Raises:
        InvalidStoreNameError: an empty key or one that is not text.
    """
    try:
        return namespace_dir(namespace) + "/" + _key_file(key)
    except InvalidNameError as exc:
        if isinstance(exc, InvalidStoreNameError):
            raise
        raise InvalidStoreNameError(str(exc)) from None


def legacy_item_path(namespace: tuple[str, ...], key: str) -> str:
    """Where a store written before the fan-out keeps an item (``<labels...>/<key>.json``).

    Raises:
        InvalidStoreNameError: see :func:`item_path`.
    """
    try:
        return _ns_dir(namespace) + "/" + _key_file(key)
    except InvalidNameError as exc:
        if isinstance(exc, InvalidStoreNameError):
            raise
        raise InvalidStoreNameError(str(exc)) from None


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@lru_cache(maxsize=4096)
def ns_blob(namespace: tuple[str, ...]) -> bytes:
    """A namespace as index bytes: labels joined by NUL (which no label holds).

    Byte order of these equals Python's order of the tuples (UTF-8 keeps code point order
    and NUL sorts first), and the items under a prefix ``p`` are those equal to ``p`` or
    starting with ``p + b"\\x00"``: one range of the index serves both.
    """
    return b"\x00".join(_utf8(label) for label in namespace)


def ns_from_blob(data: bytes) -> tuple[str, ...]:
    """Reverse :func:`ns_blob`."""
    return tuple(part.decode("utf-8", "surrogatepass") for part in bytes(data).split(b"\x00"))


def key_blob(key: str) -> bytes:
    """A key as index bytes (keys may hold NUL and lone surrogates, which SQLite text cannot)."""
    return _utf8(key)


# ---------------------------------------------------------------------------- item documents
def _iso(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def check_item(doc: Any, what: str) -> dict[str, Any]:
    """A parsed item file when it has the fields and types the store writes.

    Raises:
        CorruptRepositoryError: naming ``what`` and the first field that is wrong.
    """

    def need(cond: bool, problem: str) -> None:
        if not cond:
            raise CorruptRepositoryError(f"{what} {problem}; it is not what the store wrote (run `got fsck`)")

    need(isinstance(doc, dict), "is not a JSON object")
    need(
        isinstance(doc.get("namespace"), list)
        and bool(doc["namespace"])
        and all(isinstance(x, str) for x in doc["namespace"]),
        "has no valid 'namespace'",
    )
    need(isinstance(doc.get("key"), str), "has no valid 'key'")
    need(isinstance(doc.get("value"), dict) or isinstance(doc.get("exact"), dict), "has no valid 'value'")
    need(_iso(doc.get("created_at")) and _iso(doc.get("updated_at")), "has no valid timestamps")
    ttl = doc.get("ttl")
    need(
        ttl is None or (isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and math.isfinite(ttl)),
        "has no valid 'ttl'",
    )
    need(doc.get("expires_at") is None or _iso(doc["expires_at"]), "has no valid 'expires_at'")
    index = doc.get("index")
    need(
        index is None or index is False or (isinstance(index, list) and all(isinstance(i, str) for i in index)),
        "has no valid 'index'",
    )
    return doc


def check_placement(doc: dict[str, Any], path: str, what: str) -> None:
    """Refuse an item file whose namespace and key do not name the path it sits at.

    Raises:
        CorruptRepositoryError: a planted or moved file (it would answer for another item).
    """
    try:
        namespace = check_namespace(tuple(doc["namespace"]), allow_empty=False)
        expected = item_path(namespace, doc["key"])
        if expected != path and not is_bucket(path) and legacy_item_path(namespace, doc["key"]) == path:
            return  # written before the fan-out: still its place until the store moves it
    except InvalidStoreNameError as exc:
        raise CorruptRepositoryError(f"{what} names an invalid namespace or key ({exc})") from None
    if expected != path:
        raise CorruptRepositoryError(
            f"{what} says it is item {doc['key']!r:.60} of {tuple(doc['namespace'])!r:.80}, which lives at "
            f"{expected[:120]!r}; the file was moved or planted (run `got fsck`)"
        )


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (uuid.UUID, decimal.Decimal, pathlib.PurePath)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def value_json(value: Any) -> str:
    """A value as compact ASCII JSON: what a reader of its item file gets back, ready for SQLite
    (keys sorted, as in the file, so the row a write hands over is the row a rebuild reads)."""
    return json.dumps(
        value, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=_json_default, sort_keys=True
    )


#: A run of 19 digits: a number orjson may not read exactly (it reads integers beyond 64 bits as
#: floats, silently), so such a value is read by the standard library instead.
_LONG_NUMBER = re.compile(r"[0-9]{19}")
_LONG_NUMBER_BYTES = re.compile(rb"[0-9]{19}")

try:  # orjson comes with LangGraph's SDK; the standard library reads what it refuses
    import orjson as _orjson

    def loads_value(text: str | bytes) -> Any:
        """Parse a value stored by :func:`value_json` (integers of any size read back exactly)."""
        long = _LONG_NUMBER.search(text) if isinstance(text, str) else _LONG_NUMBER_BYTES.search(text)
        if long is None:
            try:
                return _orjson.loads(text)
            except _orjson.JSONDecodeError:  # lone surrogates
                pass
        return json.loads(text)

except ImportError:  # pragma: no cover - orjson is a LangGraph dependency

    def loads_value(text: str | bytes) -> Any:
        """Parse a value stored by :func:`value_json`."""
        return json.loads(text)


class ItemCodec:
    """How item files are written and read back: readable JSON, a serializer's bytes, or both.

    Args:
        serde: the serializer of values (None: readable JSON only).
        encrypted: whether ``serde`` encrypts.
        readable: whether values are also written (and indexed) as readable JSON.
    """

    def __init__(self, serde: SerializerProtocol | None, *, encrypted: bool, readable: bool) -> None:
        self.serde = serde
        self.encrypted = encrypted
        self.readable = readable

    def encode(self, doc: dict[str, Any]) -> bytes:
        """An item file: ``doc`` with its ``value`` written as the codec says.

        Raises:
            InvalidInputError: a value that is not JSON-serialisable (or holds NaN).
            UnsafePayloadError: a value the serializer could only write with pickle.
        """
        fields = {k: v for k, v in doc.items() if k != "value"}
        if self.serde is not None:
            # JSON-normalise first (as a readable store would), so both kinds read back alike
            plain = json.loads(dump({"value": doc["value"]}))["value"]
            typed = self.serde.dumps_typed(plain)
            if typed[0].partition("+")[0] == "pickle":
                raise UnsafePayloadError("a store value would need pickle; store plain data")
            fields["exact"] = encode_exact(typed)
            if self.readable:
                fields["value"] = plain
        else:
            fields["value"] = doc["value"]
        return dump(fields)

    def encode_readable(self, doc: dict[str, Any]) -> tuple[bytes, str | None]:
        """:meth:`encode`, and the value as :func:`value_json` writes it when the codec
        writes readable values without a serializer (else None): the write path's index
        row takes that text instead of encoding the value a second time.

        Raises:
            InvalidInputError / UnsafePayloadError: see :meth:`encode`.
        """
        if self.serde is not None:
            return self.encode(doc), None
        try:
            text = value_json(doc["value"])  # the check dump() would make of the value
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"store values must be JSON-serialisable (no NaN): {exc}") from None
        return dump(doc, value_checked=True), text

    def parse(self, data: bytes, what: str) -> dict[str, Any]:
        """An item file's document, validated, its value not yet decoded (no decryption).

        Raises:
            CorruptRepositoryError: not an item file, or a readable value where every value
                this store writes is encrypted (the repository was altered).
        """
        doc = check_item(parse_json(data, what), what)
        if "exact" in doc:
            if self.serde is None:
                raise CorruptRepositoryError(
                    f"{what} holds serializer bytes; open the store with the serde "
                    "that wrote it (e.g. serde=EncryptedSerializer...)"
                )
        elif self.serde is not None and not self.readable:
            raise CorruptRepositoryError(
                f"{what} holds a readable value, but every value this store writes is "
                "encrypted; refusing it (the repository was altered)"
            )
        return doc

    def decode(self, data: bytes, what: str) -> dict[str, Any]:
        """An item file's document with its value decoded (decrypted when the codec encrypts).

        Raises:
            CorruptRepositoryError: see :meth:`parse`; also a value that does not decode.
            DecryptionError: a wrong key, or altered ciphertext.
        """
        doc = self.parse(data, what)
        if "exact" in doc:
            assert self.serde is not None  # parse refused serializer bytes without a serde
            value = safe_loads(
                self.serde, decode_exact(doc["exact"], what), encrypted=self.encrypted, allow_pickle=False, what=what
            )
            if not isinstance(value, dict):
                raise CorruptRepositoryError(f"{what} does not hold a mapping value")
            doc = {k: v for k, v in doc.items() if k != "exact"}
            doc["value"] = value
        return doc


def _plain(value: Any) -> bool:
    """Whether ``value`` is JSON the standard library accepts as it is (text, a finite number,
    None, a bool, a list of text): the fields of an item file a write builds are, and checking
    them with ``json.dumps`` cost as much as writing the file."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(type(x) is str for x in value)
    return value is None or kind is str or kind is int or kind is bool


def dump(data: dict[str, Any], *, value_checked: bool = False) -> bytes:
    """Deterministic, indented JSON of an item file.

    ``value_checked``: the caller has already passed ``data["value"]`` through
    :func:`value_json` (the same check), so only the other fields are checked here.

    Raises:
        InvalidInputError: not JSON-serialisable, or NaN.
    """
    try:
        # the standard library's C encoder decides what is accepted (orjson writes NaN as null
        # and takes types the store refuses); orjson then writes the indented file, ten times
        # faster than the standard library's indenting encoder, which is pure Python
        if not value_checked:
            json.dumps(data, allow_nan=False, default=_json_default, separators=(",", ":"))
        elif not all(_plain(v) for k, v in data.items() if k != "value"):  # a write's own fields: never
            json.dumps(
                {k: v for k, v in data.items() if k != "value"},
                allow_nan=False,
                default=_json_default,
                separators=(",", ":"),
            )
        if _orjson_dumps is not None:
            try:
                return _orjson_dumps(data, default=_json_default, option=_FILE_OPTIONS)
            except TypeError:  # beyond orjson (integers over 64 bits, lone surrogates, non-text keys)
                pass
        return dump_json(data, indent=2, allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"store values must be JSON-serialisable (no NaN): {exc}") from None


try:
    from orjson import OPT_APPEND_NEWLINE, OPT_INDENT_2, OPT_SORT_KEYS
    from orjson import dumps as _orjson_dumps

    _FILE_OPTIONS = OPT_INDENT_2 | OPT_SORT_KEYS | OPT_APPEND_NEWLINE  # dump_json(indent=2)'s layout
except ImportError:  # pragma: no cover - orjson is a LangGraph dependency
    _orjson_dumps = None  # type: ignore[assignment]
    _FILE_OPTIONS = 0


# ---------------------------------------------------------------------------- filters and conditions
def matches_filter(value: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether a value passes a search filter (every key must match)."""
    return all(_compare(value.get(k), v) for k, v in wanted.items())


def _compare(item_value: Any, wanted: Any) -> bool:
    """Filter matching with the operators of LangGraph's stores ($eq, $ne, $gt, $gte, $lt, $lte)."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(item_value, op, arg) for op, arg in wanted.items())
        return isinstance(item_value, dict) and all(_compare(item_value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(item_value, wanted))
        )
    return item_value == wanted


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value == arg
    if op == "$ne":
        return value != arg
    try:
        left, right = float(value), float(arg)
    except (TypeError, ValueError):
        return False
    if op == "$gt":
        return left > right
    if op == "$gte":
        return left >= right
    if op == "$lt":
        return left < right
    if op == "$lte":
        return left <= right
    raise InvalidInputError(f"unsupported filter operator {op!r}; use $eq, $ne, $gt, $gte, $lt or $lte")


def matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` meets a ``list_namespaces`` prefix/suffix condition (``*`` matches a label)."""
    path = tuple(condition.path)
    if condition.match_type not in ("prefix", "suffix"):
        raise InvalidInputError(f"match_type must be 'prefix' or 'suffix', not {condition.match_type!r}")
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(p == "*" or n == p for n, p in pairs)
