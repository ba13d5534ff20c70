"""Real llama-index agents on GitMemory, driven by the scripted function-calling LLM."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from gitcli import fsck_clean
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.storage.chat_store.base_db import MessageStatus
from llama_index.core.workflow import Context
from timeouts import TEST_TIMEOUT

from got_integrations.llamaindex import GitMemory
from got_integrations.llamaindex.testing import ScriptedFunctionCallingLLM, ScriptedToolCall

ROOT = Path(__file__).resolve().parents[3]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def flat(messages: list[ChatMessage]) -> str:
    """Every text and tool call of a message list, for 'does the LLM input contain X' checks."""
    parts = []
    for m in messages:
        for b in m.blocks:
            parts.append(getattr(b, "text", "") or "")
            if isinstance(b, ToolCallBlock):
                parts.append(f"{b.tool_name}{b.tool_kwargs}")
    return "\n".join(parts)


async def test_function_agent_writes_two_commits_per_turn_and_reads_turn_one_back(repo_path, commits):
    llm = ScriptedFunctionCallingLLM([ScriptedToolCall("add", {"a": 2, "b": 3}), "2 + 3 = 5."])
    agent = FunctionAgent(tools=[add], llm=llm, system_prompt="You add numbers.")
    memory = GitMemory.from_defaults(path=repo_path, session_id="alice")
    assert str(await agent.run("What is 2 + 3?", memory=memory)) == "2 + 3 = 5."
    # turn 1: the user message, then the agent's scratchpad (call, result, answer) in one commit
    assert commits(repo_path, "alice") == 2
    assert [w.subject for w in memory.history()] == [
        "alice: +1 message (user)",
        "alice: +3 messages (assistant, tool, assistant)",
    ]

    # turn 2 with brand-new objects: whatever the LLM sees of turn 1 came from git
    llm2 = ScriptedFunctionCallingLLM(["You asked for 2 + 3, which is 5."])
    agent2 = FunctionAgent(tools=[add], llm=llm2, system_prompt="You add numbers.")
    memory2 = GitMemory.from_defaults(path=repo_path, session_id="alice")
    await agent2.run("What did I ask before?", memory=memory2)
    seen = llm2.calls[0]
    assert [m.role.value for m in seen] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert "What is 2 + 3?" in flat(seen) and "add{'a': 2, 'b': 3}" in flat(seen) and "2 + 3 = 5." in flat(seen)
    assert seen[3].additional_kwargs["tool_call_id"] == seen[2].blocks[0].tool_call_id
    assert commits(repo_path, "alice") == 4
    assert fsck_clean(repo_path)[0]


async def test_restart_in_a_new_process_restores_the_conversation(repo_path, commits):
    llm = ScriptedFunctionCallingLLM([ScriptedToolCall("add", {"a": 40, "b": 2}), "The answer is 42."])
    await FunctionAgent(tools=[add], llm=llm).run(
        "Add 40 and 2.", memory=GitMemory.from_defaults(path=repo_path, session_id="alice")
    )
    child = textwrap.dedent(f"""
        import asyncio, json, sys
        from llama_index.core.agent.workflow import FunctionAgent
        from got_integrations.llamaindex import GitMemory
        from got_integrations.llamaindex.testing import ScriptedFunctionCallingLLM

        def add(a: int, b: int) -> int:
            \"\"\"Add two integers.\"\"\"
            return a + b

        async def main():
            llm = ScriptedFunctionCallingLLM(["Earlier you asked me to add 40 and 2."])
            memory = GitMemory.from_defaults(path={str(repo_path)!r}, session_id="alice")
            await FunctionAgent(tools=[add], llm=llm).run("What did I ask?", memory=memory)
            print(json.dumps([m.model_dump(mode="json") for m in llm.calls[0]]))

        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, cwd=ROOT, timeout=TEST_TIMEOUT)
    assert out.returncode == 0, out.stderr
    seen = [ChatMessage.model_validate(m) for m in json.loads(out.stdout.strip().splitlines()[-1])]
    assert "Add 40 and 2." in flat(seen) and "The answer is 42." in flat(seen)
    assert seen[-1].content == "What did I ask?"
    memory = GitMemory.from_defaults(path=repo_path, session_id="alice")
    assert [m.content for m in memory.get_all()][-1] == "Earlier you asked me to add 40 and 2."
    assert commits(repo_path, "alice") == 4


async def test_two_sessions_never_see_each_other(repo_path):
    calls = {}
    for who, secret in (
        ("alice", "alice likes tea"),
        ("bob", "bob likes coffee"),
        ("alice", "again"),
        ("bob", "again"),
    ):
        llm = ScriptedFunctionCallingLLM(["noted"])
        await FunctionAgent(tools=[add], llm=llm).run(
            secret, memory=GitMemory.from_defaults(path=repo_path, session_id=who)
        )
        calls.setdefault(who, []).append(flat(llm.calls[0]))
    assert "alice likes tea" in calls["alice"][1] and "bob" not in " ".join(calls["alice"])
    assert "bob likes coffee" in calls["bob"][1] and "alice" not in " ".join(calls["bob"])


async def test_empty_memory_is_used_not_replaced_by_a_default_buffer(repo_path, commits):
    memory = GitMemory.from_defaults(path=repo_path, session_id="empty")
    assert len(memory) == 0
    agent = FunctionAgent(tools=[add], llm=ScriptedFunctionCallingLLM(["hi", "hi again"]))
    ctx = Context(agent)
    await agent.run("hello", memory=memory, ctx=ctx)
    assert await ctx.store.get("memory") is memory
    assert commits(repo_path, "empty") == 2
    await agent.run("hello again", ctx=ctx)  # the context keeps using it
    assert commits(repo_path, "empty") == 4


