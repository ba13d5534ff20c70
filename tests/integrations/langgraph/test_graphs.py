"""Real LangGraph graphs on GitCheckpointSaver, compared with InMemorySaver in the same test.

Every scenario runs twice, once per saver, and the observable results (state,
history, pending tasks, interrupts, forks, subgraph state) must be equal. Then git
itself checks what was written: ``git fsck``, ``git diff`` between two checkpoints,
blob reuse as the message list grows.
"""

from __future__ import annotations

import asyncio
import operator
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from gitcli import fsck_clean, git
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Interrupt, Send, StateSnapshot, interrupt
from pydantic import BaseModel

from got_core.solver.tools import calculate
from got_integrations.langgraph import GitCheckpointSaver, UnsafePayloadError
from got_integrations.langgraph._layout import split_msgpack_array


# ---------------------------------------------------------------------------- graphs
@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly."""
    return calculate(expression)


def scripted_agent(state: MessagesState) -> dict[str, Any]:
    """A scripted stand-in for a chat model: asks the calculator, then reports its answer."""
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        expression = str(last.content).split(":", 1)[-1].strip()
        call = {"name": "calculator", "args": {"expression": expression}, "id": f"call-{len(state['messages'])}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content=f"The answer is {last.content}.")]}


def tool_graph() -> StateGraph:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", scripted_agent)
    builder.add_node("tools", ToolNode([calculator]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


class ApprovalState(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    log: Annotated[list[str], operator.add]


def approval_graph() -> StateGraph:
    def draft(state: ApprovalState) -> dict[str, Any]:
        return {"messages": [AIMessage("Plan: delete the temp files.")], "log": ["drafted"]}

    def approve(state: ApprovalState) -> dict[str, Any]:
        answer = interrupt({"question": "Run the plan?", "plan": state["messages"][-1].content})
        return {"messages": [AIMessage(f"approved: {answer}")], "log": [f"answer={answer}"]}

    builder = StateGraph(ApprovalState)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", END)
    return builder


def nested_graph() -> StateGraph:
    def inner(state: MessagesState) -> dict[str, Any]:
        detail = interrupt("which unit?")
        return {"messages": [AIMessage(f"inner used {detail}")]}

    sub = StateGraph(MessagesState)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)

    def after(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"done after {len(state['messages'])} messages")]}

    builder = StateGraph(MessagesState)
    builder.add_node("sub", sub.compile())
    builder.add_node("after", after)
    builder.add_edge(START, "sub")
    builder.add_edge("sub", "after")
    builder.add_edge("after", END)
    return builder


class FanState(TypedDict, total=False):
    round: int
    results: Annotated[list[str], operator.add]


def fan_graph(rounds: int = 3) -> StateGraph:
    """Four parallel tasks (Send) per round; one task of round 2 interrupts."""

    def plan(state: FanState) -> dict[str, Any]:
        return {"round": state.get("round", 0) + 1}

    def fan(state: FanState) -> Any:
        return END if state["round"] > rounds else [Send("work", {"round": state["round"], "k": k}) for k in range(4)]

    def work(arg: dict[str, Any]) -> dict[str, Any]:
        if arg["round"] == 2 and arg["k"] == 0:
            return {"results": [f"r2 k0 {interrupt('go on?')}"]}
        return {"results": [f"r{arg['round']} k{arg['k']}"]}

    builder = StateGraph(FanState)
    builder.add_node("plan", plan)
    builder.add_node("work", work)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", fan, ["work", END])
    builder.add_edge("work", "plan")
    return builder


# ---------------------------------------------------------------------------- comparison helpers
def norm(value: Any) -> Any:
    """Values without the random parts (message ids, checkpoint ids)."""
    if isinstance(value, BaseMessage):
        calls = [(c["name"], c["args"]) for c in getattr(value, "tool_calls", None) or []]
        return (value.type, value.content, calls, getattr(value, "tool_call_id", None))
    if isinstance(value, Interrupt):
        return ("interrupt", norm(value.value))
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [norm(v) for v in value]
    return value


def snap(s: Any) -> dict[str, Any]:
    """What a user observes in a StateSnapshot, without ids and timestamps."""
    tasks = []
    for t in s.tasks:
        tasks.append(
            {
                "name": t.name,
                "result": norm(t.result),
                "error": repr(t.error) if t.error else None,
                "interrupts": [norm(i.value) for i in t.interrupts],
                "state": snap(t.state)
                if isinstance(t.state, StateSnapshot)
                else (t.state or {}).get("configurable", {}).get("checkpoint_ns", "").split(":")[0],
            }
        )
    meta = {k: (s.metadata or {}).get(k) for k in ("source", "step")}
    return {
        "values": norm(s.values),
        "next": tuple(s.next),
        "meta": meta,
        "tasks": tasks,
        "interrupts": [norm(i.value) for i in s.interrupts],
        "has_parent": s.parent_config is not None,
    }


def both(tmp_path, scenario: Callable[[Any], Any]) -> Any:
    """Run ``scenario(saver)`` on InMemorySaver and on GitCheckpointSaver; results must match."""
    expected = scenario(InMemorySaver())
    saver = GitCheckpointSaver.from_path(tmp_path / "graphs.git")
    got = scenario(saver)
    assert got == expected
    ok, out = fsck_clean(saver.repo.gitdir)
    assert ok, out
    return saver, got


CFG = {"configurable": {"thread_id": "t1"}}


# ---------------------------------------------------------------------------- scenarios
def test_tool_loop_state_and_history_match_in_memory(tmp_path):
    def scenario(saver):
        graph = tool_graph().compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("compute: 12*(3+4)")]}, CFG)
        graph.invoke({"messages": [HumanMessage("compute: 2**10")]}, CFG)
        return snap(graph.get_state(CFG)), [snap(s) for s in graph.get_state_history(CFG)]

    saver, (state, history) = both(tmp_path, scenario)
    assert state["values"]["messages"][-1][1] == "The answer is 1024."
    assert [h["meta"]["step"] for h in history] == list(range(8, -2, -1))
    # a limit and a before-cursor page through history as with the reference saver
    graph = tool_graph().compile(checkpointer=saver)
    full = list(graph.get_state_history(CFG))
    page = list(graph.get_state_history(CFG, before=full[3].config, limit=2))
    assert [p.config["configurable"]["checkpoint_id"] for p in page] == [
        f.config["configurable"]["checkpoint_id"] for f in full[4:6]
    ]


def test_interrupt_and_resume_match_in_memory(tmp_path):
    def scenario(saver):
        graph = approval_graph().compile(checkpointer=saver)
        first = graph.invoke({"messages": [HumanMessage("tidy up")], "log": []}, CFG)
        paused = snap(graph.get_state(CFG))
        final = graph.invoke(Command(resume="yes"), CFG)
        return norm(first), paused, norm(final), [snap(s) for s in graph.get_state_history(CFG)]

    _, (_first, paused, final, _history) = both(tmp_path, scenario)
    assert paused["next"] == ("approve",)
    assert paused["tasks"][0]["interrupts"] == [{"question": "Run the plan?", "plan": "Plan: delete the temp files."}]
    assert final["log"] == ["drafted", "answer=yes"]


def test_a_fresh_saver_resumes_a_thread_and_lists_its_whole_history(tmp_path):
    """A new process resuming an interrupted thread: its first put's parent was never walked."""
    first = GitCheckpointSaver.from_path(tmp_path / "resume.git")
    approval_graph().compile(checkpointer=first).invoke({"messages": [HumanMessage("tidy up")], "log": []}, CFG)
    before = [t.config["configurable"]["checkpoint_id"] for t in first.list(CFG)]
    fresh = GitCheckpointSaver.from_path(tmp_path / "resume.git")
    graph = approval_graph().compile(checkpointer=fresh)
    assert graph.invoke(Command(resume="yes"), CFG)["log"] == ["drafted", "answer=yes"]
    after = [t.config["configurable"]["checkpoint_id"] for t in fresh.list(CFG)]
    assert after[len(after) - len(before) :] == before and len(after) > len(before)
    assert len(list(graph.get_state_history(CFG))) == len(after)


