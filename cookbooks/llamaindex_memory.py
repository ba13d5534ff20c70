"""Cookbook: a LlamaIndex agent whose memory is a git repository.

A ``FunctionAgent`` with an ``add`` tool talks to two users (sessions ``alice``
and ``bob``) through :class:`got_integrations.llamaindex.GitMemory`. Then a new
process reconnects to the repository and continues alice's conversation: what
the model sees of the earlier turns was read back from git. Finally
``got session log alice`` shows every write as a commit.

The model is :class:`~got_integrations.llamaindex.testing.ScriptedFunctionCallingLLM`
(scripted tool calls and answers, no network); swap in any llama-index
function-calling LLM (``OpenAILike(...)`` for a local vLLM) for real use.

Run::

    python cookbooks/llamaindex_memory.py                  # into <temp dir>/got-cookbooks/llamaindex_memory/
    python cookbooks/llamaindex_memory.py --repo agent.git # or here; then try `got session diff alice 1 2 -r agent.git`

The repository is kept (the last line names it); a rerun into the default ``--out`` starts afresh.

Needs the ``llamaindex`` extra: ``pip install 'gitofthoughts[llamaindex]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["main"]


def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


def _agent(replies: list):
    from llama_index.core.agent.workflow import FunctionAgent

    from got_integrations.llamaindex.testing import ScriptedFunctionCallingLLM

    llm = ScriptedFunctionCallingLLM(replies)
    return FunctionAgent(tools=[add], llm=llm, system_prompt="You are a careful calculator."), llm


def _show(memory) -> None:
    for message_id, message in memory.get_all_with_ids():
        text = message.content or ", ".join(
            f"{b.tool_name}({b.tool_kwargs})" for b in message.blocks if b.block_type == "tool_call"
        )
        print(f"  {message.role.value:<9} {text!s:<48} {message_id[:10]}:{message_id.split(':')[1]}")


async def first_process(repo: Path) -> None:
    """Two sessions, two turns each, every write a commit."""
    from got_integrations.llamaindex import GitMemory
    from got_integrations.llamaindex.testing import ScriptedToolCall

    script = {
        "alice": [
            ScriptedToolCall("add", {"a": 2, "b": 3}),
            "2 + 3 = 5.",
            ScriptedToolCall("add", {"a": 5, "b": 10}),
            "Adding 10 gives 15.",
        ],
        "bob": [ScriptedToolCall("add", {"a": 40, "b": 2}), "40 + 2 = 42.", "You asked me to add 40 and 2."],
    }
    questions = {
        "alice": ["What is 2 + 3?", "And if I add 10 to that?"],
        "bob": ["Please add 40 and 2.", "What did I ask you?"],
    }
    for session, replies in script.items():
        agent, _ = _agent(replies)
        memory = GitMemory.from_defaults(path=repo, session_id=session)
        for question in questions[session]:
            answer = await agent.run(question, memory=memory)
            print(f"[{session}] {question} -> {answer}")
        print(f"[{session}] {len(memory.history())} commits on {memory.ref}")


async def second_process(repo: Path) -> None:
    """A fresh process: reconnect, show the restored conversation, continue it."""
    from got_integrations.llamaindex import GitMemory

    for session in ("alice", "bob"):
        memory = GitMemory.from_defaults(path=repo, session_id=session, create=False)
        print(f"restored session {session!r} ({len(memory)} messages, id = commit:path):")
        _show(memory)
    agent, llm = _agent(["Your first question was 2 + 3."])
    memory = GitMemory.from_defaults(path=repo, session_id="alice", create=False)
    answer = await agent.run("What was my first question?", memory=memory)
    seen = llm.calls[0]
    print(f"\n[alice, new process] What was my first question? -> {answer}")
    print(
        f"  the model saw {len(seen)} messages; the earlier turns came from git: "
        f"{[m.content for m in seen if m.role.value == 'user']}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the cookbook; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "got-cookbooks" / "llamaindex_memory",
        help="output directory: the repository is OUT/agent.git, replaced on each run (default: %(default)s)",
    )
    parser.add_argument("--repo", type=Path, default=None, help="write this repository instead of OUT/agent.git")
    parser.add_argument(
        "--phase", choices=("all", "first", "second"), default="all", help=argparse.SUPPRESS
    )  # the script re-runs itself for the restart
    args = parser.parse_args(argv)
    try:
        import llama_index.core  # noqa: F401
    except ImportError:
        print("this cookbook needs the llamaindex extra: pip install 'gitofthoughts[llamaindex]'", file=sys.stderr)
        return 2
    repo = (args.repo or args.out / "agent.git").resolve()
    if args.phase == "first":
        asyncio.run(first_process(repo))
        return 0
    if args.phase == "second":
        asyncio.run(second_process(repo))
        return 0
    if args.repo is None and repo.exists():
        shutil.rmtree(repo)  # our own output from an earlier run: start afresh
    print(f"== process 1: two sessions in {repo}")
    asyncio.run(first_process(repo))
    print("\n== process 2: restart and restore")
    done = subprocess.run([sys.executable, __file__, "--repo", str(repo), "--phase", "second"])
    if done.returncode:
        return done.returncode
    print("\n== got session log alice")
    from got_core.cli import main as got

    status = got(["session", "log", "alice", "--repo", str(repo)])
    print("\n== got session diff alice 4 5   (what the restarted process added)")
    status = status or got(["session", "diff", "alice", "4", "5", "--repo", str(repo)])
    print(f"\nkept {repo}: try `got session show alice -r {repo}`")
    return status


if __name__ == "__main__":
    sys.exit(main())
