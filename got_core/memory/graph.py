"""The ``graph`` backend: a lesson/concept graph with spreading-activation retrieval.

§3.4 of the paper (arXiv 2606.14470): the graph substrate links lessons
through the concepts they mention and retrieves *associatively*: activation
starts at the query's concepts and spreads a few hops with decay, so a lesson
that shares no word with the query can still be found through a concept it
shares with a lesson that does. That is the point of this backend; it is not
a nearest-neighbour index.

Graph (networkx, undirected):

* ``lesson:<hash>`` nodes carry the lesson fields;
* ``concept:<token>`` nodes are content words (stop words dropped, lightly
  stemmed, see :func:`got_core._text.tokenize`) and bigrams of
  adjacent content words;
* lesson–concept edges weigh how often the lesson mentions the concept;
  concept–concept edges count co-occurrence within a small window.

Persistence (JSON only, never pickle): ``graph.json`` is a node-link snapshot
written atomically; each write appends one JSON line to the snapshot's journal
(``graph.journal.<generation>.jsonl``) under an exclusive file lock, and the
journal is folded into a new snapshot when it grows as large as the graph
(amortised O(1) per write) and on :meth:`GraphMemory.close`.
"""

from __future__ import annotations

import glob
import hashlib
import heapq
import itertools
import json
import math
import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from got_core._text import tokenize
from got_core.errors import ConfigError, CorruptRepositoryError, MissingExtraError, StorageError
from got_core.memory._files import atomic_write_bytes, file_stamp, locked, prepare_store_dir
from got_core.memory.base import BaseMemory, Lesson, stored_lesson

__all__ = ["GRAPH_FILE", "GraphMemory", "concepts_of"]

#: The snapshot file inside the backend directory.
GRAPH_FILE = "graph.json"
_LOCK_FILE = ".graph.lock"
_FORMAT = "got-memory-graph"
_VERSION = 1
#: Spreading activation: hops from the query's concepts, and decay per hop.
HOPS = 3
DECAY = 0.5
#: Keep only this many most-activated nodes between hops (bounds the cost on big graphs).
FRONTIER = 256
#: A node spreads only if what each neighbour would get is at least this fraction of
#: the query's total seed activation: hub concepts (in most lessons) pass on almost
#: nothing per edge, and skipping them is what keeps reads fast on large graphs.
MIN_SHARE = 1e-5
#: Concept–concept co-occurrence window, in content tokens.
WINDOW = 3
#: Fold the journal into a snapshot once it has at least this many entries (and ≥ the lesson count).
COMPACT_MIN = 256


def _nx() -> Any:
    try:
        import networkx
    except ImportError as exc:
        raise MissingExtraError("the graph memory", "graph", exc) from None
    return networkx


def concepts_of(text: str) -> tuple[list[str], list[str]]:
    """The concepts a text mentions.

    Args:
        text: any string.

    Returns:
        ``(unigrams, bigrams)``: content tokens in order, and ``"a b"`` pairs of
        adjacent content tokens.
    """
    toks = tokenize(text)
    return toks, [f"{a} {b}" for a, b in itertools.pairwise(toks) if a != b]


