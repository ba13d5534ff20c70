"""Encryption at rest: with LangGraph's ``EncryptedSerializer`` nothing readable is stored.

A real graph (messages, a tool loop, a pydantic state value, a store write, an
interrupt) runs with secrets planted in state, messages, tool calls, pending writes,
metadata and store values. Then every git object (loose and packed, through
``git cat-file --batch-all-objects``), every other file of the git directory (refs,
packed-refs, reflogs, the derived search index and its WAL) is scanned for them. The
same scan on a readable repository finds them, so the scan can fail. The graph then
resumes from the repository in a new saver with the same key; a wrong key, or none,
is a typed error.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from gitcli import fsck_clean
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.store.base import BaseStore
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from got_core.cli import main
from got_core.errors import ConfigError, CorruptRepositoryError
from got_integrations.langgraph import DecryptionError, GitCheckpointSaver, GitStore

KEY = b"0123456789abcdef0123456789abcdef"
SECRETS = {
    name: f"SECRET{name}{uuid.uuid4().hex[:12]}"
    for name in ("Human", "AiText", "ToolArg", "ToolResult", "State", "Note", "Interrupt", "Resume", "Meta", "Store")
}


class Note(BaseModel):
    """A user's pydantic state type."""

    text: str


class State(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    secret: str
    note: Note | None
    answer: str


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"{SECRETS['ToolResult']} for {q}"


def agent(state: State, *, store: BaseStore) -> dict[str, Any]:
    if isinstance(state["messages"][-1], HumanMessage):
        store.put(("notes", "user-1"), "n1", {"text": SECRETS["Store"], "n": 1})
        call = {"name": "lookup", "args": {"q": SECRETS["ToolArg"]}, "id": "call-1"}
        return {"messages": [AIMessage(content=SECRETS["AiText"], tool_calls=[call])]}
    return {"messages": [AIMessage(content="done")]}


def ask(state: State) -> dict[str, Any]:
    answer = interrupt({"question": SECRETS["Interrupt"]})
    return {"answer": answer, "note": Note(text=state["note"].text + "!")}


def route(state: State) -> str:
    return "tools" if state["messages"][-1].tool_calls else "ask"


def build(saver: GitCheckpointSaver, store: GitStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_node("ask", ask)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", "ask"])
    builder.add_edge("tools", "agent")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver, store=store)


CONFIG = {"configurable": {"thread_id": "customer-7"}, "metadata": {"customer": SECRETS["Meta"]}}


def aes(key: bytes = KEY) -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=key)


def _git_bytes(gitdir: Path, *args: str) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, env=env, check=True).stdout


def _forms(secret: str) -> list[bytes]:
    """The secret as bytes and as base64 at each of the three alignments (values inside JSON)."""
    raw = secret.encode()
    out = [raw]
    for pad in range(3):
        enc = base64.b64encode(b"\x00" * pad + raw)
        out.append(enc[4 if pad else 0 : -4])  # the middle, unaffected by padding or neighbours
    return out


def leaks(gitdir: Path) -> dict[str, list[str]]:
    """Where each planted secret is found: object ids, ref names, or files of the git directory."""
    objects = _git_bytes(gitdir, "cat-file", "--batch-all-objects", "--batch")
    refs = _git_bytes(gitdir, "for-each-ref", "--format=%(refname) %(objectname)")
    files = {p: p.read_bytes() for p in gitdir.rglob("*") if p.is_file() and "objects" not in p.parts}
    assert any(p.name.startswith("index.sqlite3") for p in files), "the derived index was not built"
    found: dict[str, list[str]] = {}
    for name, secret in SECRETS.items():
        where = []
        for form in _forms(secret):
            if form in objects:
                where.append("git objects")
            if form in refs:
                where.append("ref names")
            where += [str(p.relative_to(gitdir)) for p, data in files.items() if form in data]
        if where:
            found[name] = sorted(set(where))
    return found


def run_until_interrupt(path: Path, serde: Any) -> tuple[GitCheckpointSaver, GitStore]:
    saver = GitCheckpointSaver.from_path(path, serde=serde)
    store = GitStore(saver.repo, serde=serde)
    graph = build(saver, store)
    inputs = {
        "messages": [HumanMessage(SECRETS["Human"])],
        "secret": SECRETS["State"],
        "note": Note(text=SECRETS["Note"]),
    }
    out = graph.invoke(inputs, CONFIG, durability="sync")
    assert out["__interrupt__"][0].value == {"question": SECRETS["Interrupt"]}
    saver.repo.grep("SECRET")  # builds the derived index over every commit and blob
    return saver, store


