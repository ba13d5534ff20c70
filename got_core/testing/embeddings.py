"""A deterministic, weight-free stand-in for the MiniLM embedder.

:class:`HashEmbedder` implements :class:`got_core.memory.embeddings.Embedder`
with a hashed bag of words: texts sharing words get a positive cosine, texts
sharing none get about zero. It knows nothing about meaning (paraphrases are
*not* close), so use it only in unit tests of modules that need *some*
embedder; the vector backend and ``similarity`` are tested with real weights.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from got_core.errors import ConfigError, InvalidInputError, MissingExtraError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Hashed bag-of-words embeddings: same text, same vector, in every process.

    Each lowercase word is hashed (BLAKE2b, not Python's salted ``hash``) to one
    coordinate and a sign; the counts are L2-normalised. A text without words
    embeds to the zero vector.

    Args:
        dims: vector length (at least 1).

    Raises:
        ConfigError: ``dims`` is not a positive int.
    """

    def __init__(self, dims: int = 64) -> None:
        if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
            raise ConfigError(f"HashEmbedder dims must be a positive int, got {dims!r}")
        self.dims = dims
        self.name = f"hash-bow-{dims}"

    def _slot(self, word: str) -> tuple[int, float]:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dims, (1.0 if (value >> 63) & 1 else -1.0)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``.

        Args:
            texts: strings (a single string is treated as a one-item list).

        Returns:
            A float32 array of shape ``(len(texts), dims)`` with unit-length
            rows (zero rows for texts without words).

        Raises:
            InvalidInputError: an item is not a string.
            MissingExtraError: numpy is not installed.
        """
        np = _numpy()
        if isinstance(texts, str):
            texts = [texts]
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInputError(f"texts must be str, not {type(text).__name__}")
            for word in _WORD.findall(text.lower()):
                col, sign = self._slot(word)
                out[row, col] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out

    def __repr__(self) -> str:
        return f"HashEmbedder(dims={self.dims})"


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - numpy ships with the extra
        raise MissingExtraError("HashEmbedder", "vector", exc) from None
    return numpy
