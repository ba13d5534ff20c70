"""The tool worker process: SymPy and PuLP jobs run in a child, under a hard wall-clock limit.

§3.2 of the paper (arXiv 2606.14470): tools must never hang the solver
(``9**9**9``, a runaway ``expand``, a CBC solve). The parent talks to one
long-lived ``python -c`` child over JSON lines; on timeout the child's whole
process group is killed and a fresh one starts on the next call. The jobs
themselves (``_JOBS``) live in :mod:`got_core.solver.tools` and are imported
inside the child only.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from got_core.errors import ToolError
from got_core.solver._safe_math import ToolInputError, ToolLimitError, ToolTimeoutError, UnsafeInputError

__all__ = ["shutdown_worker"]

_ERRORS = {c.__name__: c for c in (ToolError, ToolInputError, UnsafeInputError, ToolLimitError, ToolTimeoutError)}


class _Worker:
    """One long-lived child process for SymPy/PuLP work, killed and replaced on timeout.

    A plain ``python -c`` subprocess speaking JSON lines over pipes: no pickle, no
    re-import of the caller's ``__main__`` (which ``multiprocessing`` spawn needs),
    and its own process group so a timeout also kills a running CBC solver.
    """

    START_TIMEOUT = 120.0  # first import of sympy on a busy 2-core box; not charged to jobs

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Any = None
        self._lines: Any = None
        self._owner = 0

    def _start(self) -> None:
        import os
        import queue
        import subprocess
        import sys
        from pathlib import Path

        root = str(Path(__file__).resolve().parents[2])  # so a source checkout works uninstalled
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", "from got_core.solver._tool_worker import _worker_main; _worker_main()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=env, text=True, encoding="utf-8", start_new_session=(os.name == "posix"),
            )
        except OSError as exc:
            raise ToolError(f"cannot start the tool worker process ({exc})") from None
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:  # a reader thread lets the caller wait with a timeout on any OS
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, name="got-tools-reader", daemon=True).start()
        self._proc, self._lines, self._owner = proc, lines, os.getpid()
        if self._read(self.START_TIMEOUT) is None:
            self.stop()
            raise ToolError("the tool worker did not start; check that sympy and pulp import")

    def _read(self, timeout: float) -> dict[str, Any] | None:
        import queue

        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            raise EOFError
        return json.loads(line)

    def stop(self) -> None:
        """Kill the worker and its children (a new worker starts on the next call)."""
        import os
        import signal

        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass
        proc.wait(5)
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def call(self, kind: str, text: str, timeout: float) -> str:
        """Run one job in the worker; raise the job's typed error or :class:`ToolTimeoutError`."""
        import os

        with self._lock:
            if self._owner != os.getpid():  # a forked child must not share its parent's worker
                self._proc = None
            if self._proc is None or self._proc.poll() is not None:
                self.stop()
                self._start()
            try:
                self._proc.stdin.write(json.dumps({"kind": kind, "text": text, "timeout": timeout}) + "\n")
                self._proc.stdin.flush()
                reply = self._read(timeout)
            except (EOFError, OSError, ValueError):
                self.stop()
                raise ToolError(f"the {kind} worker crashed (out of memory?); simplify the input") from None
            if reply is None:
                self.stop()  # the only sure way to stop a runaway sympy/CBC computation
                raise ToolTimeoutError(f"{kind} did not finish within {timeout:g} s and was stopped; "
                                       "simplify the input or split the problem")
        if reply.get("ok"):
            return str(reply["output"])
        raise _ERRORS.get(reply.get("type"), ToolError)(str(reply.get("message")))


_WORKER = _Worker()


def shutdown_worker() -> None:
    """Stop the tool worker process now (it restarts lazily on the next sympy/lp call)."""
    with _WORKER._lock:
        _WORKER.stop()


def _run_job(kind: str, text: str, timeout: float) -> dict[str, Any]:
    from got_core.solver.tools import _JOBS  # runs in the child only; tools imports this module

    try:
        return {"ok": True, "output": _JOBS[kind](text, timeout)}
    except ToolError as exc:
        return {"ok": False, "type": type(exc).__name__, "message": str(exc)}
    except MemoryError:
        return {"ok": False, "type": "ToolLimitError", "message": f"{kind} ran out of memory; simplify the input"}
    except RecursionError:
        return {"ok": False, "type": "ToolLimitError", "message": f"{kind} recursed too deeply; simplify the input"}
    except Exception as exc:  # report, keep serving
        return {"ok": False, "type": "ToolError",
                "message": f"{kind} could not handle the input ({type(exc).__name__}: {exc})"}


def _worker_main() -> None:
    """Child-process loop: one JSON request per stdin line, one JSON reply per line."""
    import os
    import sys
    import time

    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the protocol
    sys.stdout = sys.stderr
    try:  # a memory ceiling turns runaway expansions into MemoryError instead of swapping
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = 4 << 30
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    except (ImportError, ValueError, OSError):
        pass
    parent = os.getppid()

    def watchdog() -> None:  # die with the parent even in the middle of a computation
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    import pulp  # noqa: F401  - preload so job timeouts measure work, not imports
    import sympy  # noqa: F401

    proto.write(json.dumps({"ready": True}) + "\n")
    proto.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply = _run_job(str(req["kind"]), str(req["text"]), float(req["timeout"]))
        except (ValueError, KeyError, TypeError) as exc:
            reply = {"ok": False, "type": "ToolError", "message": f"bad worker request ({exc})"}
        proto.write(json.dumps(reply) + "\n")
        proto.flush()