def _lesson_node(lesson: Lesson) -> str:
    key = "\x1f".join((lesson.outcome, lesson.topic_key, lesson.text))
    return "lesson:" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class GraphMemory(BaseMemory):
    """Lessons and concepts in a networkx graph, retrieved by spreading activation.

    ``relevance`` on returned lessons is the activation that reached the lesson.
    Re-adding an identical lesson (same outcome, topic and text) does not add a
    node: it keeps the higher score and counts the repeat in ``meta["seen"]``.

    Args:
        path: the backend directory (created if missing).
        read_only: refuse writes silently and never create anything on disk.
        fsync: fsync journal appends and snapshots (durability against power loss).
        compact_min: fold the journal into ``graph.json`` once it holds at least
            this many entries (and at least as many as there are lessons).
        create: when false the store must exist already (nothing is created).

    Raises:
        ConfigError: no path given.
        RepositoryNotFoundError: ``create=False`` and no graph memory at ``path``.
        StorageError: the directory cannot be created or written.
        CorruptRepositoryError: the snapshot or journal is not what this backend
            wrote (it is left untouched).
        MissingExtraError: networkx is not installed.
    """

    name = "graph"
    path: Path  # never None here: __init__ refuses a missing path
    supports_associative_search = True

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        read_only: bool = False,
        fsync: bool = False,
        compact_min: int = COMPACT_MIN,
        create: bool = True,
    ) -> None:
        if path is None:
            raise ConfigError("the graph memory needs a directory path, e.g. path='runs/memory'")
        if not isinstance(compact_min, int) or isinstance(compact_min, bool) or compact_min < 1:
            raise ConfigError(f"compact_min must be a positive int, got {compact_min!r}")
        self.compact_min = compact_min
        super().__init__(path, read_only=read_only)
        self._nxmod = _nx()
        self.fsync = fsync
        self.file = self.path / GRAPH_FILE
        self._lock_path = self.path / _LOCK_FILE
        self._thread_lock = threading.Lock()
        self._snap_stamp: Any = "unset"  # (inode, mtime, size) of the loaded graph.json
        self._reset(None, 0)
        journals = tuple(Path(p) for p in glob.glob(glob.escape(str(self.path)) + "/graph.journal.*.jsonl"))
        prepare_store_dir(
            self.path,
            self._lock_path,
            "graph memory",
            "graph.json",
            read_only=read_only,
            create=create,
            markers=(self.file, *journals),
        )
        self._refresh()

    # -- state -------------------------------------------------------------------------
    def _reset(self, graph: Any, generation: int) -> None:
        self.graph = graph if graph is not None else self._nxmod.Graph()
        self._generation = generation
        self._offset = 0  # bytes of the current journal already applied
        self._journal_entries = 0
        self._n_lessons = sum(1 for _, d in self.graph.nodes(data=True) if d.get("kind") == "lesson")
        # weighted degree per node, kept in step with every edge change
        self._wsum: dict[str, float] = dict(self.graph.degree(weight="weight"))

    def _journal(self, generation: int | None = None) -> Path:
        gen = self._generation if generation is None else generation
        return self.path / f"graph.journal.{gen}.jsonl"

    def _stamp(self) -> tuple[int, int, int] | None:
        return file_stamp(self.file)

    def _refresh(self) -> None:
        """Catch up with the snapshot and journal on disk (other processes may write)."""
        stamp = self._stamp()
        if stamp != self._snap_stamp:
            self._load_snapshot()
            self._snap_stamp = stamp
        journal = self._journal()
        try:
            size = journal.stat().st_size
        except (FileNotFoundError, NotADirectoryError):
            size = 0
        except OSError as exc:
            raise StorageError(f"cannot read {journal}: {exc}") from None
        if size < self._offset:  # replaced behind our back: start over
            self._snap_stamp = "unset"
            self._refresh()
            return
        if size == self._offset:
            return
        try:
            with open(journal, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read(size - self._offset)
        except FileNotFoundError:  # another process compacted it into a new snapshot
            self._snap_stamp = "unset"
            self._refresh()
            return
        end = chunk.rfind(b"\n") + 1  # a partial last line is a crashed, unacknowledged write
        for number, raw in enumerate(chunk[:end].splitlines(), self._journal_entries + 1):
            try:
                entry = json.loads(raw.decode("utf-8"))
                if not isinstance(entry, dict) or entry.get("op", "add") != "add":
                    raise ValueError("not an 'add' record")
                lesson = stored_lesson(entry.get("lesson"))
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                raise CorruptRepositoryError(
                    f"{journal} has a damaged entry (line {number}: {exc}); it was left "
                    "untouched: restore it from a backup or move the directory away to "
                    "start an empty memory"
                ) from None
            self._apply(lesson)
            self._journal_entries += 1
        self._offset += end

    def _load_snapshot(self) -> None:
        if not self.file.exists():
            self._reset(None, 0)
            return
        try:
            data = json.loads(self.file.read_bytes().decode("utf-8"))
            if data.get("format") != _FORMAT or data.get("version") != _VERSION:
                raise ValueError(f"not a {_FORMAT} v{_VERSION} file")
            graph = self._nxmod.node_link_graph(data["graph"], directed=False, multigraph=False, edges="edges")
            generation = data["generation"]
            if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
                raise ValueError(f"bad generation {str(generation)[:40]!r}")
            _check_graph(graph)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError, self._nxmod.NetworkXError) as exc:
            raise CorruptRepositoryError(
                f"{self.file} is not a readable graph memory ({exc}); it was left untouched: "
                "restore it from a backup or move it away to start an empty memory"
            ) from None
        except OSError as exc:
            raise StorageError(f"cannot read {self.file}: {exc}") from None
        self._reset(graph, generation)

    def _apply(self, lesson: Lesson) -> dict[str, Any]:
        g = self.graph
        node = _lesson_node(lesson)
        if node in g:
            attrs = g.nodes[node]
            attrs["score"] = max(attrs["score"], lesson.score)
            attrs["seen"] = attrs.get("seen", 1) + 1
            return attrs
        g.add_node(node, kind="lesson", seen=1, **{k: v for k, v in lesson.to_dict().items() if k != "relevance"})
        self._n_lessons += 1
        unigrams, bigrams = concepts_of(lesson.text + " " + lesson.topic_key.replace("-", " "))
        counts: dict[str, int] = defaultdict(int)
        for concept in unigrams + bigrams:
            counts["concept:" + concept] += 1
        for cnode, weight in counts.items():
            if cnode not in g:
                g.add_node(cnode, kind="concept", df=0)
            g.nodes[cnode]["df"] += 1
            g.add_edge(node, cnode, weight=float(weight))
            self._bump(node, cnode, float(weight))
        pairs = set()
        for i, a in enumerate(unigrams):
            for b in unigrams[i + 1 : i + 1 + WINDOW]:
                if a != b:
                    pairs.add((min(a, b), max(a, b)))
        for a, b in pairs:
            u, v = "concept:" + a, "concept:" + b
            if g.has_edge(u, v):
                g[u][v]["weight"] += 1.0
            else:
                g.add_edge(u, v, weight=1.0)
            self._bump(u, v, 1.0)
        return g.nodes[node]

    def _bump(self, u: str, v: str, weight: float) -> None:
        self._wsum[u] = self._wsum.get(u, 0.0) + weight
        self._wsum[v] = self._wsum.get(v, 0.0) + weight

    # -- BaseMemory hooks --------------------------------------------------------------
    def _store(self, lesson: Lesson) -> Lesson:
        line = (
            json.dumps({"op": "add", "lesson": lesson.to_dict()}, ensure_ascii=True, sort_keys=True, default=str) + "\n"
        ).encode("utf-8")
        with locked(self._lock_path, self._thread_lock):
            self._refresh()
            journal = self._journal()
            try:
                with open(journal, "ab") as fh:
                    if fh.tell() > self._offset:  # drop a crashed writer's partial line
                        fh.truncate(self._offset)
                    fh.write(line)
                    fh.flush()
                    if self.fsync:
                        os.fsync(fh.fileno())
            except OSError as exc:
                raise StorageError(f"cannot append to {journal}: {exc}; check free space and permissions") from None
            self._offset += len(line)
            self._journal_entries += 1
            attrs = self._apply(lesson)
            if self._journal_entries >= max(self.compact_min, self._n_lessons):
                try:
                    self._compact()
                except StorageError:
                    pass  # the lesson is durable in the journal; compaction retries next write
            return _to_lesson(attrs)

    def _compact(self) -> None:
        """Fold the journal into a new snapshot (call with the lock held)."""
        nx = self._nxmod
        data = {
            "format": _FORMAT,
            "version": _VERSION,
            "generation": self._generation + 1,
            "graph": nx.node_link_data(self.graph, edges="edges"),
        }
        atomic_write_bytes(
            self.file, json.dumps(data, ensure_ascii=True, default=str).encode("utf-8"), fsync=self.fsync
        )
        self._generation += 1
        self._offset = 0
        self._journal_entries = 0
        self._snap_stamp = self._stamp()
        # Journals of older generations are folded in now; a crash before this
        # point leaves them behind, harmless, for the next compaction to remove.
        for old in glob.glob(str(self.path / "graph.journal.*.jsonl")):
            if old != str(self._journal()):
                try:
                    os.unlink(old)
                except OSError:
                    pass

    def _query(self, query: str, k: int) -> list[Lesson]:
        # Reads hold the in-process lock: catching up mutates the graph, and a
        # writer thread must not change it under the walk.
        with self._thread_lock:
            return self._spread(query, k)

    def _spread(self, query: str, k: int) -> list[Lesson]:
        self._refresh()
        g = self.graph
        unigrams, bigrams = concepts_of(query)
        seeds: dict[str, float] = {}
        for concept in unigrams + bigrams:
            node = "concept:" + concept
            if node in g:
                # Rare concepts say more about what the query is about (idf weighting).
                seeds[node] = math.log(1.0 + self._n_lessons / max(1, g.nodes[node]["df"]))
        if not seeds:
            return []
        total: dict[str, float] = defaultdict(float)
        floor = MIN_SHARE * sum(seeds.values())
        frontier = seeds
        for _ in range(HOPS):
            nxt: dict[str, float] = defaultdict(float)
            for u, act in frontier.items():
                nbrs = g[u]
                if not nbrs or act * DECAY / len(nbrs) < floor:
                    continue
                wsum = self._wsum.get(u) or 1.0
                for v, d in nbrs.items():
                    nxt[v] += act * DECAY * d["weight"] / wsum
            for v, act in nxt.items():
                total[v] += act
            if len(nxt) > FRONTIER:
                nxt = dict(heapq.nlargest(FRONTIER, nxt.items(), key=lambda kv: kv[1]))
            frontier = nxt
        ranked = sorted(
            ((act, n) for n, act in total.items() if n.startswith("lesson:") and act > 0),
            key=lambda an: (-an[0], -g.nodes[an[1]]["score"], an[1]),
        )
        return [_to_lesson(g.nodes[n], relevance=round(act, 6)) for act, n in ranked[:k]]

    def _all(self) -> list[Lesson]:
        with self._thread_lock:
            self._refresh()
            nodes = [d for _, d in self.graph.nodes(data=True) if d.get("kind") == "lesson"]
            return [_to_lesson(d) for d in sorted(nodes, key=lambda d: d["created"])]

    def __len__(self) -> int:
        with self._thread_lock:
            self._refresh()
            return self._n_lessons

    def close(self) -> None:
        """Fold any pending journal into ``graph.json`` so the file alone holds the graph."""
        if self.read_only or not self.path.is_dir():
            return
        with locked(self._lock_path, self._thread_lock):
            self._refresh()
            if self._journal_entries:
                self._compact()


