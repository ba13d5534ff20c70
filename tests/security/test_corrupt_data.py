"""Damaged stored data is a CorruptRepositoryError naming the object, never a raw error.

Each store is written normally, then damaged with raw writes (pygit2 object writes
that bypass our validation, or bytes written straight into a backend's files), the way
a disk error, a crashed tool or a hostile peer leaves it.
"""

from __future__ import annotations

import json
import sqlite3

import pygit2
import pytest

from got_core import Node, ReasoningRepo
from got_core.cli import main
from got_core.errors import CorruptRepositoryError
from got_core.memory import get_backend
from got_core.memory.git import lesson_path
from got_core.testing import HashEmbedder

RAW_ERRORS = (KeyError, TypeError, UnicodeDecodeError, AttributeError, RecursionError)


def raw_commit(gitdir, ref: str, files: dict[str, bytes], message: str = "damage\n") -> str:
    """Commit ``files`` over the tip of ``ref`` with plain pygit2 calls (no validation of ours)."""
    r = pygit2.Repository(str(gitdir))
    target = r.references[ref].target if ref in r.references else None
    index = pygit2.Index()
    if target is not None:
        index.read_tree(r.get(target).tree)
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, r.create_blob(data), pygit2.GIT_FILEMODE_BLOB))
    tree = index.write_tree(r)
    sig = pygit2.Signature("disk", "disk@example.org", 1_700_000_000, 0)
    oid = r.create_commit(None, sig, sig, message, tree, [target] if target is not None else [])
    r.references.create(ref, oid, force=True)
    return str(oid)


def expect_corrupt(fn, *fragments: str) -> CorruptRepositoryError:
    try:
        fn()
    except CorruptRepositoryError as exc:
        for fragment in fragments:
            assert fragment in str(exc), (fragment, str(exc))
        return exc
    except RAW_ERRORS as exc:  # pragma: no cover - the bug this module guards against
        pytest.fail(f"raw {type(exc).__name__} from damaged data: {exc}")
    pytest.fail("damaged data was read without complaint")


# ---------------------------------------------------------------------------- notes
@pytest.mark.parametrize("body", [b"\xff\xfe not utf-8", b"{not json", b"[1, 2]", b"[" * 100_000])
def test_a_damaged_score_note_names_the_commit_and_its_blob(tmp_path, body):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    node = repo.commit_node(Node("120 / 1.5 = 80", scores={"s_comb": 0.9}))
    path = f"{node.oid[:2]}/{node.oid[2:]}"
    raw_commit(repo.gitdir, "refs/notes/got", {path: body})
    blob = str(pygit2.Repository(str(repo.gitdir)).revparse_single(f"refs/notes/got:{path}").id)
    fresh = ReasoningRepo(repo.gitdir)
    expect_corrupt(lambda: fresh.note_json(node.oid), node.oid, blob[:12], "refs/notes/got")
    expect_corrupt(lambda: fresh.read_node(node.oid), node.oid)
    expect_corrupt(lambda: fresh.commit_info(node.oid), node.oid)
    assert fresh.get_note(node.oid) == body  # the raw bytes are still there to inspect
    assert fresh.notes() == {node.oid: body}


def test_entries_of_a_notes_tree_that_are_not_notes_are_skipped(tmp_path):
    repo = ReasoningRepo.init(tmp_path / "r.git")
    node = repo.commit_node(Node("thought", scores={"s_comb": 0.5}))
    raw_commit(repo.gitdir, "refs/notes/got", {"README": b"not a note", "zz/" + "z" * 38: b"x"})
    assert ReasoningRepo(repo.gitdir).notes() == {node.oid: b'{\n  "s_comb": 0.5\n}\n'}


