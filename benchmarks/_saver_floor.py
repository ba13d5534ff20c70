"""The pygit2 floor of a LangGraph super-step, for ``langgraph_saver.py``.

``FloorSaver`` answers ``put`` / ``put_writes`` with the least the git checkpointer's
layout writes per call, straight through pygit2 as loose objects (one file each, as the
saver writes them today), with no serializer, no checks and no caches: per ``put`` three
blobs (``checkpoint.json`` naming the thread, the new message's ``.bin`` and ``.json``),
three trees (root, channel directory, bucket; every tenth message also a segment blob
and the ``segments`` tree, the covered ``.bin`` files leaving the bucket), a commit and
one ref move; per ``put_writes`` one blob, a one-file tree, a commit and one ref written
(the checkpoint's ``pending/`` ref: created by its first writes). With ``one_move=True`` a
``put_writes`` writes the same objects but writes no ref: what a super-step would cost if
its writes rode on the checkpoint's own ref move. That is the git saver's layout inside a
running graph: it puts a step's writes into the next checkpoint's tree (``parent~writes/``),
in the same pack and the one ref move (and writes no commit of their own, which this floor
still does). The saver's cost over this floor is its own overhead; the floor's cost against SQLite's in the same run is what loose-object storage
pays on this disk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

_SIG = pygit2.Signature("floor", "floor@localhost", 0, 0)
_BLOB = pygit2.GIT_FILEMODE_BLOB
_TREE = pygit2.GIT_FILEMODE_TREE


@dataclass
class _Line:
    """One thread's tips as the floor keeps them in memory."""

    head: pygit2.Oid | None = None
    root: pygit2.Oid | None = None
    channel: pygit2.Oid | None = None
    bucket: pygit2.Oid | None = None
    length: int = 0
    segments: pygit2.Oid | None = None
    pending: dict[str, pygit2.Oid] = field(default_factory=dict)  # checkpoint id -> its writes ref's tip


class FloorSaver:
    """Writes what a super-step of ``GitCheckpointSaver`` writes, and nothing else."""

    def __init__(self, path: str | Path, *, one_move: bool = False) -> None:
        self.repo = pygit2.init_repository(str(path), bare=True)
        self.one_move = one_move
        self.lines: dict[str, _Line] = {}

    def _tree(
        self, base: pygit2.Oid | None, entries: dict[str, tuple[pygit2.Oid, int]], removed: list[str] | None = None
    ) -> pygit2.Oid:
        builder = self.repo.TreeBuilder(self.repo[base]) if base is not None else self.repo.TreeBuilder()
        for name in removed or ():
            if builder.get(name) is not None:
                builder.remove(name)
        for name, (oid, mode) in entries.items():
            builder.insert(name, oid, mode)
        return builder.write()

    def _move(self, name: str, old: pygit2.Oid | None, new: pygit2.Oid) -> None:
        if old is None:
            self.repo.references.create(name, new)
        else:
            self.repo.references[name].set_target(new)

    def put(self, config: dict[str, Any], checkpoint: dict[str, Any], metadata: Any, new_versions: Any) -> dict:
        thread = str(config["configurable"]["thread_id"])
        line = self.lines.setdefault(thread, _Line())
        head = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        doc = json.dumps({"thread_id": thread, "checkpoint": head}, default=str)  # one per thread, as the saver's
        messages = checkpoint["channel_values"].get("messages") or []
        last = repr(messages[-1]).encode() if messages else b"[]"
        i = max(len(messages) - 1, 0)
        entries = {f"{i:06d}.json": (self.repo.create_blob(last), _BLOB)}
        if (i + 1) % 10:  # the message that completes a segment has no .bin of its own
            entries[f"{i:06d}.bin"] = (self.repo.create_blob(b"msgpack\n" + last), _BLOB)
        channel_entries: dict[str, tuple[pygit2.Oid, int]] = {}
        removed: list[str] = []
        if (i + 1) % 10 == 0:  # a segment of the last ten messages; their own .bin files go
            segment = self.repo.create_blob(b"got-segment/1\n" + b"".join(repr(m).encode() for m in messages[-10:]))
            channel_entries["segments"] = (self._tree(line.segments, {f"{i - 9:06d}+10.bin": (segment, _BLOB)}), _TREE)
            removed = [f"{k:06d}.bin" for k in range(i - 9, i)]
        bucket = self._tree(line.bucket if i // 100 == line.length // 100 else None, entries, removed)
        channel_entries[f"{i // 100:03d}"] = (bucket, _TREE)
        channel = self._tree(line.channel, channel_entries)
        root = self._tree(
            line.root,
            {"checkpoint.json": (self.repo.create_blob(doc.encode()), _BLOB), "messages": (channel, _TREE)},
        )
        parents = [line.head] if line.head is not None else []
        commit = self.repo.create_commit(None, _SIG, _SIG, f"step {metadata.get('step')}\n", root, parents)
        self._move(f"refs/floor/{thread}/head", line.head, commit)
        if "segments" in channel_entries:
            line.segments = channel_entries["segments"][0]
        line.head, line.root, line.channel, line.bucket, line.length = commit, root, channel, bucket, i
        return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config: dict[str, Any], writes: Any, task_id: str, task_path: str = "") -> None:
        conf = config["configurable"]
        thread, cid = str(conf["thread_id"]), str(conf["checkpoint_id"])
        line = self.lines.setdefault(thread, _Line())
        data = json.dumps({"thread": thread, "writes": [[c, repr(v)] for c, v in writes]}).encode()
        name = f"refs/floor/{thread}/pending/{cid}"
        old = line.pending.get(cid)
        root = self._tree(
            self.repo[old].tree_id if old is not None else None,
            {f"{task_id}.json": (self.repo.create_blob(data), _BLOB)},
        )
        commit = self.repo.create_commit(None, _SIG, _SIG, f"writes {task_path}\n", root, [old] if old else [])
        if not self.one_move:
            self._move(name, old, commit)
        line.pending[cid] = commit