def _check_graph(graph: Any) -> None:
    """Every node and edge of a loaded snapshot is what :meth:`GraphMemory._apply` builds.

    Raises:
        ValueError: the first node or edge that is not.
    """
    for node, attrs in graph.nodes(data=True):
        kind = attrs.get("kind") if isinstance(node, str) else None
        if kind == "lesson" and node.startswith("lesson:"):
            stored_lesson(attrs)
            seen = attrs.get("seen", 1)
            if not isinstance(seen, int) or isinstance(seen, bool) or seen < 1:
                raise ValueError(f"node {node[:60]!r} has a bad 'seen' count")
        elif kind == "concept" and node.startswith("concept:"):
            df = attrs.get("df")
            if not isinstance(df, int) or isinstance(df, bool) or df < 0:
                raise ValueError(f"node {node[:60]!r} has a bad document count")
        else:
            raise ValueError(f"node {str(node)[:60]!r} is neither a lesson nor a concept")
    for u, v, attrs in graph.edges(data=True):
        weight = attrs.get("weight")
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not weight > 0:
            raise ValueError(f"edge {str(u)[:40]!r}-{str(v)[:40]!r} has a bad weight")


def _to_lesson(attrs: dict[str, Any], relevance: float = 0.0) -> Lesson:
    return Lesson(
        text=attrs["text"],
        topic_key=attrs.get("topic_key", ""),
        source_problem=attrs.get("source_problem", ""),
        outcome=attrs.get("outcome", "insight"),
        score=float(attrs.get("score", 0.5)),
        created=float(attrs.get("created", 0.0)),
        meta={**(attrs.get("meta") or {}), "seen": attrs.get("seen", 1)},
        relevance=relevance,
    )
