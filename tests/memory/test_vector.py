"""Vector-backend specifics, with the real MiniLM weights: relevance is cosine,
chromadb's own embedding function is never used, and a fresh process with the
network cut off can reopen the store and answer text queries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types

import pytest
from timeouts import TEST_TIMEOUT

from got_core.errors import ConfigError, StorageError
from got_core.memory import get_backend
from got_core.memory.embeddings import similarity
from got_core.memory.vector import VectorMemory
from got_core.testing import HashEmbedder
from got_core.testing.memory_contract import STATS_KEYS

LESSONS = [
    ("Check the discriminant before solving a quadratic equation for real roots.", "algebra"),
    ("Balance the charges before balancing atoms in a redox half-reaction.", "chemistry"),
    ("Draw a free-body diagram before writing Newton's second law.", "mechanics"),
]

# The child blocks every outbound connection before touching chromadb or MiniLM.
CHILD = r"""
import json, socket, sys
ATTEMPTS = []
def refuse(*args, **kwargs):
    ATTEMPTS.append(repr(args[:2]))  # recorded even if the caller swallows the error
    raise OSError("network access attempted: " + repr(args[:2]))
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from got_core.memory import get_backend
mem = get_backend("vector", sys.argv[1])
hits = mem.get_relevant(sys.argv[2], 2)
import os
print(json.dumps({"n": len(mem), "hits": [[h.text, h.relevance, h.topic_key] for h in hits],
                  "network": ATTEMPTS, "offline": os.environ.get("HF_HUB_OFFLINE"), "stats": mem.stats()}))