# ---------------------------------------------------------------------------- git memory
@pytest.mark.parametrize(
    "damage",
    [
        b"\xff\xfe\n",
        b'<!-- got-lesson {"lines": 1, "outcome": "insight", "score": "high", "topic_key": "units"} -->\nx\n',
        b'<!-- got-lesson {"lines": 3, "outcome": "insight", "score": 0.5, "topic_key": "units"} -->\ncut\n',
        b'<!-- got-lesson {"lines": 1, "outcome": "insight", "score": 0.5 -->\nx\n',
        b'<!-- got-lesson ["a list"] -->\nx\n',
    ],
)
def test_a_damaged_topic_file_on_the_memory_branch_names_its_path(tmp_path, damage):
    path = tmp_path / "mem.git"
    with get_backend("git", path=path) as mem:
        mem.add_insight("Check units before dividing.", topic_key="units")
    raw_commit(path, "refs/heads/memory", {lesson_path("units"): damage})
    with get_backend("git", path=path, create=False, read_only=True) as mem:
        expect_corrupt(mem.all_lessons, lesson_path("units"))
        expect_corrupt(lambda: mem.get_relevant("units dividing", 3), lesson_path("units"))


# ---------------------------------------------------------------------------- graph memory
GRAPH_LINES = [
    b'{"op": "add", "lesson": {"text": "trunc',
    b'{"op": "add", "lesson": {"text": 5, "outcome": "insight"}}',
    b'{"op": "add", "lesson": {"text": "ok", "outcome": "insight", "score": "high"}}',
    b'{"op": "add", "lesson": {"text": "ok", "outcome": "wizard"}}',
    b'{"op": "add", "lesson": {"text": "ok", "meta": [1]}}',
    b'["add"]',
    b"\xff\xfe",
    b"\x00" * 64,
    b"[" * 100_000,
]


@pytest.mark.parametrize("line", GRAPH_LINES, ids=range(len(GRAPH_LINES)))
def test_a_damaged_graph_journal_line_is_reported_with_its_number(tmp_path, line):
    path = tmp_path / "graph"
    with get_backend("graph", path=path, compact_min=1000) as mem:
        mem.add_insight("Check units before dividing.")
        mem.add_insight("Draw the triangle first.")
    # close() folded the journal into graph.json; write more entries after it, then damage
    mem = get_backend("graph", path=path, compact_min=1000)
    mem.add_insight("Estimate before computing.")
    journal = next(path.glob("graph.journal.*.jsonl"))
    with open(journal, "ab") as fh:
        fh.write(line + b"\n")
    before = journal.read_bytes()
    exc = expect_corrupt(lambda: get_backend("graph", path=path, read_only=True).all_lessons(), str(journal))
    assert "line 2" in str(exc)
    assert journal.read_bytes() == before  # left untouched


@pytest.mark.parametrize("edit", ["no-text", "score-type", "bad-kind", "bad-weight", "generation"])
def test_a_damaged_graph_snapshot_is_reported(tmp_path, edit):
    path = tmp_path / "graph"
    with get_backend("graph", path=path) as mem:
        mem.add_insight("Check units before dividing.")
    snap = json.loads((path / "graph.json").read_text())
    lesson = next(n for n in snap["graph"]["nodes"] if n.get("kind") == "lesson")
    if edit == "no-text":
        del lesson["text"]
    elif edit == "score-type":
        lesson["score"] = {"high": True}
    elif edit == "bad-kind":
        lesson["kind"] = "oracle"
    elif edit == "bad-weight":
        snap["graph"]["edges"][0]["weight"] = "heavy"
    else:
        snap["generation"] = "one"
    (path / "graph.json").write_text(json.dumps(snap))
    expect_corrupt(lambda: get_backend("graph", path=path, read_only=True).all_lessons(), "graph.json")


# ---------------------------------------------------------------------------- markdown memory
@pytest.mark.parametrize(
    "record",
    [
        '{"lines": 1, "outcome": "insight", "score": 0.5, "topic_key": "t", "meta": "ab"}',
        "[" * 100_000,
        '"just a string"',
    ],
)
def test_a_damaged_markdown_record_is_reported(tmp_path, record):
    path = tmp_path / "md"
    with get_backend("markdown", path=path) as mem:
        mem.add_insight("Check units before dividing.")
    text = (path / "memory.md").read_text()
    start = text.index("<!-- got-lesson ")
    end = text.index(" -->", start)
    (path / "memory.md").write_text(text[:start] + "<!-- got-lesson " + record + text[end:])
    expect_corrupt(lambda: get_backend("markdown", path=path, read_only=True), "memory.md")


