"""What the LangGraph adapters let a stored payload become, and what they keep readable.

Loading (a repository written by someone else is untrusted input):

* The default serializer is LangGraph's ``JsonPlusSerializer`` in strict msgpack mode:
  a stored payload can only rebuild the types of an allow-list, never unpickle, never
  import a module or call anything else. The allow-list is LangGraph's own safe set
  (``SAFE_MSGPACK_TYPES``: datetimes, UUID, Decimal, sets, paths, LangChain messages,
  ``Document``, ``Send``, ``Interrupt``, ``Command``, ...), LangChain's agent, output and
  prompt-value types (:data:`LANGCHAIN_TYPES`), the caller's ``allowed_msgpack_modules``,
  and the state-schema types of every graph compiled with the saver (see
  :func:`request_graph_types`). A type outside the list comes back as its plain data.
* Only the type tags the saver writes are accepted (``null``, ``bytes``, ``bytearray``,
  ``msgpack``, each with ``+<cipher>`` when encrypting; ``pickle`` only with
  ``allow_pickle=True``); anything else is refused before the serializer sees it.

Readability (:func:`encrypts`): with a serializer that encrypts (LangGraph's
``EncryptedSerializer``, or any whose type tags are not the plain ones) the adapters
write no readable rendering of values, messages, writes or metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from got_core.errors import CorruptRepositoryError, InvalidInputError

# LangGraph's hand-off of graph schema types (request_graph_types), imported with this module: a
# new process's first saver then pays no import (a cold open is timed from the saver's construction)
_handoff: Any  # the module, or None
try:
    from langgraph._internal import _serde as _handoff_module

    _handoff = _handoff_module
except ImportError:  # pragma: no cover - a LangGraph release without it
    _handoff = None

__all__ = [
    "LANGCHAIN_TYPES",
    "PLAIN_TAGS",
    "DecryptionError",
    "UnsafePayloadError",
    "check_tag",
    "default_serde",
    "encrypts",
    "request_graph_types",
    "safe_loads",
    "widen",
]

logger = logging.getLogger(__name__)

#: Type tags of unencrypted payloads the adapters write (LangGraph's JsonPlusSerializer).
PLAIN_TAGS = frozenset({"null", "bytes", "bytearray", "msgpack"})


def _langchain_types() -> frozenset[tuple[str, str]]:
    """LangChain's own data types that graph state commonly holds (pydantic models that only
    validate their fields when built), named where this LangChain release defines them."""
    from langchain_core import agents, outputs, prompt_values
    from langchain_core.documents import Document

    classes = [
        agents.AgentAction,
        agents.AgentActionMessageLog,
        agents.AgentFinish,
        agents.AgentStep,
        outputs.Generation,
        outputs.GenerationChunk,
        outputs.ChatGeneration,
        outputs.ChatGenerationChunk,
        outputs.ChatResult,
        outputs.LLMResult,
        outputs.RunInfo,
        prompt_values.StringPromptValue,
        prompt_values.ChatPromptValue,
        prompt_values.ChatPromptValueConcrete,
        Document,
    ]
    return frozenset((c.__module__, c.__name__) for c in classes)


#: Types the default serializer rebuilds beyond LangGraph's ``SAFE_MSGPACK_TYPES``.
LANGCHAIN_TYPES = _langchain_types()


class UnsafePayloadError(InvalidInputError):
    """A checkpoint payload (to store or to load) needs ``pickle``; refused unless ``allow_pickle=True``."""


class DecryptionError(CorruptRepositoryError):
    """An encrypted payload could not be decrypted (wrong key, no key, or altered data), or a
    payload in a repository whose saver encrypts was not encrypted."""


def _keys(modules: Iterable[tuple[str, ...] | type] | None) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for m in modules or ():
        out.add((m.__module__, m.__name__) if isinstance(m, type) else tuple(m))
    return out


def default_serde(allowed_msgpack_modules: Iterable[tuple[str, ...] | type] | None = None) -> JsonPlusSerializer:
    """LangGraph's serializer, strict: the safe set, :data:`LANGCHAIN_TYPES` and ``allowed_msgpack_modules``."""
    allowed = tuple(sorted(set(LANGCHAIN_TYPES) | _keys(allowed_msgpack_modules)))
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=allowed)


def encrypts(serde: SerializerProtocol) -> bool:
    """Whether ``serde`` protects what it serialises (so no readable copy may be written).

    ``EncryptedSerializer`` does; any other serializer is asked for one payload and counts
    as protecting unless its type tag is a plain one (an unknown scheme is not rendered).
    """
    if isinstance(serde, EncryptedSerializer):
        return True
    try:
        tag = serde.dumps_typed({"got": "probe"})[0]
    except Exception:
        return True
    return tag not in PLAIN_TAGS | {"json", "pickle"}