def test_update_state_fork_becomes_a_branch(tmp_path):
    def scenario(saver):
        graph = tool_graph().compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("compute: 6*7")]}, CFG)
        history = list(graph.get_state_history(CFG))
        fork_point = next(h for h in history if h.metadata["step"] == 1)  # after the tool call was planned
        fork = graph.update_state(fork_point.config, {"messages": [HumanMessage("compute: 1+1")]})
        graph.invoke(None, fork)
        replay = graph.invoke(None, history[-2].config)  # time travel: replay from step 0
        return norm(replay), snap(graph.get_state(CFG)), [snap(s) for s in graph.get_state_history(CFG)]

    saver, (_, state, history) = both(tmp_path, scenario)
    assert state["values"]["messages"][-1][1].startswith("The answer is")
    refs = git(saver.repo.gitdir, "for-each-ref", "--format=%(refname)", "refs/got/threads/t1/")
    assert "refs/got/threads/t1/root/head" in refs and "refs/got/threads/t1/root/forks/" in refs
    # nothing orphaned: every checkpoint the saver lists is reachable from a thread ref
    reachable = set(git(saver.repo.gitdir, "rev-list", "--all").split())
    listed = list(saver.list(CFG))
    assert len(listed) == len(history)
    assert {saver.commit_of(t.config) for t in listed} <= reachable