"""


def _fill(mem):
    for text, topic in LESSONS:
        mem.add_insight(text, topic_key=topic)


def test_fresh_process_reopens_and_answers_text_queries_offline(tmp_path):
    mem = get_backend("vector", tmp_path / "vec")
    _fill(mem)
    mem.close()
    query = "Which forces act on the block? Sketch them before applying F = ma."
    # No help from the environment: the library itself must keep everything offline.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "ANONYMIZED_TELEMETRY")
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "vec"), query],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["network"] == [] and out["offline"] == "1"
    assert out["n"] == 3
    (text, relevance, topic), _second = out["hits"]
    assert (text, topic) == (LESSONS[2][0], "mechanics")
    assert relevance == pytest.approx(similarity(query, text), abs=1e-3)
    assert out["stats"]["load_ms"] > 0 and out["stats"]["reads"] == 1  # MiniLM loaded by that first query


def test_relevance_is_cosine_similarity(tmp_path):
    mem = get_backend("vector", tmp_path / "vec")
    _fill(mem)
    query = "roots of a second-degree polynomial"
    hits = mem.get_relevant(query, 3)
    assert len(hits) == 3 and hits[0].text == LESSONS[0][0]
    for hit in hits:
        assert hit.relevance == pytest.approx(similarity(query, hit.text), abs=1e-4)


def test_collection_has_no_chromadb_embedding_function(tmp_path):
    import chromadb
    from chromadb.config import Settings

    mem = get_backend("vector", tmp_path / "vec")
    _fill(mem)
    mem.close()
    client = chromadb.PersistentClient(path=str(tmp_path / "vec"), settings=Settings(anonymized_telemetry=False))
    (col,) = [client.get_collection(c.name, embedding_function=None) for c in client.list_collections()]
    assert col.configuration.get("embedding_function") is None
    assert col.configuration["hnsw"]["space"] == "cosine"
    assert col.metadata["got_embedder"] == "all-MiniLM-L6-v2"
    assert col.count() == 3


def test_same_lesson_twice_is_one_record(tmp_path):
    mem = get_backend("vector", tmp_path / "vec")
    mem.add_insight(LESSONS[0][0], topic_key="algebra", score=0.4)
    stored = mem.add_insight(LESSONS[0][0], topic_key="algebra", score=0.9)
    assert stored is not None and len(mem) == 1
    assert mem.all_lessons()[0].score == pytest.approx(0.9)


def test_reopening_with_another_embedder_is_refused(tmp_path):
    mem = get_backend("vector", tmp_path / "vec")
    _fill(mem)
    mem.close()
    with pytest.raises(ConfigError, match="embedder"):
        VectorMemory(tmp_path / "vec", embedder=HashEmbedder(64))
    # the store is untouched and still answers with the embedder it was built with
    assert len(VectorMemory(tmp_path / "vec")) == 3


def test_read_only_on_a_missing_store_creates_nothing(tmp_path):
    mem = VectorMemory(tmp_path / "nothing-here", read_only=True)
    assert mem.add_insight("never stored") is None
    assert mem.get_relevant("anything", 3) == [] and len(mem) == 0
    assert not (tmp_path / "nothing-here").exists()


def test_use_after_close_is_refused(tmp_path):
    mem = get_backend("vector", tmp_path / "vec")
    mem.close()
    mem.close()  # idempotent
    with pytest.raises(StorageError, match="closed"):
        mem.add_insight("too late")
    with pytest.raises(StorageError, match="closed"):
        mem.get_relevant("too late", 3)


def test_needs_a_path():
    with pytest.raises(ConfigError):
        VectorMemory(None)


@pytest.mark.parametrize("bad", ["x", "has space", "-leading", ""])
def test_bad_collection_name_is_a_config_error(tmp_path, bad):
    with pytest.raises(ConfigError, match="collection"):
        VectorMemory(tmp_path / "vec", collection=bad)
    assert not (tmp_path / "vec").exists()


def test_missing_chromadb_names_the_extra(monkeypatch, tmp_path):
    from got_core.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "chromadb", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"gitofthoughts\[vector\]"):
        get_backend("vector", tmp_path / "vec", embedder=HashEmbedder(8))


def test_bulk_ingest_larger_than_one_chromadb_batch(tmp_path):
    from got_core.memory import Lesson

    mem = VectorMemory(tmp_path / "vec", embedder=HashEmbedder(16))
    limit = mem._client.get_max_batch_size()
    lessons = [Lesson(f"lesson {i} about topic {i % 97} and widget {i}", topic_key=f"t{i}") for i in range(limit + 10)]
    assert len(mem.add_lessons(lessons)) == limit + 10
    assert len(mem) == limit + 10
    assert mem.get_relevant("widget 5460 topic", 1)
    mem.close()


class _Clock:
    """A perf_counter the test drives: only what the embedder "spends" passes."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class _SlowToLoad(HashEmbedder):
    """Like MiniLM: the first call pays a one-time load (30 s here), later calls 1 ms."""

    def __init__(self, clock):
        super().__init__()
        self.clock, self.loaded = clock, False

    def embed(self, texts):
        self.clock.now += 0.001 if self.loaded else 30.0
        self.loaded = True
        return super().embed(texts)


def test_model_loading_is_reported_apart_from_write_and_read_cost(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr("got_core.memory.base.time", types.SimpleNamespace(perf_counter=clock, time=time.time))
    writer = VectorMemory(tmp_path / "vec", embedder=_SlowToLoad(clock))
    assert writer.get_relevant("anything", 2) == [] and writer.stats()["load_ms"] == 0  # empty: no model needed
    _fill(writer)
    writer.get_relevant("Which forces act on the block?", 2)
    stats = writer.stats()
    assert stats["load_ms"] == pytest.approx(30_000)  # paid once, by the first write
    # each write and read is charged its own embedding call (1 ms), never the load
    assert stats["write_ms"] == pytest.approx(1.0)
    assert stats["read_ms"] == pytest.approx(0.5)  # the empty read cost nothing
    writer.close()

    reader = VectorMemory(tmp_path / "vec", embedder=_SlowToLoad(clock))  # a new process's first query
    reader.get_relevant("Which forces act on the block?", 2)
    stats = reader.stats()
    assert (stats["load_ms"], stats["read_ms"], stats["writes"]) == (pytest.approx(30_000), pytest.approx(1.0), 0)
    assert set(stats) == STATS_KEYS