def widen(serde: SerializerProtocol, extra: Iterable[tuple[str, ...] | type]) -> SerializerProtocol:
    """``serde`` with ``extra`` added to its msgpack allow-list (``serde`` itself when it has none
    to widen: a permissive serializer, or one that is not LangGraph's)."""
    if isinstance(serde, JsonPlusSerializer):
        return serde.with_msgpack_allowlist(list(extra))
    if isinstance(serde, EncryptedSerializer) and isinstance(serde.serde, JsonPlusSerializer):
        inner = serde.serde.with_msgpack_allowlist(list(extra))
        return serde if inner is serde.serde else EncryptedSerializer(serde.cipher, inner)
    return serde


def is_strict(serde: SerializerProtocol) -> bool:
    """Whether ``serde`` (or the serializer an ``EncryptedSerializer`` wraps) rebuilds only allow-listed types."""
    inner = serde.serde if isinstance(serde, EncryptedSerializer) else serde
    return isinstance(inner, JsonPlusSerializer) and getattr(inner, "_allowed_msgpack_modules", True) is not True


def request_graph_types() -> bool:
    """Have LangGraph hand each graph compiled from now on its schema types (``with_allowlist``).

    LangGraph computes a compiled graph's state, input, output and node schema types (pydantic
    models, dataclasses, enums) and passes them to the checkpointer's ``with_allowlist`` — its
    ``LANGGRAPH_STRICT_MSGPACK=true`` mode. This turns on that hand-off only (not the strict
    default serializer): a saver whose serializer is permissive ignores it (LangGraph's own
    ``with_allowlist`` returns it unchanged). Returns False when this LangGraph release has
    no such hand-off (then pass ``allowed_msgpack_modules``).
    """
    handoff = _handoff
    if handoff is None:
        return False
    if not hasattr(handoff, "STRICT_MSGPACK_ENABLED") or not hasattr(handoff, "apply_checkpointer_allowlist"):
        return False
    if not handoff.STRICT_MSGPACK_ENABLED:
        handoff.STRICT_MSGPACK_ENABLED = True
        logger.debug("GitCheckpointSaver: LangGraph now hands compiled graphs' schema types to checkpointers")
    return True


def check_tag(tag: Any, *, encrypted: bool, allow_pickle: bool, what: str) -> None:
    """Refuse a stored type tag the saver never writes (before any serializer sees the bytes).

    Raises:
        UnsafePayloadError: a pickle payload without ``allow_pickle``.
        DecryptionError: an encrypted payload and no encrypting serializer, or the reverse.
        CorruptRepositoryError: any other tag.
    """
    if not isinstance(tag, str):
        raise CorruptRepositoryError(f"{what} has no valid type tag; the repository was altered")
    base, plus, cipher = tag.partition("+")
    if base == "pickle" and not allow_pickle:
        raise UnsafePayloadError(f"refusing to unpickle {what}; pass allow_pickle=True only for a repository you trust")
    if base not in PLAIN_TAGS and base != "pickle":
        raise CorruptRepositoryError(
            f"{what} has type tag {tag[:40]!r}, which this saver never writes; "
            "refusing it (the repository was altered or written by other software)"
        )
    if plus and not encrypted:
        raise DecryptionError(
            f"{what} is encrypted ({cipher[:20]!r}); open it with the serializer that wrote it, "
            "e.g. serde=EncryptedSerializer.from_pycryptodome_aes(key=...)"
        )
    if encrypted and not plus:
        raise DecryptionError(
            f"{what} is not encrypted, but every payload this saver writes is; refusing it (the repository was altered)"
        )


def safe_loads(
    serde: SerializerProtocol, typed: tuple[str, bytes], *, encrypted: bool, allow_pickle: bool, what: str
) -> Any:
    """``serde.loads_typed`` on stored bytes, with typed errors naming ``what``.

    Raises:
        UnsafePayloadError, DecryptionError, CorruptRepositoryError: see :func:`check_tag`;
            DecryptionError also for a wrong key, CorruptRepositoryError for bytes that do not decode.
    """
    tag = typed[0]
    check_tag(tag, encrypted=encrypted, allow_pickle=allow_pickle, what=what)
    try:
        return serde.loads_typed(typed)
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AssertionError,
        NotImplementedError,
        UnicodeDecodeError,
        OverflowError,
    ) as exc:
        if "+" in tag:
            raise DecryptionError(
                f"could not decrypt {what}: wrong key, or the data was altered ({type(exc).__name__})"
            ) from None
        raise CorruptRepositoryError(
            f"{what} does not decode ({type(exc).__name__}: {str(exc)[:120]}); it is not what the saver wrote"
        ) from None