def test_subgraph_namespaces_match_in_memory(tmp_path):
    def scenario(saver):
        graph = nested_graph().compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("convert 3 miles")]}, CFG)
        paused = snap(graph.get_state(CFG, subgraphs=True))
        graph.invoke(Command(resume="km"), CFG)
        return paused, snap(graph.get_state(CFG)), [snap(s) for s in graph.get_state_history(CFG)]

    saver, (paused, final, _) = both(tmp_path, scenario)
    inner = paused["tasks"][0]["state"]
    assert inner is not None and inner["tasks"][0]["interrupts"] == ["which unit?"]
    assert final["values"]["messages"][-2][1] == "inner used km"
    namespaces = saver.namespaces("t1")
    assert "" in namespaces and any(ns.startswith("sub:") for ns in namespaces)


def test_delete_thread_matches_in_memory(tmp_path):
    def scenario(saver):
        graph = tool_graph().compile(checkpointer=saver)
        other = {"configurable": {"thread_id": "t2"}}
        graph.invoke({"messages": [HumanMessage("compute: 3+4")]}, CFG)
        graph.invoke({"messages": [HumanMessage("compute: 5+6")]}, other)
        saver.delete_thread("t1")
        return (snap(graph.get_state(CFG)), len(list(graph.get_state_history(CFG))), snap(graph.get_state(other)))

    saver, (gone, count, kept) = both(tmp_path, scenario)
    assert gone["values"] == {} and count == 0 and kept["values"]["messages"][-1][1] == "The answer is 11."
    assert not saver.repo.refs("refs/got/threads/t1/") and saver.threads() == ["t2"]


# ---------------------------------------------------------------------------- what git sees
def test_git_diff_between_checkpoints_shows_the_new_message(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "diff.git")
    graph = tool_graph().compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage("compute: 12*(3+4)")]}, CFG)
    history = list(graph.get_state_history(CFG))
    old, new = saver.commit_of(history[2].config), saver.commit_of(history[0].config)
    patch = git(saver.repo.gitdir, "diff", old, new, "--", "messages")
    assert "The answer is 84." in patch and "+++ b/messages/000/000003.json" in patch
    log = git(saver.repo.gitdir, "log", "--format=%s", "refs/got/threads/t1/root/head")
    assert log.splitlines()[0] == "step 3 (loop) ai: The answer is 84."
    # the parent of each checkpoint commit is its parent checkpoint's commit
    for snapshot in history[:-1]:
        parent = saver.commit_of(snapshot.parent_config)
        assert git(saver.repo.gitdir, "rev-parse", saver.commit_of(snapshot.config) + "^").strip() == parent