async def test_agent_workflow_handoff_writes_into_one_memory(repo_path, commits):
    front = FunctionAgent(
        name="front",
        description="Talks to the user.",
        tools=[],
        can_handoff_to=["calc"],
        llm=ScriptedFunctionCallingLLM([ScriptedToolCall("handoff", {"to_agent": "calc", "reason": "arithmetic"})]),
    )
    calc_llm = ScriptedFunctionCallingLLM([ScriptedToolCall("add", {"a": 1, "b": 1}), "1 + 1 = 2"])
    calc = FunctionAgent(name="calc", description="Adds numbers.", tools=[add], llm=calc_llm)
    workflow = AgentWorkflow(agents=[front, calc], root_agent="front")
    memory = GitMemory.from_defaults(path=repo_path, session_id="team")
    assert str(await workflow.run(user_msg="Add 1 and 1.", memory=memory)) == "1 + 1 = 2"
    assert commits(repo_path, "team") == 3  # user; front's handoff call + result; calc's work
    roles = [m.role.value for m in memory.get_all()]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    stored = flat(memory.get_all())
    assert "handoff" in stored and "add{'a': 1, 'b': 1}" in stored and "1 + 1 = 2" in stored
    assert "Add 1 and 1." in flat(calc_llm.calls[0])  # the second agent read the shared memory


async def test_react_agent_trace_is_stored(repo_path, commits):
    llm = ScriptedFunctionCallingLLM(
        [
            'Thought: I should add.\nAction: add\nAction Input: {"a": 2, "b": 3}',
            "Thought: I know the answer.\nAnswer: 5",
        ]
    )
    memory = GitMemory.from_defaults(path=repo_path, session_id="react")
    assert str(await ReActAgent(tools=[add], llm=llm).run("What is 2 + 3?", memory=memory)) == "5"
    assert commits(repo_path, "react") == 2
    trace = memory.get_all()[-1].content
    for step in ("Thought: I should add.", "Action: add", "Observation: 5", "Answer: 5"):
        assert step in trace


async def test_context_round_trip_keeps_the_memory_as_a_handle(repo_path, commits):
    agent = FunctionAgent(tools=[add], llm=ScriptedFunctionCallingLLM(["first", "second"]))
    memory = GitMemory.from_defaults(path=repo_path, session_id="ctx", token_limit=4096)
    ctx = Context(agent)
    await agent.run("one", memory=memory, ctx=ctx)
    payload = json.dumps(ctx.to_dict())
    assert "first" not in payload  # messages live in git, not in the context
    restored = Context.from_dict(agent, json.loads(payload))
    again = await restored.store.get("memory")
    assert isinstance(again, GitMemory) and again is not memory
    assert (again.session_id, again.token_limit, again.path) == ("ctx", 4096, memory.path)
    await agent.run("two", ctx=restored)
    assert [m.content for m in memory.get_all()] == ["one", "first", "two", "second"]
    assert commits(repo_path, "ctx") == 4


def test_chat_engine_uses_the_sync_methods(repo_path, commits):
    llm = ScriptedFunctionCallingLLM(["Hello Ada."])
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=GitMemory.from_defaults(path=repo_path, session_id="chat"))
    assert str(engine.chat("I am Ada.")) == "Hello Ada."
    assert commits(repo_path, "chat") == 2
    llm2 = ScriptedFunctionCallingLLM(["You are Ada."])
    engine2 = SimpleChatEngine.from_defaults(
        llm=llm2, memory=GitMemory.from_defaults(path=repo_path, session_id="chat")
    )
    engine2.chat("Who am I?")
    assert "I am Ada." in flat(llm2.calls[0]) and "Hello Ada." in flat(llm2.calls[0])


def _tool_pairs_intact(messages: list[ChatMessage]) -> None:
    """What chat APIs demand: every tool result answers a call earlier in the same input."""
    history = [m for m in messages if m.role.value != "system"]
    assert history and history[0].role.value == "user"
    calls = set()
    for m in history:
        calls |= {b.tool_call_id for b in m.blocks if isinstance(b, ToolCallBlock)}
        if m.role.value == "tool":
            assert m.additional_kwargs["tool_call_id"] in calls


async def test_small_window_with_reloads_never_orphans_tool_results(repo_path):
    for turn in range(6):
        llm = ScriptedFunctionCallingLLM(
            [
                ScriptedToolCall("add", {"a": turn, "b": turn}),
                ScriptedToolCall("add", {"a": turn, "b": 1}),
                f"turn {turn}: {2 * turn} and {turn + 1}, as computed",
            ]
        )
        memory = GitMemory.from_defaults(
            path=repo_path, session_id="tight", token_limit=150, token_flush_size=20
        )  # a fresh object each turn: a reload
        await FunctionAgent(tools=[add], llm=llm).run(f"turn {turn}: add {turn} to itself, then 1", memory=memory)
        for seen in llm.calls:
            _tool_pairs_intact(seen)
    archived = memory.get_all(status=MessageStatus.ARCHIVED)
    assert archived, "the window must have been cut for this test to mean anything"
    window = memory.get()
    assert window[0].role.value == "user" and len(window) < len(memory.get_all())
