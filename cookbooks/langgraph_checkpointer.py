"""Cookbook: give an existing LangGraph agent commit-per-step history with one changed line.

The agent below is ordinary LangGraph code: a ``StateGraph`` with an ``agent`` node and
a ``ToolNode`` (a calculator) in a loop. Its model is scripted (a stand-in that plans a
calculator call and then reports the result; no network) so the script runs anywhere;
put your chat model in ``agent()`` for real use.

The only change is the checkpointer line. Then the script shows what git gives you:

1. history — every super-step is a commit (``git log``), with its pending writes;
2. diff    — what one turn changed in the state, as a line diff of readable JSON;
3. fork    — ``update_state`` on a past checkpoint starts a branch; nothing is lost;
4. time travel — replaying from a past checkpoint re-runs the graph from there.

Run::

    python cookbooks/langgraph_checkpointer.py                     # into <temp dir>/got-cookbooks/langgraph_checkpointer/
    python cookbooks/langgraph_checkpointer.py --repo agent.git    # or here, then:
    got threads history tutor -r agent.git
    git --git-dir=agent.git log --oneline --graph --glob='refs/got/threads/*'

The repository is kept (the last line names it); a rerun into the default ``--out`` starts afresh.

Needs the ``langgraph`` extra: ``pip install 'gitofthoughts[langgraph]'``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["build_agent", "main"]


def build_agent(checkpointer: Any) -> Any:
    """The existing agent: unchanged LangGraph code, compiled with the given checkpointer."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from got_core.solver.tools import calculate

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression exactly."""
        return calculate(expression)  # a whitelist parser: model output is never eval-ed

    def agent(state: MessagesState) -> dict:
        # Scripted model (replace with `model.bind_tools([calculator]).invoke(state["messages"])`).
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            expression = re.split(r"(?i)\bwhat is\b|:", str(last.content).rstrip("?"))[-1].strip()
            call = {"name": "calculator", "args": {"expression": expression}, "id": f"call-{len(state['messages'])}"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content=f"The answer is {last.content}.")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([calculator]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _last(values: dict) -> str:
    from got_integrations.langgraph._layout import message_summary

    messages = values.get("messages") or []
    return (message_summary(messages[-1]) or "") if messages else ""


def main(argv: list[str] | None = None) -> int:
    """Run the walkthrough; returns the process exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "got-cookbooks" / "langgraph_checkpointer",
        help="Output directory: the repository is OUT/agent.git, replaced on each run (default: %(default)s).",
    )
    parser.add_argument("--repo", type=Path, default=None, help="Write this repository instead of OUT/agent.git.")
    parser.add_argument("--thread", default="tutor", help="Thread id (default: tutor).")
    args = parser.parse_args(argv)

    from langchain_core.messages import HumanMessage

    from got_integrations.langgraph import GitCheckpointSaver
    from got_integrations.langgraph.cli import checkpoint_diff

    repo = args.repo or args.out / "agent.git"
    if args.repo is None and repo.exists():
        shutil.rmtree(repo)  # our own output from an earlier run: start afresh

    # Before:  checkpointer = SqliteSaver(sqlite3.connect("agent.sqlite", check_same_thread=False))
    #   (or)   checkpointer = InMemorySaver()
    checkpointer = GitCheckpointSaver.from_path(repo)  # <- the one changed line
    graph = build_agent(checkpointer)

    config = {"configurable": {"thread_id": args.thread}}
    for question in ("What is 12*(3+4)?", "What is 2**10/4?", "What is 7*6?"):
        reply = graph.invoke({"messages": [HumanMessage(question)]}, config)["messages"][-1]
        print(f"user: {question}\nagent: {reply.content}")

    print("\n1. history: every super-step is a commit (newest first)")
    history = list(graph.get_state_history(config))
    for snap in history:
        commit = checkpointer.commit_of(snap.config)
        print(
            f"  step {snap.metadata['step']:>2} {snap.metadata['source']:<6} {commit[:10]}  "
            f"next={list(snap.next)}  {_last(snap.values)}"
        )

    print("\n2. diff: what the last turn changed (readable state files)")
    turn_start = next(s for s in history if s.metadata["source"] == "input")
    print(
        checkpoint_diff(
            checkpointer,
            args.thread,
            turn_start.config["configurable"]["checkpoint_id"],
            history[0].config["configurable"]["checkpoint_id"],
        )
    )

    print("3. fork: correct a past question with update_state; the old line stays as a branch")
    first_question = next(s for s in reversed(history) if s.next == ("agent",))
    question_id = first_question.values["messages"][-1].id  # same id: add_messages replaces the message
    fork = graph.update_state(first_question.config, {"messages": [HumanMessage("What is 100-1?", id=question_id)]})
    print(f"  fork answer: {graph.invoke(None, fork)['messages'][-1].content}")
    for ref, checkpoint_id in sorted(checkpointer.lines(args.thread).items()):
        tip = checkpointer.get_tuple(
            {"configurable": {"thread_id": args.thread, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        )
        print(f"  {ref}  ->  {_last(tip.checkpoint['channel_values'])}")

    print("\n4. time travel: replay the second turn from its first checkpoint")
    second_turn = [s for s in history if s.metadata["source"] == "input"][1]
    replayed = graph.invoke(None, second_turn.config)
    print(f"  replayed answer: {replayed['messages'][-1].content}")
    print(f"  checkpoints on this thread now: {len(list(graph.get_state_history(config)))}")

    if shutil.which("git"):
        print("\n`git log --oneline --graph` of the thread's refs:")
        out = subprocess.run(
            [
                "git",
                f"--git-dir={repo}",
                "log",
                "--oneline",
                "--graph",
                f"--glob=refs/got/threads/{args.thread}/*/[hf]*",
            ],
            capture_output=True,
            text=True,
        )
        print(out.stdout)
    checkpointer.close()
    print(f"kept {repo}: try `got threads history {args.thread} -r {repo}`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
