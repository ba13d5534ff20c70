"""A human-in-the-loop agent, paused in one process and resumed in another (run by test_hitl_resume).

The agent's tool asks a human before acting (llama-index's ``InputRequiredEvent`` /
``HumanResponseEvent``); the LLM is the scripted one. As a script::

    python hitl_app.py resume REPO CONTEXT_JSON OUT_JSON [--live]

restores the ``Context`` from ``CONTEXT_JSON`` (``ctx.to_dict()`` of a paused run), answers
"yes", finishes the run and writes what the LLM saw and which session the memory wrote to.
"""

# No `from __future__ import annotations`: llama-index finds a tool's `ctx: Context`
# parameter by its evaluated annotation.
import asyncio
import json
import sys
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent

from got_integrations.llamaindex import GitMemory
from got_integrations.llamaindex.testing import ScriptedFunctionCallingLLM, ScriptedToolCall


async def delete_file(ctx: Context, target: str) -> str:
    """Delete a file once a human approves."""
    answer = await ctx.wait_for_event(
        HumanResponseEvent, waiter_id=f"delete {target}", waiter_event=InputRequiredEvent(prefix=f"Delete {target}? ")
    )
    return f"deleted {target}" if answer.response == "yes" else f"kept {target}"


def agent(replies: list[Any]) -> tuple[FunctionAgent, ScriptedFunctionCallingLLM]:
    """The agent and its scripted LLM."""
    llm = ScriptedFunctionCallingLLM(replies)
    return FunctionAgent(tools=[delete_file], llm=llm, system_prompt="You manage files."), llm


async def pause(memory: GitMemory, request: str, target: str) -> dict[str, Any]:
    """Run until the tool asks the human, then serialize the Context and stop the run."""
    paused, _ = agent([ScriptedToolCall("delete_file", {"target": target})])
    handler = paused.run(request, memory=memory)
    async for event in handler.stream_events():
        if isinstance(event, InputRequiredEvent):
            assert handler.ctx is not None
            data = handler.ctx.to_dict()
            await handler.cancel_run()
            return json.loads(json.dumps(data))  # what a file or a database would hold
    raise AssertionError("the agent never asked the human")


async def resume(context: dict[str, Any], live: bool) -> dict[str, Any]:
    """Restore the Context in this process, answer the human's question, finish the run."""
    resumed, llm = agent(["Done: the file is deleted."])
    if live:  # resume on the session's newest commit: the handle's own setting, flipped
        state = context["state"]["state_data"]["_data"]
        handle = json.loads(state["memory"])
        handle["value"]["live"] = True
        state["memory"] = json.dumps(handle)
    ctx = Context.from_dict(resumed, context)
    handler = resumed.run(ctx=ctx)
    handler.ctx.send_event(HumanResponseEvent(response="yes"))
    answer = str(await handler)
    memory = await ctx.store.get("memory")
    return {
        "answer": answer,
        "seen": [m.model_dump(mode="json") for m in llm.calls[0]],
        "session_id": memory.session_id,
        "forked_from": memory.forked_from,
        "stored": [m.content for m in memory.get_all()],
    }


if __name__ == "__main__":
    _, command, repo, context_file, out_file, *flags = sys.argv
    assert command == "resume", command
    with open(context_file, encoding="utf-8") as f:
        saved = json.load(f)
    result = asyncio.run(resume(saved, live="--live" in flags))
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump(result, f)
