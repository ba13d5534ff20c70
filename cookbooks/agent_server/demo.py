"""Cookbook: the LangGraph Agent Server keeping its threads in git, start to finish.

It copies this folder (``langgraph.json`` and ``agent.py``) under ``--out``, starts
``langgraph dev`` there on 127.0.0.1 (a free port, no browser, no tracing, no version
check, no CLI analytics: nothing leaves the machine) with ``GOT_REPO`` outside the folder the server
watches, drives it with ``langgraph_sdk`` (a run that pauses for review, the resume, the
history, the store), prints what git holds, and stops the server.

Run::

    python cookbooks/agent_server/demo.py                 # under $TMPDIR/got-cookbooks/agent_server
    python cookbooks/agent_server/demo.py --out runs/agent-server

Needs the ``server`` extra: ``pip install 'gitofthoughts[server]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["drive", "exit_description", "free_port", "main", "serve", "server_env", "start", "stop"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
QUESTION = "a trip to Lisbon"


def server_env(gitdir: Path) -> dict[str, str]:
    """The server's environment: ``GOT_REPO`` set; tracing, version checks, analytics and telemetry off.

    ``LANGGRAPH_CLI_NO_ANALYTICS=1`` matters twice: without it the ``langgraph`` CLI posts
    every command to its analytics service (``langgraph_cli/analytics.py``), and it does so
    from a thread whose ``getaddrinfo`` runs while the main thread adds some twenty variables
    to the environment (``patch_environment`` in ``langgraph_api/cli.py``). glibc's
    ``setenv`` is not safe against a concurrent ``getenv`` (``getaddrinfo`` reads
    ``LOCALDOMAIN``/``RES_OPTIONS``): a rare SIGSEGV of the CLI before its first log line.
    ``PYTHONFAULTHANDLER=1`` makes any crash of the server print a Python traceback in its log.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "GOT_"))}
    env.update(
        {
            "GOT_REPO": str(gitdir),
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "DO_NOT_TRACK": "1",
            "LOG_LEVEL": "INFO",
            "PYTHONFAULTHANDLER": "1",
        }
    )
    return env


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def exit_description(returncode: int) -> str:
    """``returncode`` of a process in words: ``status 1``, or ``signal 11 (SIGSEGV)`` for ``-11``."""
    if returncode >= 0:
        return f"status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "unknown signal"
    return f"signal {-returncode} ({name})"


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text(errors="replace")
            raise RuntimeError(
                f"langgraph dev exited with {proc.returncode}, {exit_description(proc.returncode)}, before it "
                f"answered on {url}; its log {log} ({len(text)} characters, a Python traceback there if it "
                f"crashed: PYTHONFAULTHANDLER is set) follows:\n{text}"
            )
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"langgraph dev did not answer within {timeout}s:\n{log.read_text(errors='replace')}")


def start(
    app: Path, gitdir: Path, log: Path, port: int, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``langgraph dev`` in ``app`` on ``127.0.0.1:port``, in a session of its own (see :func:`stop`).

    Raises:
        RuntimeError: the ``langgraph`` CLI is not installed.
    """
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.exists():
        raise RuntimeError("the langgraph CLI is not installed: pip install 'gitofthoughts[server]'")
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(cli), "dev", "--no-browser", "--host", "127.0.0.1", "--port", str(port)],
            cwd=app,
            env={**server_env(gitdir), **(extra_env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server :func:`start` started: its whole session (the CLI and its reloader's worker)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def serve(
    app: Path, gitdir: Path, log: Path, timeout: float = 600.0, extra_env: dict[str, str] | None = None
) -> Iterator[str]:
    """Run ``langgraph dev`` in ``app`` (a folder with ``langgraph.json``) until the block ends.

    Args:
        app: the folder the server runs in (and watches).
        gitdir: the repository of its checkpoints and store (keep it outside ``app``).
        log: where the server's output goes.
        timeout: how long to wait for the server to answer.
        extra_env: more environment variables for the server (e.g. ``GOT_AES_KEY``).

    Yields:
        the server's URL.

    Raises:
        RuntimeError: the CLI is missing, or the server exited or did not answer in time.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start(app, gitdir, log, port, extra_env)
    try:
        _wait_ready(url, proc, log, timeout)
        yield url
    finally:
        stop(proc)


async def drive(url: str) -> dict[str, Any]:
    """One thread through the example graph: run, pause for review, resume; then the history and the store.

    Returns:
        ``{"thread_id", "plan", "answer", "history", "plans"}`` (history: checkpoint ids, newest first).
    """
    from langgraph_sdk import get_client

    client = get_client(url=url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "agent", input={"messages": [{"role": "user", "content": QUESTION}]})
    paused = await client.threads.get_state(tid)
    done = await client.runs.wait(tid, "agent", command={"resume": "approve"})
    history = await client.threads.get_history(tid, limit=100)
    plans = await client.store.search_items(["plans"])
    return {
        "thread_id": tid,
        "plan": paused["interrupts"][0]["value"]["plan"],
        "answer": done["messages"][-1]["content"],
        "history": [state["checkpoint"]["checkpoint_id"] for state in history],
        "plans": [item["value"]["plan"] for item in plans["items"]],
    }


def _git(gitdir: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(
        ["git", f"--git-dir={gitdir}", *args], capture_output=True, text=True, check=True, env=env
    ).stdout


def main(argv: list[str] | None = None) -> int:
    """Run the walkthrough; returns the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=None, help="output directory (default: got-cookbooks/agent_server in the temp dir)"
    )
    args = parser.parse_args(argv)
    if args.out is None:  # the default directory is ours: a rerun starts afresh
        out = Path(tempfile.gettempdir()).resolve() / "got-cookbooks" / "agent_server"
        shutil.rmtree(out, ignore_errors=True)
    else:
        out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    app, gitdir = out / "app", out / "agent-server.git"
    shutil.rmtree(app, ignore_errors=True)
    shutil.copytree(HERE, app, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api", "demo.py"))
    with serve(app, gitdir, out / "server.log") as url:
        result = asyncio.run(drive(url))
    print(f"plan for review: {result['plan']}")
    print(f"answer:          {result['answer']}")
    print(f"store:           {result['plans']}")
    print(f"\n$ git --git-dir={gitdir} log --oneline --glob='refs/got/threads/*'")
    print(_git(gitdir, "log", "--oneline", "--glob=refs/got/threads/*"), end="")
    print(f"$ git --git-dir={gitdir} log --oneline refs/got/store")
    print(_git(gitdir, "log", "--oneline", "refs/got/store"), end="")
    print(f"\nserver log: {out / 'server.log'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
