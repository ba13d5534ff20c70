"""MiniLM embeddings with the real weights, and the deterministic HashEmbedder stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from timeouts import TEST_TIMEOUT

from got_core.errors import ConfigError, InvalidInputError
from got_core.memory.embeddings import (
    MINILM_DIMS,
    Embedder,
    MiniLMEmbedder,
    cosine_matrix,
    embed,
    get_embedder,
    similarity,
)
from got_core.testing import HashEmbedder

PARAPHRASES = [
    ("How do I reset my password?", "I forgot my login credentials; how can I change them?"),
    (
        "Check the discriminant before solving a quadratic equation.",
        "Look at b squared minus 4ac first when finding the roots of a second-degree polynomial.",
    ),
    ("The train left the station two hours late.", "The railway departure was delayed by 2 hours."),
]
UNRELATED = "Photosynthesis converts light energy into chemical energy in chloroplasts."


def test_minilm_embeddings_are_normalised_float32_rows():
    vecs = embed(["first sentence", "second, different sentence", "third"])
    assert vecs.shape == (3, MINILM_DIMS) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert embed("just one string").shape == (1, MINILM_DIMS)
    assert embed([]).shape == (0, MINILM_DIMS)
    assert get_embedder() is get_embedder()
    assert isinstance(get_embedder(), Embedder) and get_embedder().dims == MINILM_DIMS


@pytest.mark.parametrize("a, b", PARAPHRASES)
def test_paraphrase_cosine_well_above_unrelated(a, b):
    para = similarity(a, b)
    unrelated = max(similarity(a, UNRELATED), similarity(b, UNRELATED))
    assert para > 0.45
    assert unrelated < 0.2
    assert para - unrelated > 0.35


def test_similarity_is_symmetric_and_one_on_itself():
    a, b = PARAPHRASES[0]
    assert similarity(a, a) == pytest.approx(1.0, abs=1e-5)
    assert similarity(a, b) == pytest.approx(similarity(b, a), abs=1e-5)


def test_cosine_matrix_shape_and_agreement_with_similarity():
    queries = [a for a, _ in PARAPHRASES[:2]]
    docs = [b for _, b in PARAPHRASES] + [UNRELATED]
    mat = cosine_matrix(queries, docs)
    assert mat.shape == (2, 4) and mat.dtype == np.float32
    for i, q in enumerate(queries):
        for j, d in enumerate(docs):
            assert mat[i, j] == pytest.approx(similarity(q, d), abs=1e-4)
    # each query's own paraphrase is its best match
    assert list(mat.argmax(axis=1)) == [0, 1]
    assert cosine_matrix("one", ["one", "two"]).shape == (1, 2)


def test_bad_embedding_input_is_a_typed_error():
    with pytest.raises(InvalidInputError):
        embed([b"\xff\xfe"])
    with pytest.raises(InvalidInputError):
        similarity("fine", 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        MiniLMEmbedder().embed([None])  # type: ignore[list-item]


def test_hash_embedder_is_deterministic_within_and_across_processes():
    texts = ["the same words give the same vector", "Another, different TEXT!", "!!!"]
    one, two = HashEmbedder(64), HashEmbedder(64)
    v1, v2 = one.embed(texts), two.embed(texts)
    np.testing.assert_array_equal(v1, v2)
    assert v1.shape == (3, 64) and v1.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v1[:2], axis=1), 1.0, atol=1e-6)
    assert not v1[2].any()  # no words -> zero vector
    code = (
        "import json, sys; from got_core.testing import HashEmbedder; "
        "print(json.dumps(HashEmbedder(64).embed(json.loads(sys.argv[1])).tolist()))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")  # Python's own str hash would differ
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(texts)],
        env=env,
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
        check=True,
    )
    np.testing.assert_array_equal(np.array(json.loads(out.stdout), dtype=np.float32), v1)


def test_hash_embedder_follows_shared_words_and_the_protocol():
    emb = HashEmbedder(dims=256)
    assert isinstance(emb, Embedder) and emb.dims == 256
    mat = cosine_matrix(
        ["discriminant of a quadratic"], ["the quadratic discriminant", "dice and probability"], embedder=emb
    )
    assert mat[0, 0] > 0.5 > abs(mat[0, 1])
    assert similarity("Same Text", "same text", embedder=emb) == pytest.approx(1.0)
    assert HashEmbedder(8).embed("one string").shape == (1, 8)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ConfigError):
            HashEmbedder(bad)  # type: ignore[arg-type]


def test_missing_sentence_transformers_names_the_extra(monkeypatch):
    from got_core.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    # a device no test has loaded yet, so the per-process model cache cannot answer
    with pytest.raises(MissingExtraError, match=r"gitofthoughts\[vector\]"):
        MiniLMEmbedder(device="cpu-not-loaded").embed(["text"])