def test_a_readable_repository_shows_every_secret_so_the_scan_can_fail(tmp_path):
    saver, _ = run_until_interrupt(tmp_path / "plain.git", None)
    assert not saver.encrypted and saver.readable
    found = leaks(saver.repo.gitdir)
    for name in ("Human", "AiText", "ToolArg", "ToolResult", "State", "Interrupt", "Meta", "Store"):
        assert name in found, (name, found)
    assert "index.sqlite3" in str(found["AiText"])  # commit messages and blobs reach the derived index


def test_encrypted_repository_holds_no_secret_and_resumes_with_the_key(tmp_path):
    path = tmp_path / "sealed.git"
    saver, store = run_until_interrupt(path, aes())
    assert saver.encrypted and not saver.readable and not store.readable
    _git_bytes(saver.repo.gitdir, "repack", "-a", "-d")  # packed objects now; the resume adds loose ones
    assert leaks(saver.repo.gitdir) == {}

    # a new saver and store on the same repository, same key: the run resumes where it stopped
    saver2 = GitCheckpointSaver.from_path(path, serde=aes())
    store2 = GitStore(saver2.repo, serde=aes())
    graph = build(saver2, store2)
    out = graph.invoke(Command(resume=SECRETS["Resume"]), CONFIG, durability="sync")
    assert out["answer"] == SECRETS["Resume"]
    assert out["secret"] == SECRETS["State"] and out["note"] == Note(text=SECRETS["Note"] + "!")
    texts = [m.content for m in out["messages"]]
    assert texts[0] == SECRETS["Human"] and texts[1] == SECRETS["AiText"] and SECRETS["ToolResult"] in texts[2]
    assert out["messages"][1].tool_calls[0]["args"] == {"q": SECRETS["ToolArg"]}
    assert store2.get(("notes", "user-1"), "n1").value == {"text": SECRETS["Store"], "n": 1}
    # encrypted metadata still filters and reads back
    history = list(saver2.list({"configurable": {"thread_id": "customer-7"}}, filter={"customer": SECRETS["Meta"]}))
    assert len(history) >= 5 and all(t.metadata["customer"] == SECRETS["Meta"] for t in history)

    saver2.repo.grep("SECRET")
    assert leaks(saver2.repo.gitdir) == {}
    ok, report = fsck_clean(path)
    assert ok, report


def test_a_wrong_key_or_no_key_is_a_typed_error(tmp_path):
    path = tmp_path / "sealed.git"
    run_until_interrupt(path, aes())
    wrong = GitCheckpointSaver.from_path(path, serde=aes(b"fedcba9876543210fedcba9876543210"))
    graph = build(wrong, GitStore(wrong.repo, serde=aes(b"fedcba9876543210fedcba9876543210")))
    with pytest.raises(DecryptionError, match="wrong key"):
        graph.get_state(CONFIG)
    with pytest.raises(DecryptionError, match="wrong key"):
        GitStore(path, serde=aes(b"fedcba9876543210fedcba9876543210")).get(("notes", "user-1"), "n1")
    # no key at all: refused with a message naming the serializer to use, not a raw serializer error
    with pytest.raises(DecryptionError, match="EncryptedSerializer"):
        GitCheckpointSaver.from_path(path).get_tuple(CONFIG)
    with pytest.raises(CorruptRepositoryError, match="serde"):
        GitStore(path).get(("notes", "user-1"), "n1")
    assert issubclass(DecryptionError, CorruptRepositoryError)


def test_cli_reads_an_encrypted_repository_with_langgraph_aes_key(tmp_path, capsys, monkeypatch):
    path = tmp_path / "sealed.git"
    run_until_interrupt(path, EncryptedSerializer.from_pycryptodome_aes(key=KEY[:16]))
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    assert main(["threads", "show", "customer-7", "-r", str(path), "--json"]) != 0
    assert "EncryptedSerializer" in capsys.readouterr().err
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY[:16].decode())
    assert main(["threads", "show", "customer-7", "-r", str(path), "--json"]) == 0
    assert SECRETS["AiText"] in capsys.readouterr().out


