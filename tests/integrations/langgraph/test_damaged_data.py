"""Damaged or foreign data and hostile input: typed errors naming the object, or faithful round trips.

Each damage is written with raw commits on the saver's or store's own refs (as another
writer of the repository could), then read by a fresh saver or store (no caches). Never
a raw KeyError / TypeError / ValueError / UnicodeDecodeError.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.base import InvalidNamespaceError

from got_core.errors import CorruptRepositoryError, InvalidNameError
from got_integrations.langgraph import GitCheckpointSaver, GitStore, InvalidStoreNameError
from got_integrations.langgraph._layout import ThreadRef, encode_exact, frame, task_file

HEAD = "refs/got/threads/t/root/head"
CFG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _checkpoint(tmp_path):
    """A checkpoint with a value channel ``x``, a list channel ``m`` and one pending write."""
    saver = GitCheckpointSaver.from_path(tmp_path / "cp.git")
    checkpoint = {
        **empty_checkpoint(),
        "channel_values": {"x": "y" * 200, "m": ["a" * 50, "b" * 50]},
        "channel_versions": {"x": "1", "m": "1"},
    }
    stored = saver.put(CFG, checkpoint, {"source": "input", "step": -1}, {"x": "1", "m": "1"})
    saver.put_writes(stored, [("x", "z" * 10)], "task-1")
    return saver, stored


def _tamper(saver, ref: str, changes: dict) -> GitCheckpointSaver:
    saver.repo.commit_files(ref, changes, "tamper\n", expected=saver.repo.tip(ref))
    return GitCheckpointSaver.from_path(saver.repo.gitdir)


def _bin(saver, path: str) -> bytes:
    return saver.repo.read_file(saver.repo.tip(HEAD), path)


@pytest.mark.parametrize("case", ["garbage", "truncated", "no tag line", "list element", "not ascii tag"])
def test_a_damaged_bin_file_names_itself(tmp_path, case):
    saver, _ = _checkpoint(tmp_path)
    path, data = {
        "garbage": ("x/value.bin", frame(("msgpack", b"\xc1\xc1\xc1 not msgpack"))),
        "truncated": ("x/value.bin", _bin(saver, "x/value.bin")[:-100]),
        "no tag line": ("x/value.bin", b"\x00\x01\x02"),
        "list element": ("m/000/000001.bin", frame(("msgpack", b"\xdc\xff\xff"))),
        "not ascii tag": ("x/value.bin", b"\xff\xfe\n\x01"),
    }[case]
    reader = _tamper(saver, HEAD, {path: data})
    with pytest.raises(CorruptRepositoryError, match=path.replace(".", r"\.")):
        reader.get_tuple(CFG)


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe\x00", b"[]", b'{"checkpoint_id": 5}', "shape"])
def test_a_damaged_checkpoint_json_names_its_commit(tmp_path, data):
    saver, _ = _checkpoint(tmp_path)
    if data == "shape":  # valid JSON, every field present, one channel entry of the wrong shape
        doc = json.loads(_bin(saver, "checkpoint.json"))
        doc["channels"]["m"] = {"kind": "list", "dir": "m", "length": "two"}
        data = json.dumps(doc).encode()
    reader = _tamper(saver, HEAD, {"checkpoint.json": data})
    with pytest.raises(CorruptRepositoryError, match=r"checkpoint\.json of commit [0-9a-f]{12}"):
        reader.get_tuple(CFG)
    with pytest.raises(CorruptRepositoryError):
        list(reader.list(CFG))


@pytest.mark.parametrize("case", ["not json", "no writes", "bad base64", "bad bytes", "bad idx"])
def test_a_damaged_writes_file_names_itself(tmp_path, case):
    saver, stored = _checkpoint(tmp_path)
    path = task_file("task-1")
    pending = ThreadRef("t", "").pending(stored["configurable"]["checkpoint_id"])
    good = json.loads(saver.repo.read_file(saver.repo.tip(pending), path))
    write = good["writes"][0]
    data = {
        "not json": b"\x00garbage",
        "no writes": json.dumps({"task_id": "task-1"}).encode(),
        "bad base64": json.dumps(
            {**good, "writes": [{**write, "exact": {"type": "msgpack", "base64": "!!"}}]}
        ).encode(),
        "bad bytes": json.dumps({**good, "writes": [{**write, "exact": encode_exact(("msgpack", b"\xc1"))}]}).encode(),
        "bad idx": json.dumps({**good, "writes": [{**write, "idx": "0"}]}).encode(),
    }[case]
    reader = _tamper(saver, pending, {path: data})
    with pytest.raises(CorruptRepositoryError, match=path.split("/")[-1][:20]):
        reader.get_tuple(stored)
    # adding a write to a file whose structure is damaged refuses too; nothing stored is lost
    if case in ("not json", "no writes", "bad idx"):
        with pytest.raises(CorruptRepositoryError, match=path.split("/")[-1][:20]):
            reader.put_writes(stored, [("x", 1)], "task-1")
    assert reader.repo.read_file(reader.repo.tip(pending), path) == data


def _store(tmp_path, **options):
    store = GitStore(tmp_path / "store.git", **options)
    store.put(("docs", "a"), "k1", {"text": "hello"})
    return store, store._path(("docs", "a"), "k1")


@pytest.mark.parametrize(
    "data", [b"{oops", b"\xff\xfe", b"[1]", b'{"namespace": ["docs", "a"], "key": "k1"}', "bad time"]
)
def test_a_damaged_store_item_names_itself(tmp_path, data):
    store, path = _store(tmp_path)
    if data == "bad time":
        doc = json.loads(store.repo.read_file(store.repo.tip(store.ref), path))
        data = json.dumps({**doc, "updated_at": "yesterday"}).encode()
    store.repo.commit_files(store.ref, {path: data}, "tamper\n")
    fresh = GitStore(store.repo.gitdir)
    for read in (
        lambda: fresh.get(("docs", "a"), "k1"),
        lambda: fresh.search(("docs",)),
        lambda: fresh.list_namespaces(),
    ):
        with pytest.raises(CorruptRepositoryError, match=path.split("/")[-1]):
            read()


def test_a_damaged_encrypted_store_value_is_a_typed_error(tmp_path):
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16)
    store, path = _store(tmp_path, serde=serde)
    doc = json.loads(store.repo.read_file(store.repo.tip(store.ref), path))
    doc["exact"]["base64"] = doc["exact"]["base64"][:-8] + "AAAAAAA="
    store.repo.commit_files(store.ref, {path: json.dumps(doc).encode()}, "tamper\n")
    with pytest.raises(CorruptRepositoryError, match="wrong key, or the data was altered"):
        GitStore(store.repo.gitdir, serde=serde).get(("docs", "a"), "k1")
    # a readable value planted in a store whose values are all encrypted is refused, not trusted
    plain = {**{k: v for k, v in doc.items() if k != "exact"}, "value": {"text": "planted"}}
    store.repo.commit_files(store.ref, {path: json.dumps(plain).encode()}, "plant\n")
    with pytest.raises(CorruptRepositoryError, match="encrypted"):
        GitStore(store.repo.gitdir, serde=serde).get(("docs", "a"), "k1")


# ---------------------------------------------------------------------------- hostile input (item 9)
@pytest.mark.parametrize("bad", [b"t1", bytearray(b"t1")])
def test_bytes_thread_ids_are_refused_not_stored_as_their_repr(tmp_path, bad):
    saver = GitCheckpointSaver.from_path(tmp_path / "b.git")
    config = {"configurable": {"thread_id": bad, "checkpoint_ns": ""}}
    with pytest.raises(InvalidNameError, match="bytes"):
        saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    for call in (
        lambda: saver.get_tuple(config),
        lambda: list(saver.list(config)),
        lambda: saver.delete_thread(bad),
        lambda: saver.copy_thread(bad, "t2"),
        lambda: saver.put_writes({"configurable": {"thread_id": "t", "checkpoint_id": b"1"}}, [], "x"),
    ):
        with pytest.raises(InvalidNameError, match="bytes"):
            call()
    assert saver.threads() == [] and saver.repo.refs("refs/got/") == {}


def test_bytes_store_keys_are_refused_and_bytes_labels_too(tmp_path):
    store = GitStore(tmp_path / "s.git")
    for call in (
        lambda: store.put(("a",), b"k", {"v": 1}),
        lambda: store.get(("a",), b"k"),
        lambda: store.delete(("a",), b"k"),
        lambda: asyncio.run(store.aput(("a",), b"k", {"v": 1})),
        lambda: asyncio.run(store.aget(("a",), b"k")),
        lambda: asyncio.run(store.adelete(("a",), b"k")),
    ):
        with pytest.raises(InvalidStoreNameError, match="bytes"):
            call()
    with pytest.raises(InvalidNamespaceError):
        store.put((b"a",), "k", {"v": 1})
    assert store.search(()) == [] and store.repo.tip(store.ref) is None
    # text keys, numbers and UUIDs are what LangGraph's stores make of them: their str()
    store.put(("a",), 7, {"v": 1})
    assert store.get(("a",), "7").value == {"v": 1}


def test_lone_surrogates_round_trip_in_metadata_values_and_store_items(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "u.git")
    odd = "half \ud800 a pair"
    checkpoint = {**empty_checkpoint(), "channel_values": {"x": odd}, "channel_versions": {"x": "1"}}
    stored = saver.put(CFG, checkpoint, {"source": "input", "step": -1, "note": odd}, {"x": "1"})
    saver.put_writes(stored, [("x", odd)], "task-1")
    fresh = GitCheckpointSaver.from_path(tmp_path / "u.git").get_tuple(CFG)
    assert fresh.metadata["note"] == odd
    store = GitStore(tmp_path / "u.git")
    store.put(("a",), "k", {"text": odd})
    assert GitStore(tmp_path / "u.git").get(("a",), "k").value == {"text": odd}
