"""Graph-backend specifics: associative retrieval, JSON persistence, journal and
compaction across processes, damaged files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import networkx as nx
import pytest
from timeouts import TEST_TIMEOUT, deadline

from got_core.errors import ConfigError, CorruptRepositoryError
from got_core.memory import get_backend
from got_core.memory.graph import GRAPH_FILE, GraphMemory, concepts_of
from got_core.memory.markdown import tokenize

# A links "totient" to "fermat little theorem"; B talks about Fermat but never
# says "totient"; C is unrelated.
A = "Euler's totient generalises Fermat's little theorem to composite moduli."
B = "Fermat's little theorem reduces huge exponents modulo a prime."
C = "Balance the charges before balancing atoms in a redox half-reaction."
QUERY = "totient function values"

WRITER = r"""
import os, sys, time
from got_core.memory.graph import GraphMemory
mem = GraphMemory(sys.argv[1], compact_min=int(sys.argv[3]))
open(os.path.join(sys.argv[5], "ready-" + sys.argv[2]), "w").close()
while not os.path.exists(os.path.join(sys.argv[5], "go")):  # start both writers together
    time.sleep(0.005)
for i in range(int(sys.argv[4])):
    mem.add_insight(f"writer {sys.argv[2]} lesson {i} about topic{i % 5} and more{i}",
                    topic_key=f"w{sys.argv[2]}-{i}")
    mem.get_relevant(f"topic{i % 5}", 2)
