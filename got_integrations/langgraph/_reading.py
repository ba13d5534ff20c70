"""Reading side of :class:`~got_integrations.langgraph.GitCheckpointSaver`: checkpoint
documents, channel values, pending writes, ``get_tuple`` and ``list``, threads and namespaces.

A cold read (a new process, nothing cached) of the latest checkpoint of a long thread
reads the ``head`` ref, the commit (once: its tree comes from the same lookup),
``checkpoint.json`` and, for a list channel, its segments: one blob per full bucket of 100
elements and one per 10 in the open bucket, looked up by path with the few elements after
the last segment (at most 9). A 1,000-message thread is about 20 object reads, not 1,000.
Segments are what the reader trusts for the elements they cover (an element's own ``.bin``
is written only where no segment held it then); a checkpoint without segments (an older
saver wrote it) is read element by element.
Each object is read from the object database once (``test_saver_cost.py`` counts the reads).
"""

from __future__ import annotations

import bisect
import builtins
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    writes_sort_key,
)

from got_core.errors import CorruptRepositoryError, UnknownRefError
from got_integrations.langgraph._history import _Ns
from got_integrations.langgraph._layout import (
    BUCKET,
    CARRIED,
    THREADS_REF,
    Listing,
    check_checkpoint_doc,
    check_writes_doc,
    decode_exact,
    decode_id,
    elem_path,
    id_component,
    join_msgpack_array,
    parse_json,
    segment_path,
    segment_ranges,
    segments_dir,
    text_id,
    unframe,
    unpack_segment,
    writes_bucket,
    writes_stem,
)

if TYPE_CHECKING:  # pragma: no cover
    from got_core.repo import ReasoningRepo
    from got_integrations.langgraph._layout import LRU

__all__ = ["ReadOps", "Typed"]

Typed = tuple[str, bytes]
#: A cold read looks up to this many list elements of one bucket up by path; a longer run lists the bucket.
_BY_PATH = 16
#: A cold read looks up to this many segments of a list up by path; more are read from a listing of the
#: ``segments/`` directory (a lookup by path costs a few entries of a listing: callgrind, 10 segments).
_SEGMENTS_BY_PATH = 4


