"""A small agent for the LangGraph Agent Server, with git checkpoints and a git store.

``langgraph.json`` beside this file serves the graph below with
``got_integrations.langgraph.server``'s factories: every checkpoint the server writes
is a commit under ``refs/got/threads/<thread>/`` and every store write a commit on
``refs/got/store``, in the repository ``$GOT_REPO`` (default: ``agent-server.git`` in
the per-user data directory, outside the directory ``langgraph dev`` watches).

Run it from this directory (``pip install 'gitofthoughts[server]'``)::

    LANGSMITH_TRACING=false LANGGRAPH_NO_VERSION_CHECK=true LANGGRAPH_CLI_NO_ANALYTICS=1 \\
        langgraph dev --no-browser --host 127.0.0.1 --port 2024

(``LANGGRAPH_CLI_NO_ANALYTICS=1``: the CLI posts nothing, and runs no analytics thread that
could race its own environment set-up, see ``server_env`` in ``demo.py``.)

or let ``python cookbooks/agent_server/demo.py`` start it on a free port, drive it with
``langgraph_sdk`` and show what git holds.

The graph: ``draft`` asks the model for a plan, ``review`` pauses for a person
(``interrupt``; resume the run with ``Command(resume="approve")`` or with a correction),
``finish`` answers and records the approved plan in the store (``("plans", <topic>)``).
The model is scripted (a stand-in that needs no network); put your chat model in
``draft()`` for real use.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import interrupt

from got_core.solver.scripted import ScriptedChatModel

#: The stand-in model: it drafts a three-step plan for whatever the user asks.
MODEL = ScriptedChatModel(
    rules=[(r"(?s).+", lambda messages: f"Plan for {messages[-1]['content']}: 1. research 2. draft 3. check")],
    model_name="scripted-planner",
)


def _as_dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    roles = {"human": "user", "ai": "assistant", "system": "system"}
    return [{"role": roles.get(m.type, "user"), "content": str(m.content)} for m in messages]


def _topic(state: MessagesState) -> str:
    first = next((m for m in state["messages"] if isinstance(m, HumanMessage)), None)
    return str(first.content if first else "untitled").strip() or "untitled"


def draft(state: MessagesState) -> dict[str, Any]:
    """Ask the model for a plan."""
    reply = MODEL.complete(_as_dicts(state["messages"]))
    return {"messages": [AIMessage(content=reply.text)]}


def review(state: MessagesState) -> dict[str, Any]:
    """Pause for a person: the resume value is ``"approve"`` or a corrected plan."""
    plan = str(state["messages"][-1].content)
    verdict = interrupt({"question": "Approve this plan?", "plan": plan})
    if verdict == "approve":
        return {}
    return {"messages": [HumanMessage(content=f"Use this plan instead: {verdict}")]}


def finish(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
    """Answer with the approved plan and remember it in the store."""
    last = str(state["messages"][-1].content)
    plan = last.removeprefix("Use this plan instead: ")
    if store is not None:
        store.put(("plans", _topic(state)[:60].replace("/", "_") or "untitled"), "latest", {"plan": plan})
    return {"messages": [AIMessage(content=f"Approved. {plan}")]}


builder = StateGraph(MessagesState)
builder.add_node("draft", draft)
builder.add_node("review", review)
builder.add_node("finish", finish)
builder.add_edge(START, "draft")
builder.add_edge("draft", "review")
builder.add_edge("review", "finish")
builder.add_edge("finish", END)

#: The graph the server serves (it brings its own checkpointer and store).
graph = builder.compile()
