"""The tool worker processes: every tool job runs in a child, under hard time and memory limits.

§3.2 of the paper (arXiv 2606.14470): tools must never hang the solver
(``9**9**9``, a runaway ``expand``, a CBC solve, ``lcm`` of huge integers). The
parent talks to a long-lived ``python -c`` child over JSON lines and waits at most
the tool's wall-clock limit; on timeout the child's whole process group is killed
and a fresh one starts on the next call. Inside the child each job also runs under
``RLIMIT_AS`` (its memory limit: a runaway allocation is a ``MemoryError``, not
swapping) and ``RLIMIT_CPU`` (a second, kernel-enforced stop a little past the
wall-clock limit). Two workers: one preloads SymPy and PuLP, the calculator's
starts in a fraction of the time without them. The jobs themselves (``_JOBS``)
live in :mod:`got_core.solver._tool_jobs` and are imported inside the child only.
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
    """One long-lived child process for tool jobs, killed and replaced on timeout.

    A plain ``python -c`` subprocess speaking JSON lines over pipes: no pickle, no
    re-import of the caller's ``__main__`` (which ``multiprocessing`` spawn needs),
    and its own process group so a timeout also kills a running CBC solver.

    Args:
        preload: modules the child imports before it reports ready (so job limits
            measure work, not imports).
    """

    START_TIMEOUT = 120.0  # first import of sympy on a busy 2-core box; not charged to jobs

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._proc: Any = None
        self._lines: Any = None
        self._owner = 0
        self._preload = preload

    def _start(self) -> None:
        import os
        import queue
        import subprocess
        import sys
        from pathlib import Path

        root = str(Path(__file__).resolve().parents[2])  # so a source checkout works uninstalled
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        code = f"from got_core.solver._tool_worker import _worker_main; _worker_main({','.join(self._preload)!r})"
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                text=True,
                encoding="utf-8",
                start_new_session=(os.name == "posix"),
            )
        except OSError as exc:
            raise ToolError(f"cannot start the tool worker process ({exc})") from None
        out = proc.stdout
        if out is None:  # not with stdout=PIPE
            proc.kill()
            raise ToolError("the tool worker process has no output pipe")
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:  # a reader thread lets the caller wait with a timeout on any OS
            for line in out:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, name="got-tools-reader", daemon=True).start()
        self._proc, self._lines, self._owner = proc, lines, os.getpid()
        try:
            ready = self._read(self.START_TIMEOUT)
        except (EOFError, ValueError):
            ready = None
        if ready is None:
            self.stop()
            what = f"check that {', '.join(self._preload)} import" if self._preload else "check the Python install"
            raise ToolError(f"the tool worker did not start; {what}")

    def _read(self, timeout: float) -> dict[str, Any] | None:
        import queue

        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            raise EOFError
        return json.loads(line)

    def stop(self) -> int | None:
        """Kill the worker and its children (a new worker starts on the next call).

        Returns:
            The worker's exit status when it had already died (``-SIGXCPU``: its CPU limit).
        """
        import os
        import signal

        proc, self._proc = self._proc, None
        if proc is None:
            return None
        died = proc.poll()
        try:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            proc.wait(5)
        except Exception:
            pass
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return died

    def call(self, kind: str, text: str, timeout: float, memory_bytes: int | None = None) -> str:
        """Run one job in the worker within ``timeout`` wall-clock seconds and ``memory_bytes``.

        Raises:
            ToolTimeoutError: it ran past its limit (the worker was killed).
            ToolLimitError: it ran out of its memory limit.
            ToolError: the job's own typed error, or the worker died.
        """
        import os
        import signal

        with self._lock:
            if self._owner != os.getpid():  # a forked child must not share its parent's worker
                self._proc = None
            if self._proc is None or self._proc.poll() is not None:
                self.stop()
                self._start()
            request = {"kind": kind, "text": text, "timeout": timeout, "memory": memory_bytes}
            try:
                self._proc.stdin.write(json.dumps(request) + "\n")
                self._proc.stdin.flush()
                reply = self._read(timeout)
            except (EOFError, OSError, ValueError):
                try:
                    self._proc.wait(2)  # it closed its pipe on the way out: collect its status
                except Exception:
                    pass
                status = self.stop()
                if status == -getattr(signal, "SIGXCPU", -1):
                    raise ToolTimeoutError(
                        f"{kind} used more than its {timeout:g} s of CPU time and "
                        "was stopped; simplify the input or split the problem"
                    ) from None
                raise ToolError(f"the {kind} worker crashed (out of memory?); simplify the input") from None
            if reply is None:
                self.stop()  # the only sure way to stop a runaway computation
                raise ToolTimeoutError(
                    f"{kind} did not finish within {timeout:g} s and was stopped; "
                    "simplify the input or split the problem"
                )
            if reply.get("restart"):
                self.stop()
        if reply.get("ok"):
            return str(reply["output"])
        raise _ERRORS.get(str(reply.get("type")), ToolError)(str(reply.get("message")))


_WORKER = _Worker(("pulp", "sympy"))
#: The calculator's worker: no heavy imports, so it starts in a fraction of a second.
_CALC_WORKER = _Worker()


def shutdown_worker() -> None:
    """Stop the tool worker processes now (they restart lazily on the next call)."""
    for worker in (_WORKER, _CALC_WORKER):
        with worker._lock:
            worker.stop()


def _run_job(kind: str, text: str, timeout: float) -> dict[str, Any]:
    from got_core.solver._tool_jobs import _JOBS  # runs in the child only

    try:
        return {"ok": True, "output": _JOBS[kind](text, timeout)}
    except ToolError as exc:
        return {"ok": False, "type": type(exc).__name__, "message": str(exc)}
    except (MemoryError, SystemError):  # SystemError: C code that failed to allocate
        # the worker's heap may stay fragmented (or worse): the parent replaces it
        return {
            "ok": False,
            "type": "ToolLimitError",
            "restart": True,
            "message": f"{kind} ran out of its memory limit; simplify the input",
        }
    except RecursionError:
        return {"ok": False, "type": "ToolLimitError", "message": f"{kind} recursed too deeply; simplify the input"}
    except Exception as exc:  # report, keep serving
        return {
            "ok": False,
            "type": "ToolError",
            "message": f"{kind} could not handle the input ({type(exc).__name__}: {exc})",
        }


def _limit_job(timeout: float, memory: int | None) -> None:
    """Limits for the next job: address space, and CPU seconds a little past the wall clock."""
    try:
        import math
        import resource
    except ImportError:  # pragma: no cover - non-POSIX: the wall-clock kill still applies
        return
    try:
        if memory:
            _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = int(memory) if hard == resource.RLIM_INFINITY else min(int(memory), hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        cpu = math.ceil(usage.ru_utime + usage.ru_stime + timeout) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (cpu if hard == resource.RLIM_INFINITY else min(cpu, hard), hard))
    except (ValueError, OSError):
        pass


def _worker_main(preload: str = "pulp,sympy") -> None:
    """Child-process loop: one JSON request per stdin line, one JSON reply per line."""
    import importlib
    import os
    import sys
    import time

    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the protocol
    sys.stdout = sys.stderr
    parent = os.getppid()

    def watchdog() -> None:  # die with the parent even in the middle of a computation
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    for name in filter(None, preload.split(",")):
        importlib.import_module(name)  # preload so job timeouts measure work, not imports

    proto.write(json.dumps({"ready": True}) + "\n")
    proto.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            timeout = float(req["timeout"])
            _limit_job(timeout, req.get("memory"))
            reply = _run_job(str(req["kind"]), str(req["text"]), timeout)
        except (ValueError, KeyError, TypeError) as exc:
            reply = {"ok": False, "type": "ToolError", "message": f"bad worker request ({exc})"}
        try:
            proto.write(json.dumps(reply) + "\n")
            proto.flush()
        except MemoryError:  # the reply itself did not fit under the job's limit
            proto.write('{"ok": false, "type": "ToolLimitError", "restart": true, "message": "out of memory"}\n')
            proto.flush()