class ReadOps:
    """Mixin of the saver's reads; relies on the saver's repository, serializer and caches."""

    repo: ReasoningRepo
    encrypted: bool
    serde: Any
    _blobs: LRU
    _lists: LRU
    _files: LRU
    _roots: LRU
    _docs: LRU
    _carried: LRU
    _writes_cache: LRU

    if TYPE_CHECKING:  # what the mixin needs from its host, GitCheckpointSaver

        def _flush_deferred(self) -> None: ...
        def _ns(self, thread_id: Any, checkpoint_ns: Any) -> _Ns: ...
        def _loads(self, typed: Typed, what: str = "a checkpoint payload") -> Any: ...

    # ------------------------------------------------------------------ objects, cached
    def _blob(self, sha: str) -> bytes:
        data = self._blobs.get(sha)
        if data is None:
            data = self.repo.read_blob(sha)
            self._blobs.put(sha, data, len(data) + 80)
        return data

    def _ref_tip(self, name: str) -> str | None:
        """The commit a ref of :class:`~got_integrations.langgraph._layout.ThreadRef` points to, or None.

        ``repo.tip`` without its name check: ThreadRef builds every name from encoded components,
        and libgit2's lookup refuses (None) any name it would not accept; in a new process the check
        was about half of what reading a missing ref costs (a cold ``get_tuple`` reads three refs).
        """
        git = self.repo.git
        target = git.ref_target(name)
        return git.peel_to_commit(target) if target else None

    def _head_tip(self, ns: _Ns) -> str | None:
        """The commit ``head`` points to (:meth:`_ref_tip`), its root tree noted from the same lookup
        of the commit (the read that follows needs it: a cold read then looks the commit up once)."""
        git = self.repo.git
        target = git.ref_target(ns.ref.head)
        found = git.commit_and_tree(target) if target else None
        if found is None:
            return None
        commit, tree = found
        self._roots.put(commit, tree)
        return commit

    def _tree(self, commit: str) -> Listing:
        """The files of a checkpoint commit (a :class:`Listing`: read it with ``get``), listed
        once per process."""
        files = self._files.get(commit)
        if files is None:
            files = Listing(self.repo.list_files(commit))
            self._files.put(commit, files, len(files) + 1)
        return files

    def _root(self, commit: str) -> str:
        """The root tree of a checkpoint commit, read once per process (a commit never changes).

        Raises:
            CorruptRepositoryError: the object is missing or is not a commit.
        """
        tree = self._roots.get(commit)
        if tree is None:
            tree = self.repo.git.commit_tree(commit)
            self._roots.put(commit, tree)
        return tree

    def _file_ids(self, commit: str, paths: builtins.list[str]) -> dict[str, str | None]:
        """Blob SHA (None: absent) of each of ``paths`` in a checkpoint commit: from the listing this
        process holds, else looked up by path in the commit's tree, which a cold read reads once for
        all of them (no directory is listed; the commit itself is read once per process).

        Raises:
            CorruptRepositoryError: the commit or a tree on the way is missing or damaged.
        """
        files = self._files.get(commit)
        if files is not None:
            return {p: files.get(p) for p in paths}
        return self.repo.git.tree_entries(self._root(commit), paths)

    def _doc(self, commit: str, full: bool = True) -> dict[str, Any]:
        """The parsed ``checkpoint.json`` of a commit (a fresh dict on every call). With
        ``full``, the exact header and metadata from ``checkpoint.bin`` replace the readable
        ones where the saver stored them there (values JSON cannot carry, or encryption).

        Raises:
            CorruptRepositoryError: the commit holds no checkpoint the saver wrote.
        """
        data = self._docs.get(commit)
        if data is None:
            sha = self._file_ids(commit, ["checkpoint.json"])["checkpoint.json"]
            if sha is None:
                raise CorruptRepositoryError(
                    f"commit {commit[:12]} has no checkpoint.json; it is not a LangGraph checkpoint"
                )
            data = self.repo.read_blob(sha)
            self._docs.put(commit, data, len(data) + 80)
        what = f"checkpoint.json of commit {commit[:12]}"
        doc = check_checkpoint_doc(parse_json(data, what), what)
        if full and doc.get("exact"):
            what = f"checkpoint.bin of commit {commit[:12]}"
            sha = self._file_ids(commit, ["checkpoint.bin"])["checkpoint.bin"]
            if sha is None:
                raise CorruptRepositoryError(f"commit {commit[:12]} lacks checkpoint.bin; run `got fsck`")
            raw = self.repo.read_blob(sha)
            exact = self._loads(unframe(raw, what), what)
            if not (
                isinstance(exact, dict)
                and isinstance(exact.get("checkpoint"), dict)
                and isinstance(exact.get("metadata"), dict)
            ):
                raise CorruptRepositoryError(f"{what} does not hold a checkpoint header and metadata")
            doc["checkpoint"], doc["metadata"] = exact["checkpoint"], exact["metadata"]
        return doc

    def _id_of(self, ns: _Ns, commit: str) -> str:
        known = ns.known.get(commit)
        return known[1] if known else self._doc(commit, full=False)["checkpoint_id"]

    def _loads_list(self, typed: list[Typed], name_of: Any = "list element {}".format) -> list[Any]:
        if typed and not self.encrypted and all(t == "msgpack" for t, _ in typed):
            # one msgpack array from the element encodings: a single decode, the same values
            try:
                value = self.serde.loads_typed(("msgpack", join_msgpack_array([d for _, d in typed])))
            except (ValueError, TypeError, KeyError, IndexError, OverflowError):
                value = None  # a damaged element: decoded one by one below, so the error names it
            if isinstance(value, list) and len(value) == len(typed):
                return value
        return [self._loads(t, name_of(i)) for i, t in enumerate(typed)]

    # ------------------------------------------------------------------ index of one namespace
    def _walk(self, ns: _Ns, tip: str) -> None:
        commit: str | None = tip
        while commit is not None and commit not in ns.known:
            cid = self._id_of(ns, commit)
            try:
                parent: str | None = self.repo.resolve(commit + "^")
            except UnknownRefError:
                parent = None
            ns.note(commit, parent, cid)
            commit = parent

    def _leaves(self, ns: _Ns) -> dict[str, str]:
        """Ref name -> commit for ``head`` and the fork refs of a namespace."""
        head = self._ref_tip(ns.ref.head)
        out = {ns.ref.head: head} if head is not None else {}
        out.update(self.repo.refs(ns.ref.prefix + "forks/"))
        return out

    def _refresh(self, ns: _Ns) -> builtins.list[tuple[str, str]]:
        """Re-read a namespace's refs; returns the reachable (checkpoint id, commit) pairs."""
        leaves = self._leaves(ns)
        ids: dict[str, str] = {}
        seen: set[str] = set()
        for name in sorted(leaves, key=lambda n: n != ns.ref.head):
            self._walk(ns, leaves[name])
            commit: str | None = leaves[name]
            while commit is not None and commit not in seen:
                if commit not in ns.known:
                    # put() records a new commit whose parent this process never walked
                    # (a fresh saver resuming a thread): walk on from there
                    self._walk(ns, commit)
                seen.add(commit)
                parent, cid = ns.known[commit]
                ids.setdefault(cid, commit)
                commit = parent
        ns.ids = ids
        ns.head = leaves.get(ns.ref.head)
        return builtins.list(ids.items())

    def _sync_lines(self, ns: _Ns) -> str | None:
        """Learn the commits added to the namespace's lines since they were walked; returns ``head``'s tip."""
        leaves = self._leaves(ns)
        for tip in leaves.values():
            if tip not in ns.known:
                self._walk(ns, tip)
        ns.head = leaves.get(ns.ref.head)
        return ns.head

    def _lookup(self, ns: _Ns, checkpoint_id: str) -> str | None:
        commit = ns.ids.get(checkpoint_id)
        if commit is None:
            self._refresh(ns)
            commit = ns.ids.get(checkpoint_id)
        return commit

    # ------------------------------------------------------------------ channel values
    def _read_list(self, commit: str, base: str, length: int, at: str) -> builtins.list[Typed]:
        """The element encodings of a list channel: segments where the checkpoint has them,
        element files for the rest (ARCHITECTURE §4: ``<channel>/segments/``).

        A cold read of a list of up to :data:`_SEGMENTS_BY_PATH` segments looks them up by path
        together with the few elements after the last one (one ``tree_entries`` pass); a list of
        more (or a claimed length no tree holds) lists the ``segments/`` directory instead (its
        real entries) and looks the elements after the last segment up by path, and a run of more
        than :data:`_BY_PATH` elements without a segment (an older saver's checkpoint) lists their
        bucket directory. The commit's tree is read once for all of it.
        """
        files = self._files.get(commit)  # the whole listing, when this process has it
        ranges = segment_ranges(length)
        elements: dict[str, str | None] = {}  # element path -> blob, for the runs looked up so far
        tail = length  # the elements from here on were looked up with the segments (cold read)
        listing: Mapping[str, str | None] | None = files
        if files is None and 0 < len(ranges) <= _SEGMENTS_BY_PATH:
            # a few segments: looked up by path with the elements after the last one (fewer than
            # SEGMENT), all in one pass over the commit's tree; no directory is listed
            end = ranges[-1][0] + ranges[-1][1]
            after = [elem_path(base, k) + ".bin" for k in range(end, length)]
            listing = self.repo.git.tree_entries(
                self._root(commit), [segment_path(base, s, c) for s, c in ranges] + after
            )
            elements.update((p, listing[p]) for p in after)
            tail = end
        elif files is None and ranges:  # many (or a claimed length no tree holds): the real entries
            listing = self.repo.git.tree_files(self._root(commit), segments_dir(base))
        segments: dict[int, tuple[int, str, str]] = {}
        for start, count in ranges:
            path = segment_path(base, start, count)
            sha = listing.get(path) if listing is not None else None
            if sha is not None:
                segments[start] = (count, path, sha)
        starts = sorted(segments)
        looked = 0  # elements below this index were looked up (cold read)
        out: builtins.list[Typed] = []
        i = 0
        while i < length:
            if i in segments:
                count, path, sha = segments[i]
                out.extend(unpack_segment(self.repo.read_blob(sha), count, f"{path} {at}"))
                i += count
                continue
            path = elem_path(base, i) + ".bin"
            if files is not None:
                elem = files.get(path)
            else:
                if i == tail and i >= looked:  # the elements after the last segment: looked up with it
                    looked = length
                elif i >= looked:  # the run of elements from i to the next segment or bucket
                    nxt = bisect.bisect_right(starts, i)
                    looked = min(length, (i // BUCKET + 1) * BUCKET, starts[nxt] if nxt < len(starts) else length)
                    elements.update(self._element_ids(commit, base, i, looked))
                elem = elements.get(path)
            if elem is None:
                raise CorruptRepositoryError(f"checkpoint {commit[:12]} lacks '{path}'; run `got fsck`")
            out.append(unframe(self._blob(elem), f"{path} {at}"))
            i += 1
        return out

    def _element_ids(self, commit: str, base: str, start: int, end: int) -> dict[str, str | None]:
        """The ``.bin`` blobs of elements ``start`` to ``end - 1`` (one bucket): by path when few, else
        from a listing of the bucket directory."""
        root = self._root(commit)
        if end - start <= _BY_PATH:
            return self.repo.git.tree_entries(root, [elem_path(base, k) + ".bin" for k in range(start, end)])
        return dict(self.repo.git.tree_files(root, f"{base}/{start // BUCKET:03d}"))

    def _values(self, commit: str, doc: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        at = f"of commit {commit[:12]}"
        for name, info in doc["channels"].items():
            if info["kind"] == "inline":
                what = f"the inline value of channel {name!r} in checkpoint.json {at}"
                values[name] = self._loads(decode_exact(info["exact"], what), what)
                continue
            base = info["dir"]
            if info["kind"] == "value":
                path = base + "/value.bin"
                sha = self._file_ids(commit, [path])[path]
                if sha is None:
                    raise CorruptRepositoryError(f"checkpoint {commit[:12]} lacks '{path}'; run `got fsck`")
                data = self._blob(sha)
                values[name] = self._loads(unframe(data, f"{path} {at}"), f"{path} {at}")
                continue
            typed = self._lists.get((commit, name))
            if typed is None:
                typed = self._read_list(commit, base, info["length"], at)
                self._lists.put((commit, name), typed, sum(len(d) for _, d in typed) + 64 * len(typed))
            values[name] = self._loads_list(typed, lambda i, base=base: f"{elem_path(base, i)}.bin {at}")
        return values

    def _tuple(self, ns: _Ns, commit: str, config: RunnableConfig | None, at_head: bool) -> CheckpointTuple:
        doc = self._doc(commit)
        cid = doc["checkpoint_id"]
        t, n = ns.ref.thread_id, ns.ref.checkpoint_ns
        parent = doc.get("parent_checkpoint_id")
        header: Checkpoint = doc["checkpoint"]  # a JSON object (check_checkpoint_doc): the header put() stored
        return CheckpointTuple(
            config=config or {"configurable": {"thread_id": t, "checkpoint_ns": n, "checkpoint_id": cid}},
            checkpoint={**header, "channel_values": self._values(commit, doc)},
            metadata=doc["metadata"],
            parent_config=(
                {"configurable": {"thread_id": t, "checkpoint_ns": n, "checkpoint_id": parent}} if parent else None
            ),
            pending_writes=self._pending_writes(ns, cid, None if at_head else commit),
        )

    # ------------------------------------------------------------------ pending writes
    def _carriers(self, ns: _Ns, commit: str | None) -> builtins.list[str]:
        """The known children of ``commit`` that carry handed-over writes (``CARRIED``)."""
        out = []
        for child in ns.children.get(commit, ()) if commit is not None else ():
            paths = self._carried.get(child)
            if paths is None:
                files = self._files.get(child)
                if files is None:
                    paths = builtins.list(self.repo.list_files(child, CARRIED))
                else:
                    paths = [p for p, sha in files.items() if sha is not None and p.startswith(CARRIED + "/")]
                self._carried.put(child, paths)
            if paths:
                out.append(child)
        return out

    def _writes_docs(self, ns: _Ns, checkpoint_id: str, commit: str | None = None) -> builtins.list[dict[str, Any]]:
        """The writes files of a checkpoint: its ``pending/<id>`` ref's, merged with those its
        children carry (``commit``: the checkpoint's commit, None when it is ``head``'s tip,
        which never has them), then those of the single ``writes`` ref an earlier saver kept,
        for tasks neither has a file of."""
        pending = ns.ref.pending(checkpoint_id)
        tip = self._ref_tip(pending)
        # no earlier saver's writes ref holds writes of a checkpoint this saver put: not read for those
        legacy = None if checkpoint_id in ns.mine else self._ref_tip(ns.ref.writes)
        carriers = self._carriers(ns, commit)
        if tip is None and legacy is None and not carriers:
            return []
        key = (tip, legacy, checkpoint_id, *carriers)
        docs = self._writes_cache.get(key)
        if docs is None:
            docs = []
            if tip is not None:
                for path, sha in sorted(self.repo.list_files(tip).items()):
                    what = f"writes file {path} of {pending} (commit {tip[:12]})"
                    doc = check_writes_doc(parse_json(self._blob(sha), what), what)
                    docs.append({**doc, "path": f"{pending}:{path}"})
            by_task = {d["task_id"]: d for d in docs}
            for child in carriers:  # a running graph handed these over to the next checkpoint
                for path, sha in sorted(self.repo.list_files(child, CARRIED).items()):
                    what = f"writes file {path} of commit {child[:12]}"
                    doc = check_writes_doc(parse_json(self._blob(sha), what), what)
                    if doc.get("checkpoint_id") != checkpoint_id:
                        continue  # left from before a rewrite gave the commit another parent
                    stored = by_task.get(doc["task_id"])
                    if stored is None:
                        by_task[doc["task_id"]] = doc = {**doc, "path": f"{child}:{path}"}
                        docs.append(doc)
                        continue
                    idx = {w["idx"] for w in stored["writes"]}  # a write is stored once: the first copy counts
                    stored["writes"] = [*stored["writes"], *(w for w in doc["writes"] if w["idx"] not in idx)]
            if legacy is not None:
                tasks = {d["task_id"] for d in docs}
                stem = writes_stem(checkpoint_id)
                for path, sha in sorted(self.repo.list_files(legacy, writes_bucket(checkpoint_id)).items()):
                    if path.startswith(stem):
                        what = f"writes file {path} of commit {legacy[:12]}"
                        doc = check_writes_doc(parse_json(self._blob(sha), what), what)
                        if doc["task_id"] not in tasks:
                            docs.append({**doc, "path": path})
            self._writes_cache.put((tip, legacy, checkpoint_id), docs)
        return docs

    def _pending_writes(self, ns: _Ns, checkpoint_id: str, commit: str | None) -> builtins.list[PendingWrite]:
        rows = [
            (d.get("task_path", ""), d["task_id"], w["idx"], w["channel"], w["exact"], d["path"])
            for d in self._writes_docs(ns, checkpoint_id, commit)
            for w in d["writes"]
        ]
        rows.sort(key=lambda r: writes_sort_key(r[0], r[1], r[2]))
        out = []
        for _, task_id, idx, channel, exact, path in rows:
            what = f"write {idx} ({channel!r}) in {path}"
            out.append((task_id, channel, self._loads(decode_exact(exact, what), what)))
        return out

    # ------------------------------------------------------------------ the saver's read API
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (its ``checkpoint_id``, else the latest), or None.

        Pending writes come back in ``writes_sort_key`` order (task path, task id, index).
        """
        self._flush_deferred()  # a running graph's queued writes are read too
        conf = config["configurable"]
        ns = self._ns(conf["thread_id"], conf.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            commit = self._lookup(ns, text_id(checkpoint_id, "checkpoint id"))
            if commit is None:
                return None
            # the lines as they are now: a child another process put may carry this checkpoint's writes
            return self._tuple(ns, commit, config, at_head=commit == self._sync_lines(ns))
        commit = self._head_tip(ns)
        return None if commit is None else self._tuple(ns, commit, None, at_head=True)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (highest id first): of one thread (and namespace, when the
        config names one), whose metadata has every ``filter`` item, older than ``before``."""
        self._flush_deferred()  # a running graph's queued writes are read too
        if config is not None:
            conf = config["configurable"]
            thread_ids, only_ns = [text_id(conf["thread_id"], "thread id")], conf.get("checkpoint_ns")
            only_id = get_checkpoint_id(config)
        else:
            thread_ids, only_ns, only_id = self.threads(), None, None
        before_id = get_checkpoint_id(before) if before else None
        rows: builtins.list[tuple[str, _Ns, str]] = []
        for thread_id in thread_ids:
            for checkpoint_ns in self.namespaces(thread_id):
                if only_ns is None or checkpoint_ns == only_ns:
                    ns = self._ns(thread_id, checkpoint_ns)
                    rows.extend((cid, ns, commit) for cid, commit in self._refresh(ns))
        rows.sort(key=lambda r: r[0], reverse=True)
        remaining = limit
        for cid, ns, commit in rows:
            if (only_id and cid != only_id) or (before_id and cid >= before_id):
                continue
            if filter:
                meta = self._doc(commit)["metadata"]
                if not all(meta.get(k) == v for k, v in filter.items()):
                    continue
            if remaining is not None:
                if remaining <= 0:
                    return
                remaining -= 1
            yield self._tuple(ns, commit, None, at_head=commit == ns.head)

    def threads(self) -> builtins.list[str]:
        """Every thread id with checkpoints in the repository."""
        self._flush_deferred()  # a running graph's queued writes are read too
        out = set()
        for name, oid in self.repo.refs(THREADS_REF).items():
            thread = decode_id(name[len(THREADS_REF) :].split("/", 1)[0])
            if thread is None and name.endswith("/head"):  # a hashed long id: read it from the checkpoint
                thread = self._doc(oid, full=False)["thread_id"]
            if thread is not None:
                out.add(thread)
        return sorted(out)

    def namespaces(self, thread_id: str) -> builtins.list[str]:
        """The checkpoint namespaces of a thread (``""`` is the root graph)."""
        self._flush_deferred()  # a running graph's queued writes are read too
        prefix = f"{THREADS_REF}{id_component(text_id(thread_id, 'thread id'), 'thread id')}/"
        out = set()
        for name, oid in self.repo.refs(prefix).items():
            ns = decode_id(name[len(prefix) :].split("/", 1)[0], namespace=True)
            if ns is None and name.endswith("/head"):
                ns = self._doc(oid, full=False)["checkpoint_ns"]
            if ns is not None:
                out.add(ns)
        return sorted(out)