def test_growing_message_list_reuses_blobs(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "grow.git")
    graph = tool_graph().compile(checkpointer=saver)
    for i in range(12):
        graph.invoke({"messages": [HumanMessage(f"compute: {i}+1")]}, CFG)
    history = list(graph.get_state_history(CFG))
    first_with = next(h for h in reversed(history) if h.values.get("messages"))
    first, last = saver.commit_of(first_with.config), saver.commit_of(history[0].config)
    assert len(history[0].values["messages"]) == 48
    # the first message's rendering is the very same blob in the first and the last checkpoint;
    # its bytes moved from its own .bin into the segment of messages 0-9, which then stays
    path = "messages/000/000000.json"
    assert git(saver.repo.gitdir, "rev-parse", f"{first}:{path}") == git(
        saver.repo.gitdir, "rev-parse", f"{last}:{path}"
    )
    assert "messages/000/000000.bin" in saver.repo.list_files(first)
    last_files = saver.repo.list_files(last)
    assert "messages/000/000000.bin" not in last_files and "messages/segments/000000+10.bin" in last_files
    # the bucket directory holds one rendering per message and a .bin only past the last segment
    bucket = sorted(p for p in last_files if p.startswith("messages/000/"))
    wanted = [f"messages/000/{i:06d}.json" for i in range(48)] + [f"messages/000/{i:06d}.bin" for i in range(40, 48)]
    assert bucket == sorted(wanted)
    # storage is linear, not per checkpoint: one .json blob per message ever written, one .bin
    # per message no segment held when it was written (all but the 10th, 20th, ... here: each
    # completes a segment of 10), and each segment written once
    objects = git(saver.repo.gitdir, "rev-list", "--objects", "refs/got/threads/t1/root/head").splitlines()
    paths = [line.split(" ", 1)[-1] for line in objects if " " in line]
    assert len([p for p in paths if p.startswith("messages/0") and p.endswith(".json")]) == 48
    bins = sorted(p for p in paths if p.startswith("messages/0") and p.endswith(".bin"))
    assert bins == [f"messages/000/{i:06d}.bin" for i in range(48) if i % 10 != 9]
    segment_blobs = [p for p in paths if p.startswith("messages/segments/")]
    assert sorted(segment_blobs) == [f"messages/segments/0000{i}0+10.bin" for i in range(4)]


def test_cold_reader_sees_exactly_what_the_writer_cached(tmp_path):
    path = tmp_path / "cold.git"
    writer = GitCheckpointSaver.from_path(path)
    graph = tool_graph().compile(checkpointer=writer)
    for expr in ("1+2", "3*4", "10/4"):
        graph.invoke({"messages": [HumanMessage(f"compute: {expr}")]}, CFG)
    reader = GitCheckpointSaver.from_path(path)  # fresh process view: nothing cached
    warm, cold = list(writer.list(CFG)), list(reader.list(CFG))
    assert len(warm) == len(cold) == 15  # 5 checkpoints per turn: input, agent, tools, agent, end
    for a, b in zip(warm, cold):
        assert a.config == b.config and a.metadata == b.metadata and a.parent_config == b.parent_config
        assert a.checkpoint == b.checkpoint
        assert a.pending_writes == b.pending_writes


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_parallel_tasks_under_every_durability_match_in_memory(tmp_path, durability):
    """Parallel tasks save their writes at the same time (under "exit", all at once when the
    run stops): the writes that share a commit are all kept, and the interrupted run resumes."""

    def scenario(saver):
        graph = fan_graph().compile(checkpointer=saver)
        first = graph.invoke({"round": 0}, CFG, durability=durability)
        stopped = snap(graph.get_state(CFG))
        final = graph.invoke(Command(resume="yes"), CFG, durability=durability)
        return norm(first), stopped, norm(final), [snap(s) for s in graph.get_state_history(CFG)]

    saver, (first, stopped, final, _history) = both(tmp_path, scenario)
    assert first["__interrupt__"] == [("interrupt", "go on?")]
    assert sorted(t["result"]["results"][0] for t in stopped["tasks"] if t["result"]) == [f"r2 k{k}" for k in (1, 2, 3)]
    assert sorted(final["results"]) == sorted(
        [f"r{r} k{k}" for r in (1, 3) for k in range(4)] + ["r2 k0 yes", "r2 k1", "r2 k2", "r2 k3"]
    )
    # a reader with cold caches sees the same pending writes
    cold = GitCheckpointSaver.from_path(saver.repo.gitdir)
    warm = {t.config["configurable"]["checkpoint_id"]: t.pending_writes for t in saver.list(CFG)}
    assert {t.config["configurable"]["checkpoint_id"]: t.pending_writes for t in cold.list(CFG)} == warm


