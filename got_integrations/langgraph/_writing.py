"""Writing side of :class:`~got_integrations.langgraph.GitCheckpointSaver`: ``put`` (one
commit on the thread's line); ``put_writes`` and the pending refs are in
:mod:`~got_integrations.langgraph._pending`.

What a super-step costs (ARCHITECTURE §6: files created are what a write costs): ``put``
writes the commit, the root tree, the changed channel directories, ``checkpoint.json``
and the new element's two files, typically 7 objects, and moves ``head``; a segment is
added every 10 elements (and a bucket's segment every 100), and the element that
completes it gets no ``.bin`` of its own (nor, from then on, do the others it covers).
A put of many new elements at once (a resumed
or restored state, the one checkpoint ``durability="exit"`` saves) writes their segments
and renderings only: half the blobs.

Inside a running graph, the writes of the step before (``put_writes`` hands them over,
see :mod:`~got_integrations.langgraph._pending`) go into the checkpoint's own tree
(``parent~writes/<task>.json``) when it moves ``head`` on from its parent: a super-step is
one ref move and one pack (a checkpoint that goes on a fork instead creates
``pending/<parent id>`` in the same ref transaction). LangGraph saves a step's writes
before the checkpoint that applies them, so the checkpoint never becomes visible without them.
``benchmarks/langgraph_saver.py`` measures the pygit2 floor of these writes beside
SqliteSaver, with two ref writes a step and with one.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from got_core.errors import ConcurrentUpdateError, CorruptRepositoryError
from got_core.repo import Keep, Publish
from got_integrations.langgraph._history import _Ns
from got_integrations.langgraph._layout import (
    CARRIED,
    FORMAT,
    SEGMENT,
    Listing,
    blob_sha,
    channel_dir,
    elem_path,
    encode_exact,
    fast_json,
    frame,
    json_roundtrips,
    jsonable,
    message_summary,
    render_json,
    segment_path,
    segment_ranges,
    split_msgpack_array,
    text_id,
)
from got_integrations.langgraph._pending import PendingOps, _WriteRequest
from got_integrations.langgraph._reading import Typed
from got_integrations.langgraph._render import checkpoint_message, update_segments

if TYPE_CHECKING:  # pragma: no cover
    from got_core.repo import ReasoningRepo
    from got_integrations.langgraph._layout import LRU

__all__ = ["INLINE_BYTES", "READABLE_HEADER", "WriteOps"]

#: Channel values whose serializer bytes fit in this many bytes are kept inline in checkpoint.json.
INLINE_BYTES = 96
#: Header fields of a checkpoint that stay readable when the saver encrypts (ids, time, versions).
READABLE_HEADER = ("v", "id", "ts", "channel_versions", "versions_seen", "updated_channels")


class _Stored(NamedTuple):
    """What one ``put`` wrote: the commit, its files and encodings, where it went."""

    oid: str
    files: Listing
    doc: bytes
    lists: dict[str, tuple[list[Typed], int]]  # channel -> (element encodings, cache weight)
    parent: str | None
    on_head: bool
    fork_of_parent: str | None = None
    channels: dict[str, Any] = {}  # noqa: RUF012 - a NamedTuple default, never mutated
    carried: bool = False  # the commit holds its parent's handed-over writes (CARRIED)


class WriteOps(PendingOps):
    """Mixin of the saver's writes; relies on the saver's repository, serializer and caches."""

    repo: ReasoningRepo
    readable: bool
    _lists: LRU
    _objs: LRU
    _files: LRU
    _docs: LRU
    _channels: LRU
    _carried: LRU
    #: Whether handed-over writes for a checkpoint's parent go into the checkpoint's tree (else a pending/ ref).
    _carry_writes: bool = True

    if TYPE_CHECKING:  # what the mixin needs from its host, GitCheckpointSaver

        def _ns(self, thread_id: Any, checkpoint_ns: Any) -> _Ns: ...
        def _tree(self, commit: str) -> Listing: ...
        def _doc(self, commit: str, full: bool = True) -> dict[str, Any]: ...
        def _id_of(self, ns: _Ns, commit: str) -> str: ...
        def _dumps(self, value: Any) -> Typed: ...
        def _leaves(self, ns: _Ns) -> dict[str, str]: ...
        def _lookup(self, ns: _Ns, checkpoint_id: str) -> str | None: ...
        def _read_list(self, commit: str, base: str, length: int, at: str) -> builtins.list[Typed]: ...

    # ------------------------------------------------------------------ encoding a checkpoint
    def _dump_list(
        self, value: builtins.list[Any], prev_objs: builtins.list[Any] | None, prev_typed: builtins.list[Typed] | None
    ) -> tuple[builtins.list[Typed], int]:
        """Element encodings of a list channel, and how many lead elements are the parent's own.

        Elements that are the very objects the parent checkpoint held (LangGraph's reducers
        keep old messages and append new ones) reuse the parent's encodings: like LangGraph's
        own channels, the saver treats state values as immutable — a message changed in place
        instead of replaced (``add_messages`` replaces by id) is not re-serialised.
        """
        keep = 0
        if prev_objs is not None and prev_typed is not None:
            both = min(len(value), len(prev_objs))
            limit = min(both, len(prev_typed))
            # map stops at the shorter list: an islice is needed only when the encodings are fewer
            # (it costs a fifth of the comparison of a long list)
            if all(map(operator.is_, value if both == limit else islice(value, limit), prev_objs)):
                keep = limit  # the parent's list, extended: compared at C speed (half the time of the loop)
            while keep < limit and value[keep] is prev_objs[keep]:
                keep += 1
        rest = value[keep:]
        head = prev_typed[:keep] if keep and prev_typed is not None else []  # a new list: extended in place
        if not rest:
            return head, keep
        whole = self._dumps(rest)
        if whole[0] == "msgpack":
            parts = split_msgpack_array(whole[1])
            if parts is not None and len(parts) == len(rest):
                head.extend([("msgpack", p) for p in parts])  # one serializer call for the new part
                return head, keep
        head.extend([self._dumps(item) for item in rest])
        return head, keep

    def _plan(
        self, checkpoint: Checkpoint, new_versions: ChannelVersions, parent: str | None
    ) -> tuple[dict[str, bytes | None], dict[str, Any], Listing, dict[str, tuple[list[Typed], int]], str]:
        """What changes from the parent's tree: (changes, channel index, new tree listing,
        element encodings of list channels with their cache weights, a one-line summary)."""
        # the parent's listing, copied for this checkpoint (a memcpy: removed paths are tombstones)
        files = self._tree(parent).copy_for_child() if parent else Listing()
        old_channels: dict[str, Any] = {}
        if parent:  # the channel index this process wrote, or the parent's checkpoint.json
            old_channels = self._channels.get(parent) or self._doc(parent, full=False)["channels"]
        readable = self.readable
        changes: dict[str, bytes | None] = {}
        lists: dict[str, tuple[list[Typed], int]] = {}
        summary = ""

        def put(path: str, data: bytes) -> None:
            if files.set(path, blob_sha(data)):
                changes[path] = data

        def remove(path: str) -> None:
            if files.drop(path):
                changes[path] = None

        def drop(info: dict[str, Any], keep: int = 0) -> None:
            """Remove a channel's files (a list's from element ``keep`` on, its segments beyond ``keep`` too)."""
            if info["kind"] == "inline":
                return
            base = info["dir"]
            if info["kind"] == "value":
                paths = [base + "/value.bin", base + "/value.json"]
            else:
                paths = [elem_path(base, i) + ext for i in range(keep, info["length"]) for ext in (".bin", ".json")]
                paths += [segment_path(base, s, n) for s, n in segment_ranges(info["length"]) if s + n > keep]
            for path in paths:
                remove(path)

        versions, values = checkpoint["channel_versions"], checkpoint["channel_values"]
        channels: dict[str, Any] = {}
        for name, version in versions.items():
            old = old_channels.get(name)
            if name not in new_versions and old is not None and old.get("version") == version:
                channels[name] = old  # unchanged since the parent: its files stay, nothing is serialised
                continue
            if name not in values:
                if old is not None:
                    drop(old)
                continue
            value, base = values[name], channel_dir(name)
            typed_value = None if type(value) is list else self._dumps(value)
            kind = "list" if typed_value is None else ("inline" if len(typed_value[1]) <= INLINE_BYTES else "value")
            if old is not None and (old["kind"] != kind or old.get("dir", base) != base or kind == "inline"):
                drop(old)  # the channel changed shape (or name encoding): its old files go
            if kind == "inline" and typed_value is not None:  # typed_value is None only for a list
                # small values (None, flags, counters) live in checkpoint.json, which changes anyway
                channels[name] = {"kind": "inline", "version": version, "exact": encode_exact(typed_value)}
                if readable:
                    channels[name]["value"] = jsonable(value)
                continue
            if kind == "value" and typed_value is not None:
                data = frame(typed_value)
                if files.get(base + "/value.bin") != blob_sha(data):
                    put(base + "/value.bin", data)
                    if readable:
                        put(base + "/value.json", render_json(value))
                    else:
                        remove(base + "/value.json")
                channels[name] = {"dir": base, "kind": "value", "version": version}
                continue
            same_list = old is not None and old["kind"] == "list" and old["dir"] == base
            previous = self._lists.get((parent, name)) if same_list else None
            prev_objs = self._objs.get((parent, name)) if previous is not None else None
            typed, keep = self._dump_list(value, prev_objs, previous)
            if same_list and previous is None and parent is not None and old is not None:
                # a writer that did not write the parent: its elements, from its segments
                try:
                    previous = self._read_list(parent, base, old["length"], f"of commit {parent[:12]}")
                except CorruptRepositoryError:
                    previous = None  # a damaged parent: the put carries the whole state, so write all of it
            first_changed = len(typed)
            # Elements a segment holds need no .bin of their own (a bulk put, e.g. the one
            # checkpoint durability="exit" saves, writes half the files); the rest always have one.
            covered = len(typed) - len(typed) % SEGMENT
            # elements before `keep` are the parent's very objects, so the parent's files
            for i in range(keep if prev_objs is not None else 0, len(typed)):
                item = typed[i]
                if previous is not None and i < len(previous) and previous[i] == item:
                    continue  # byte-identical to the parent's element: same blobs
                first_changed = min(first_changed, i)
                stem = elem_path(base, i)
                if i < covered:
                    remove(stem + ".bin")  # the segment has the bytes; an older .bin would contradict it
                else:
                    put(stem + ".bin", frame(item))
                if readable:
                    put(stem + ".json", render_json(value[i]))
                    summary = message_summary(value[i]) or summary
                else:
                    remove(stem + ".json")
            for i in range(covered, len(typed)):  # after a shrink, elements no segment holds any more
                if files.get(elem_path(base, i) + ".bin") is None:
                    put(elem_path(base, i) + ".bin", frame(typed[i]))
            if same_list and old is not None:
                drop(old, keep=len(value))
            update_segments(base, typed, first_changed, old["length"] if same_list and old else 0, files, put, remove)
            parent_weight = self._lists.weight((parent, name)) if previous is not None else None
            if parent_weight is not None and keep == len(previous or ()):
                weight = parent_weight + sum(len(d) + 64 for _, d in typed[keep:])
            else:
                weight = sum(len(d) + 64 for _, d in typed)
            lists[name] = (typed, weight)
            channels[name] = {"dir": base, "kind": "list", "length": len(value), "version": version}
        for name, old in old_channels.items():
            if name not in versions:
                drop(old)
        return changes, channels, files, lists, summary

    def _document(
        self,
        ns: _Ns,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        channels: dict[str, Any],
    ) -> tuple[bytes, bytes | None]:
        """``checkpoint.json`` and, when JSON cannot carry the header exactly (or the saver
        encrypts), ``checkpoint.bin`` with the serializer's bytes."""
        head = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        meta = get_checkpoint_metadata(config, metadata)
        doc: dict[str, Any] = {
            "format": FORMAT,
            "thread_id": ns.ref.thread_id,
            "checkpoint_ns": ns.ref.checkpoint_ns,
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": config["configurable"].get("checkpoint_id"),
            "checkpoint": head,
            "metadata": meta,
            "channels": channels,
        }
        if not self.readable:
            # metadata and the exact header only inside the serializer's (encrypted) bytes
            doc["checkpoint"] = jsonable({k: head[k] for k in READABLE_HEADER if k in head})
            del doc["metadata"]
            doc["exact"] = True
            return fast_json(doc), frame(self._dumps({"checkpoint": head, "metadata": meta}))
        encoded = json_roundtrips(doc)
        if encoded is not None:
            return encoded, None
        # versions or metadata that JSON cannot carry exactly: the serializer's bytes beside a rendering
        data = frame(self._dumps({"checkpoint": head, "metadata": meta}))
        doc["exact"] = True
        return render_json(doc), data

    def _message(
        self, ns: _Ns, checkpoint_id: str, parent_id: str | None, metadata: Mapping[str, Any], summary: str
    ) -> str:
        """A checkpoint's commit message (see :func:`checkpoint_message`)."""
        return checkpoint_message(self.readable, ns.ref, checkpoint_id, parent_id, metadata, summary)

    # ------------------------------------------------------------------ put
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Commit ``checkpoint`` as a child of its parent checkpoint's commit (one commit, one ref move).

        Returns:
            The config of the stored checkpoint (thread id, namespace, checkpoint id).

        Raises:
            ConcurrentUpdateError: another process kept moving the same thread's refs.
            UnsafePayloadError: a value needs pickle.
        """
        conf = config["configurable"]
        ns = self._ns(conf["thread_id"], conf.get("checkpoint_ns", ""))
        parent_id, repo = conf.get("checkpoint_id"), self.repo
        parent_id = text_id(parent_id, "checkpoint id") if parent_id else None
        new_id = text_id(checkpoint["id"], "checkpoint id")
        carry: dict[str, bytes | None] = {}  # the parent's handed-over task files (set by _put_with_writes)
        with ns.head_lock:

            def build(tip: str | None) -> Publish | Keep:
                head = tip
                head_id = self._id_of(ns, head) if head else None
                parent = (
                    head if parent_id and parent_id == head_id else (self._lookup(ns, parent_id) if parent_id else None)
                )
                changes, channels, files, lists, summary = self._plan(checkpoint, new_versions, parent)
                if parent is not None:
                    for path in self._carried_paths(parent, files):  # what the parent carries is its parent's
                        files.drop(path)
                        changes[path] = None
                # The next checkpoint of the line carries the writes handed over for its parent (no
                # pending/ ref): only when it moves head on from that parent, so head never has them.
                carried = bool(carry) and head is not None and parent == head and new_id > (head_id or "")
                if carried:
                    for name, data in carry.items():
                        if data is not None:
                            changes[f"{CARRIED}/{name}"] = data
                            files.set(f"{CARRIED}/{name}", blob_sha(data))
                doc_bytes, exact = self._document(ns, config, checkpoint, metadata, channels)
                changes["checkpoint.json"] = doc_bytes
                files.set("checkpoint.json", blob_sha(doc_bytes))
                if exact is not None:
                    changes["checkpoint.bin"] = exact
                    files.set("checkpoint.bin", blob_sha(exact))
                elif files.drop("checkpoint.bin"):
                    changes["checkpoint.bin"] = None
                message = self._message(ns, new_id, parent_id, metadata, summary)
                if head is not None and new_id < (head_id or ""):
                    # An id below the latest (ids that do not grow along a line): it stays off head.
                    oid = self._publish_fork(ns, parent, new_id, changes, message)
                    return Keep(_Stored(oid, files, doc_bytes, lists, parent, False, None, channels))
                # The latest checkpoint goes on `head`; the line it leaves keeps a fork ref.
                fork_of_parent = None
                if parent != head:
                    if parent is not None:
                        fork_of_parent = next(
                            (n for n, o in self._leaves(ns).items() if o == parent and n != ns.ref.head), None
                        )
                    if head is not None and new_id != head_id:
                        self._keep(ns, head, head_id or "")
                oid = repo.prepare_commit([parent] if parent else [], changes, message, fresh_tree=parent is None)
                stored = _Stored(oid, files, doc_bytes, lists, parent, True, fork_of_parent, channels, carried)
                return Publish(oid, stored)

            try:
                if ns.pending:  # writes a running graph handed over: they go in this put's ref transaction
                    with ns.writes_lock:
                        answer = self._put_with_writes(ns, build, self._take_queue(ns), parent_id, carry)
                elif ns.head:
                    answer = repo.update_ref(ns.ref.head, build, tip_hint=ns.head)
                else:
                    answer = repo.update_ref(ns.ref.head, build)
            except ConcurrentUpdateError:
                ns.head = None  # our view of the refs was stale: the next put re-reads them
                raise
            oid, files, doc_bytes, lists, parent = (answer.oid, answer.files, answer.doc, answer.lists, answer.parent)
            if answer.on_head:
                ns.head = oid
                if answer.fork_of_parent is not None:
                    repo.delete_ref(answer.fork_of_parent)  # now an ancestor of head
            self._files.put(oid, files, len(files) + 1)
            self._carried.put(oid, [f"{CARRIED}/{name}" for name in carry] if answer.carried else [])
            self._docs.put(oid, doc_bytes, len(doc_bytes) + 80)
            self._channels.put(oid, answer.channels, len(answer.channels) + 1)
            values = checkpoint["channel_values"]
            for name, (typed, weight) in lists.items():
                self._lists.put((oid, name), typed, weight)
                if isinstance(values.get(name), list):
                    self._objs.put((oid, name), builtins.list(values[name]), len(values[name]) + 1)
            ns.ids[new_id] = oid
            ns.note(oid, parent, new_id)
            ns.mine[new_id] = None
            if len(ns.mine) > 256:  # the checkpoints a running graph writes to next are enough
                del ns.mine[next(iter(ns.mine))]
        return {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": ns.ref.checkpoint_ns,
                "checkpoint_id": new_id,
            }
        }

    def _publish_fork(
        self, ns: _Ns, parent: str | None, new_id: str, changes: dict[str, bytes | None], message: str
    ) -> str:
        """Commit a checkpoint that is not the latest on a fork ref (the parent's, or a new one)."""
        repo, parents, fresh = self.repo, [parent] if parent else [], parent is None
        fork = (
            next((n for n, o in self._leaves(ns).items() if o == parent and n != ns.ref.head), None)
            if parent is not None
            else None
        )
        if fork is not None:
            return repo.commit_files(fork, changes, message, parents=parents, expected=parent, fresh_tree=fresh)
        return repo.commit_files(
            self._free_fork_name(ns, new_id), changes, message, parents=parents, expected=None, fresh_tree=fresh
        )

    def _free_fork_name(self, ns: _Ns, checkpoint_id: str) -> str:
        name = candidate = ns.ref.fork(checkpoint_id)
        taken = self.repo.refs(ns.ref.prefix + "forks/")
        n = 2
        while candidate in taken:
            candidate, n = f"{name}-{n}", n + 1
        return candidate

    def _keep(self, ns: _Ns, commit: str, checkpoint_id: str) -> None:
        """Make sure ``commit`` stays reachable through a fork ref of ``ns``."""
        if not any(o == commit and n != ns.ref.head for n, o in self._leaves(ns).items()):
            self.repo.set_ref(self._free_fork_name(ns, checkpoint_id), commit, expected=None)

    def _carried_paths(self, commit: str, files: Mapping[str, str | None]) -> builtins.list[str]:
        """The :data:`CARRIED` files of ``commit`` (whose listing is ``files``)."""
        paths = self._carried.get(commit)
        if paths is None:  # a commit this process did not write: its listing says
            prefix = CARRIED + "/"
            paths = [p for p, sha in files.items() if sha is not None and p.startswith(prefix)]
            self._carried.put(commit, paths)
        return builtins.list(paths)

    def _put_with_writes(
        self,
        ns: _Ns,
        build: Callable[[str | None], Publish | Keep],
        batch: builtins.list[_WriteRequest],
        parent_id: str | None,
        carry: dict[str, bytes | None],
    ) -> _Stored:
        """Publish a checkpoint and the queued writes of ``batch`` in one ref transaction (one
        pack): ``head`` moves, the writes for the checkpoint's parent go into the checkpoint's
        own tree (``carry``, filled here, :data:`CARRIED`) when it moves ``head`` on from that
        parent, and each other checkpoint's ``pending/`` ref is created or moved.

        The caller holds ``ns.writes_lock``. When the checkpoint cannot be published, the
        writes still are (on their own), and the checkpoint's error is raised.
        """
        if not batch:
            return self.repo.update_ref(ns.ref.head, build)
        groups = self._groups(batch)
        # ref names spelled by ThreadRef from encoded ids: update_refs checks each one it moves
        head = ns.ref.head
        carried_group = groups.pop(parent_id, None) if parent_id is not None and self._carry_writes else None
        carry_errors: dict[int, BaseException] = {}
        if carried_group is not None:
            # a pending/ tree of its own is not read: a reader merges what it holds with these
            files, carry_errors, _requests, _channels = self._writes_files(ns, None, carried_group)
            carry.update((path, data) for path, data in files.items())
        refs = {cid: ns.ref.pending(cid) for cid in groups}
        carry_ref = ns.ref.pending(parent_id) if carried_group is not None and parent_id is not None else ""
        seen: dict[str, Publish | Keep] = {}

        def build_all(tips: dict[str, str | None]) -> dict[str, str | None] | Keep:
            out: dict[str, str | None] = {}
            seen[""] = answer = build(tips[head])
            if isinstance(answer, Publish):
                out[head] = answer.target
            if carried_group is not None and not answer.value.carried:
                # the checkpoint went on a fork (or nowhere): its parent's writes get their pending/ ref
                seen[carry_ref] = writes = self._build_writes(ns, tips[carry_ref], carried_group)
                if isinstance(writes, Publish):
                    out[carry_ref] = writes.target
            for cid, group in groups.items():
                seen[cid] = writes = self._build_writes(ns, tips[refs[cid]], group)
                if isinstance(writes, Publish):
                    out[refs[cid]] = writes.target
            return out or Keep(None)

        # where this process's last moves left the refs: the first attempt reads none of them
        # (the compare-and-swap still checks each; a stale hint costs one more attempt)
        expected: dict[str, str | None] = {refs[cid]: ns.pending_tips.get(cid) for cid in groups}
        if ns.head:
            expected[head] = ns.head
        try:
            self.repo.update_refs([head, *refs.values()], build_all, expected=expected)
        except BaseException:
            self._commit_writes(ns, batch)  # the writes do not wait for a checkpoint that failed
            raise
        stored: _Stored = seen[""].value
        if carried_group is not None and parent_id is not None:
            if stored.carried:
                self._finish(carried_group, carry_errors)
            else:
                errors, tip = seen[carry_ref].value
                self._note_tip(ns, parent_id, tip)
                self._finish(carried_group, errors)
        for cid, group in groups.items():
            errors, tip = seen[cid].value
            self._note_tip(ns, cid, tip)
            self._finish(group, errors)
        return stored