def test_readable_true_with_an_encrypting_serializer_is_refused(tmp_path):
    with pytest.raises(ConfigError):
        GitCheckpointSaver.from_path(tmp_path / "x.git", serde=aes(), readable=True)
    with pytest.raises(ConfigError):
        GitStore(tmp_path / "x.git", serde=aes(), readable=True)


def test_readable_false_keeps_values_out_of_sight_without_encryption(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "quiet.git", readable=False)
    store = GitStore(saver.repo, serde=saver.serde, readable=False)
    graph = build(saver, store)
    inputs = {
        "messages": [HumanMessage(SECRETS["Human"])],
        "secret": SECRETS["State"],
        "note": Note(text=SECRETS["Note"]),
    }
    graph.invoke(inputs, CONFIG, durability="sync")
    saver.repo.grep("SECRET")
    head = saver.repo.tip("refs/got/threads/customer-7/root/head")
    files = set(saver.repo.list_files(head))
    # no renderings; the writes of the step before (handed over to this checkpoint) hold serializer bytes only
    carried = {p for p in files if p.startswith("parent~writes/")}
    assert not any(p.endswith(".json") and p != "checkpoint.json" for p in files - carried)
    for path in carried:
        assert all("value" not in w for w in json.loads(saver.repo.read_file(head, path))["writes"])
    messages = _git_bytes(saver.repo.gitdir, "log", "--format=%B", "--all")
    assert b"SECRET" not in messages  # commit messages (and so the search index) hold ids only
    assert (
        GitCheckpointSaver.from_path(tmp_path / "quiet.git").get_tuple(CONFIG).checkpoint["channel_values"]["secret"]
        == SECRETS["State"]
    )


def test_the_strict_default_inside_the_encryption_rebuilds_the_graph_types(tmp_path):
    from got_integrations.langgraph import default_serde

    def strict() -> EncryptedSerializer:
        return EncryptedSerializer.from_pycryptodome_aes(serde=default_serde(), key=KEY)

    run_until_interrupt(tmp_path / "strict.git", strict())
    saver = GitCheckpointSaver.from_path(tmp_path / "strict.git", serde=strict())
    assert GitCheckpointSaver.from_path(tmp_path / "strict.git", serde=strict()).get_tuple(CONFIG).checkpoint[
        "channel_values"
    ]["note"] == {"text": SECRETS["Note"]}  # no graph compiled with it: plain data
    values = build(saver, GitStore(saver.repo, serde=strict())).get_state(CONFIG).values
    assert values["note"] == Note(text=SECRETS["Note"]) and values["messages"][1].content == SECRETS["AiText"]


def test_segments_of_a_long_conversation_stay_sealed(tmp_path):
    """Twelve messages make a segment (the serializer bytes of ten messages in one blob, read
    by cold reads): under encryption it holds ciphertext only; readable, the same blob shows
    the text, so the check can fail."""

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(SECRETS["AiText"] + str(len(state["messages"])))]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    config = {"configurable": {"thread_id": "long"}}
    for serde, sealed in ((None, False), (aes(), True)):
        path = tmp_path / ("sealed.git" if sealed else "plain.git")
        saver = GitCheckpointSaver.from_path(path, serde=serde)
        graph = builder.compile(checkpointer=saver)
        for i in range(6):
            graph.invoke({"messages": [HumanMessage(SECRETS["Human"] + str(i))]}, config)
        files = saver.repo.list_files(saver.repo.tip("refs/got/threads/long/root/head"))
        segments = {p: sha for p, sha in files.items() if p.startswith("messages/segments/")}
        assert list(segments) == ["messages/segments/000000+10.bin"]
        data = saver.repo.read_blob(segments["messages/segments/000000+10.bin"])
        assert any(form in data for form in _forms(SECRETS["Human"] + "0")) is not sealed
        if sealed:
            saver.repo.grep("SECRET")
            assert leaks(path) == {}
        cold = GitCheckpointSaver.from_path(path, serde=serde).get_tuple(config)
        texts = [m.content for m in cold.checkpoint["channel_values"]["messages"]]
        assert len(texts) == 12 and texts[0] == SECRETS["Human"] + "0" and texts[-1] == SECRETS["AiText"] + "11"