def test_sync_and_async_runs_write_the_same_history(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "parity.git")
    graph = tool_graph().compile(checkpointer=saver)
    sync_cfg, async_cfg = {"configurable": {"thread_id": "sync"}}, {"configurable": {"thread_id": "async"}}
    for expr in ("2+2", "7*6"):
        graph.invoke({"messages": [HumanMessage(f"compute: {expr}")]}, sync_cfg)

    async def run_async():
        for expr in ("2+2", "7*6"):
            await graph.ainvoke({"messages": [HumanMessage(f"compute: {expr}")]}, async_cfg)
        history = [s async for s in graph.aget_state_history(async_cfg)]
        tuples = [await saver.aget_tuple(s.config) for s in history]
        return history, tuples, [t async for t in saver.alist(async_cfg)]

    history, tuples, listed = asyncio.run(run_async())
    assert [snap(s) for s in history] == [snap(s) for s in graph.get_state_history(sync_cfg)]
    for snapshot, tup, item in zip(history, tuples, listed):
        assert tup == saver.get_tuple(snapshot.config)
        assert item.config == saver.get_tuple(item.config).config


def test_whole_list_encoding_splits_into_per_element_encodings():
    serde = JsonPlusSerializer()
    values = [
        AIMessage("hi", id="1"),
        {"a": [1, 2.5, None], "b": {"c": True}},
        "x" * 70000,
        b"\x00\x01",
        [1, [2, [3]]],
        2**40,
        -7,
        3.25,
        None,
        {"k": "v" * 300},
    ]
    tag, data = serde.dumps_typed(values)
    parts = split_msgpack_array(data)
    assert tag == "msgpack" and parts is not None
    assert parts == [serde.dumps_typed([v])[1][1:] for v in values]
    assert split_msgpack_array(data[:-1]) is None and split_msgpack_array(b"\x81\xa1a\x01") is None


class Opaque:
    """A value msgpack cannot encode (only pickle could)."""

    def __init__(self) -> None:
        self.lock = object()


def test_pickle_is_refused_unless_allowed(tmp_path):
    serde = JsonPlusSerializer(pickle_fallback=True)
    strict = GitCheckpointSaver.from_path(tmp_path / "p.git", serde=serde)
    checkpoint = {
        "v": 4,
        "id": "1f0",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"x": Opaque()},
        "channel_versions": {"x": 1},
        "versions_seen": {},
        "updated_channels": None,
    }
    config = {"configurable": {"thread_id": "p", "checkpoint_ns": ""}}
    with pytest.raises(UnsafePayloadError, match="allow_pickle"):
        strict.put(config, checkpoint, {"source": "input", "step": -1}, {"x": 1})
    trusting = GitCheckpointSaver.from_path(tmp_path / "p.git", serde=serde, allow_pickle=True)
    stored = trusting.put(config, checkpoint, {"source": "input", "step": -1}, {"x": 1})
    assert isinstance(trusting.get_tuple(stored).checkpoint["channel_values"]["x"], Opaque)
    with pytest.raises(UnsafePayloadError, match="unpickle"):
        GitCheckpointSaver.from_path(tmp_path / "p.git", serde=serde).get_tuple(stored)


@pytest.mark.parametrize("thread_id", ["a/b", "../../etc", "ünï code", "x" * 300, "-rf", "root"])
def test_hostile_thread_ids_stay_inside_their_refs(tmp_path, thread_id):
    saver = GitCheckpointSaver.from_path(tmp_path / "hostile.git")
    graph = tool_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"messages": [HumanMessage("compute: 1+1")]}, config)
    assert graph.get_state(config).values["messages"][-1].content == "The answer is 2."
    assert saver.threads() == [thread_id]
    refs = saver.repo.refs("refs/")
    assert refs and all(name.startswith("refs/got/threads/") and name.count("/") in (5, 6) for name in refs)
    ok, out = fsck_clean(saver.repo.gitdir)
    assert ok, out