mem.close()
"""


def test_associative_retrieval_finds_a_lesson_sharing_no_word_with_the_query(tmp_path):
    mem = GraphMemory(tmp_path / "g")
    for text in (A, B, C):
        mem.add_insight(text, topic_key="t")
    hits = [h.text for h in mem.get_relevant(QUERY, 5)]
    assert not set(tokenize(QUERY)) & set(tokenize(B))  # B shares no concept with the query
    assert hits[:2] == [A, B]  # the direct match first, then the associated lesson
    assert C not in hits  # nothing links the redox lesson
    # a keyword backend on the same lessons cannot find B: this is not keyword search
    md = get_backend("markdown", tmp_path / "md")
    for text in (A, B, C):
        md.add_insight(text, topic_key="t")
    assert [h.text for h in md.get_relevant(QUERY, 5)] == [A]


def test_activation_decays_with_distance(tmp_path):
    mem = GraphMemory(tmp_path / "g")
    for text in (A, B):
        mem.add_insight(text)
    direct, associated = mem.get_relevant(QUERY, 2)
    assert direct.relevance > associated.relevance > 0


def test_concepts_are_content_words_and_bigrams():
    unigrams, bigrams = concepts_of("The roots of the quadratic equations")
    assert unigrams == ["root", "quadratic", "equation"]
    assert bigrams == ["root quadratic", "quadratic equation"]
    assert concepts_of("the of and") == ([], [])


def test_persisted_as_node_link_json_after_close(tmp_path):
    mem = GraphMemory(tmp_path / "g")
    for text in (A, B, C):
        mem.add_insight(text, meta={"k": 1})
    mem.close()
    names = sorted(p.name for p in (tmp_path / "g").iterdir())
    assert names == [".graph.lock", GRAPH_FILE]  # the journal was folded in
    data = json.loads((tmp_path / "g" / GRAPH_FILE).read_text())
    assert data["format"] == "got-memory-graph"
    graph = nx.node_link_graph(data["graph"], edges="edges")
    lessons = [d for _, d in graph.nodes(data=True) if d["kind"] == "lesson"]
    assert sorted(d["text"] for d in lessons) == sorted([A, B, C])
    assert graph.has_edge(next(n for n, d in graph.nodes(data=True) if d.get("text") == A), "concept:totient")
    again = GraphMemory(tmp_path / "g")
    assert [h.text for h in again.get_relevant(QUERY, 2)] == [A, B]


def test_repeated_lesson_is_one_node(tmp_path):
    mem = GraphMemory(tmp_path / "g")
    mem.add_insight(A, score=0.3)
    stored = mem.add_insight(A, score=0.8)
    assert len(mem) == 1
    assert stored.meta["seen"] == 2 and stored.score == pytest.approx(0.8)
    assert len(GraphMemory(tmp_path / "g")) == 1


def test_concurrent_writer_processes_lose_nothing_through_compactions(tmp_path):
    path = tmp_path / "g"
    GraphMemory(path).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(w), "4", "30", str(tmp_path)],
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for w in (1, 2)
    ]
    _start_together(tmp_path, procs)
    for proc in procs:
        _, err = proc.communicate(timeout=TEST_TIMEOUT)
        assert proc.returncode == 0, err[-3000:]
    mem = GraphMemory(path)
    texts = {l.text for l in mem.all_lessons()}
    assert texts == {f"writer {w} lesson {i} about topic{i % 5} and more{i}" for w in (1, 2) for i in range(30)}
    # the 12 lessons that mention topic3 outrank the ones reached only by association
    assert all("topic3" in h.text for h in mem.get_relevant("topic3", 12))


def _start_together(folder, procs):
    until = deadline()
    while not all((folder / f"ready-{w}").exists() for w in (1, 2)):
        assert all(p.poll() is None for p in procs), "a writer died before starting"
        assert time.monotonic() < until, "writers never got ready"
        time.sleep(0.01)
    (folder / "go").touch()


def test_a_crashed_partial_journal_line_is_dropped(tmp_path):
    mem = GraphMemory(tmp_path / "g")
    mem.add_insight(A)
    mem.add_insight(B)
    (journal,) = (tmp_path / "g").glob("graph.journal.*.jsonl")
    with open(journal, "ab") as fh:
        fh.write(b'{"lesson": {"text": "half writ')
    fresh = GraphMemory(tmp_path / "g")
    assert len(fresh) == 2
    fresh.add_insight(C)
    assert sorted(l.text for l in GraphMemory(tmp_path / "g").all_lessons()) == sorted([A, B, C])


@pytest.mark.parametrize("damage", [b"not json at all", b'{"format": "something else"}', b"\xff\xfe\x00"])
def test_damaged_snapshot_is_a_typed_error_and_left_untouched(tmp_path, damage):
    path = tmp_path / "g"
    mem = GraphMemory(path)
    mem.add_insight(A)
    mem.close()
    (path / GRAPH_FILE).write_bytes(damage)
    with pytest.raises(CorruptRepositoryError, match="graph.json"):
        GraphMemory(path)
    with pytest.raises(CorruptRepositoryError):
        mem.add_insight(B)  # a handle opened earlier must not overwrite it either
    assert (path / GRAPH_FILE).read_bytes() == damage


def test_damaged_journal_line_is_a_typed_error(tmp_path):
    mem = GraphMemory(tmp_path / "g")
    mem.add_insight(A)
    (journal,) = (tmp_path / "g").glob("graph.journal.*.jsonl")
    with open(journal, "ab") as fh:
        fh.write(b"garbage line\n")
    before = journal.read_bytes()
    with pytest.raises(CorruptRepositoryError, match="journal"):
        GraphMemory(tmp_path / "g")
    assert journal.read_bytes() == before


def test_bad_options_are_config_errors(tmp_path):
    with pytest.raises(ConfigError):
        GraphMemory(None)
    with pytest.raises(ConfigError):
        GraphMemory(tmp_path / "g", compact_min=0)


def test_missing_networkx_names_the_extra(monkeypatch, tmp_path):
    from got_core.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "networkx", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"gitofthoughts\[graph\]"):
        get_backend("graph", tmp_path / "g")


def test_threads_sharing_one_handle_lose_nothing(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    mem = GraphMemory(tmp_path / "g", compact_min=8)

    def work(t):
        for i in range(15):
            mem.add_insight(f"thread {t} lesson {i} about topic{i % 3}")
            mem.get_relevant(f"topic{i % 3} lesson", 3)
        return t

    with ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(work, range(4))) == [0, 1, 2, 3]
    assert len(mem) == 60 and len(GraphMemory(tmp_path / "g")) == 60