# ---------------------------------------------------------------------------- vector memory
def _vector(path):
    return get_backend("vector", path=path, embedder=HashEmbedder(), read_only=True, create=False)


@pytest.mark.parametrize("edit", ["meta_json", "score", "document"])
def test_a_damaged_vector_record_names_the_record(tmp_path, edit):
    path = tmp_path / "vec"
    with get_backend("vector", path=path, embedder=HashEmbedder()) as mem:
        mem.add_insight("Check units before dividing.")
    db = sqlite3.connect(path / "chroma.sqlite3")
    with db:
        if edit == "meta_json":
            db.execute("UPDATE embedding_metadata SET string_value='{{{' WHERE key='meta_json'")
        elif edit == "score":
            db.execute("UPDATE embedding_metadata SET float_value=NULL, string_value='high' WHERE key='score'")
        else:
            db.execute("DELETE FROM embedding_metadata WHERE key='chroma:document'")
    db.close()
    expect_corrupt(lambda: _vector(path).all_lessons(), "vector memory", str(path))


def test_a_damaged_chromadb_file_is_corrupt_not_a_storage_error(tmp_path):
    path = tmp_path / "vec"
    with get_backend("vector", path=path, embedder=HashEmbedder()) as mem:
        mem.add_insight("Check units before dividing.")
    db = path / "chroma.sqlite3"
    db.write_bytes(b"not a database at all " * 512)
    expect_corrupt(lambda: _vector(path), str(path))


# ---------------------------------------------------------------------------- llamaindex sessions
@pytest.mark.parametrize(
    "payload",
    [
        {"role": "wizard", "blocks": []},
        {"role": "user", "blocks": 5},
        {"role": "user", "blocks": [{"block_type": "no-such-block"}]},
    ],
)
def test_a_damaged_session_message_names_its_file(tmp_path, payload):
    pytest.importorskip("llama_index.core")
    from llama_index.core.base.llms.types import ChatMessage

    from got_integrations.llamaindex import GitChatStore, GitMemory
    from got_integrations.llamaindex._session import message_path, session_ref

    path = tmp_path / "chat.git"
    memory = GitMemory.from_defaults(path=path, session_id="alice")
    memory.put(ChatMessage(role="user", content="keep me"))
    memory.put(ChatMessage(role="assistant", content="and me"))
    raw_commit(path, session_ref("alice"), {message_path(2): json.dumps(payload).encode()})
    fresh = GitMemory.from_defaults(path=path, session_id="alice")
    expect_corrupt(fresh.get, message_path(2))
    expect_corrupt(fresh.get_all, message_path(2))
    expect_corrupt(lambda: GitChatStore(path).read_messages("alice"), message_path(2))


def test_a_damaged_session_file_fails_the_session_cli_cleanly(tmp_path, capsys):
    pytest.importorskip("llama_index.core")
    from llama_index.core.base.llms.types import ChatMessage

    from got_integrations.llamaindex import GitMemory
    from got_integrations.llamaindex._session import message_path, session_ref

    path = tmp_path / "chat.git"
    memory = GitMemory.from_defaults(path=path, session_id="alice")
    memory.put(ChatMessage(role="user", content="keep me"))
    # a write that looks like the session's own (its trailers list the files) but is damaged
    raw_commit(
        path,
        session_ref("alice"),
        {message_path(2): b'["not", "a", "message"]', message_path(3): b'{"role": "user", "blocks": "text"}'},
        "alice: +2 messages\n\nGot-Session: alice\nGot-Op: put\nGot-Added: 2-3\nGot-Window: 1\n",
    )
    for args in (["session", "log", "alice", "-r", str(path)], ["session", "show", "alice", "-r", str(path)]):
        code = main(args)
        err = capsys.readouterr().err
        assert code == 1 and message_path(2) in err, (args, err)