def test_missing_langgraph_raises_missing_extra_naming_it():
    code = (
        "import sys\nsys.modules['langgraph'] = None\n"
        "try:\n    import got_integrations.langgraph\nexcept Exception as exc:\n"
        "    print(type(exc).__name__, isinstance(exc, ImportError), exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MissingExtraError True") and "gitofthoughts[langgraph]" in out


class Point(BaseModel):
    """A user state type outside LangGraph's built-in allowlist."""

    x: int


class PointState(TypedDict):
    p: Point


def _point_graph(saver):
    builder = StateGraph(PointState)
    builder.add_node("bump", lambda s: {"p": Point(x=s["p"].x + 1)})
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    return builder.compile(checkpointer=saver)


def test_strict_serializer_rebuilds_only_allowed_types(tmp_path):
    writer = GitCheckpointSaver.from_path(tmp_path / "strict.git")
    _point_graph(writer).invoke({"p": Point(x=1)}, CFG)
    assert writer.get_tuple(CFG).checkpoint["channel_values"]["p"] == Point(x=2)  # the graph's schema type
    # a saver no graph was compiled with does not know Point: plain data only
    stranger = GitCheckpointSaver.from_path(tmp_path / "strict.git")
    assert stranger.get_tuple(CFG).checkpoint["channel_values"]["p"] == {"x": 2}
    allowed = GitCheckpointSaver.from_path(tmp_path / "strict.git", allowed_msgpack_modules=[Point])
    assert allowed.get_tuple(CFG).checkpoint["channel_values"]["p"] == Point(x=2)


def test_strict_env_lets_compile_allow_the_graph_schema(tmp_path):
    code = textwrap.dedent(f"""
        from typing import TypedDict
        from pydantic import BaseModel
        from langgraph.graph import StateGraph, START, END
        from got_integrations.langgraph import GitCheckpointSaver
        class Point(BaseModel):
            x: int
        class S(TypedDict):
            p: Point
        b = StateGraph(S)
        b.add_node("bump", lambda s: {{"p": Point(x=s["p"].x + 1)}})
        b.add_edge(START, "bump"); b.add_edge("bump", END)
        graph = b.compile(checkpointer=GitCheckpointSaver.from_path({str(tmp_path / "env.git")!r}))
        cfg = {{"configurable": {{"thread_id": "t"}}}}
        graph.invoke({{"p": Point(x=1)}}, cfg)
        print(type(graph.get_state(cfg).values["p"]).__name__)
    """)
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "Point"


def test_replaced_and_removed_messages_match_in_memory(tmp_path):
    """Unchanged messages reuse the parent's encodings; replaced (same id) and removed ones
    must still be stored exactly as the reference saver stores them."""
    from langchain_core.messages import RemoveMessage

    def edit(state: MessagesState) -> dict[str, Any]:
        first, second = state["messages"][0], state["messages"][1]
        return {
            "messages": [
                HumanMessage(content="edited: " + str(first.content), id=first.id),
                RemoveMessage(id=second.id),
            ]
        }

    def scenario(saver):
        builder = tool_graph()
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("compute: 6*7", id="h1")]}, CFG)
        editor = StateGraph(MessagesState)
        editor.add_node("edit", edit)
        editor.add_edge(START, "edit")
        editor.add_edge("edit", END)
        edited = editor.compile(checkpointer=saver)
        edited.invoke({"messages": [HumanMessage("one more", id="h2")]}, CFG)
        return snap(edited.get_state(CFG)), [snap(s) for s in edited.get_state_history(CFG)]

    saver, (state, _history) = both(tmp_path, scenario)
    texts = [m[1] for m in state["values"]["messages"]]
    assert texts[0] == "edited: compute: 6*7" and len(texts) == 4  # 1 replaced, 1 removed, 1 added
    # a reader with cold caches decodes the same values from git
    cold = GitCheckpointSaver.from_path(saver.repo.gitdir).get_tuple(CFG)
    assert [m.content for m in cold.checkpoint["channel_values"]["messages"]] == texts
