"""Run many ``got`` command lines, each in its own process, for the price of one import.

Tests call :func:`run_got`. As a script it reads a JSON list of cases on stdin
(``{"argv": [...], "cwd": "...", "env": {...}, "watch": [dirs]}``),
imports the CLI and its plugin groups once, then forks one child per case. The child
is a real process with its own stdin, stdout and stderr (files), and ends the way the
``got`` console script ends: ``sys.exit(main())``, or an uncaught exception printed
with its traceback and status 1, exactly as the interpreter would. Prints a JSON list
of ``{"code", "stdout", "stderr", "created"}`` on stdout, ``created`` being the paths
that appeared under the case's ``watch`` directories while it ran.

Fork keeps a few hundred cases to seconds (a fresh interpreter costs about a second
on a busy 2-core machine); Linux only, like the CI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

#: Generous limit for one case or one batch (the CI machine is busy): GOT_TEST_TIMEOUT seconds.
TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))


def got_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment for running ``got`` in tests: no user git config, this checkout first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GOT_", "LANGGRAPH_"))}
    env.update(
        {
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
        }
    )
    if "GOT_TEST_TIMEOUT" in os.environ:
        env["GOT_TEST_TIMEOUT"] = os.environ["GOT_TEST_TIMEOUT"]
    env.update(extra)
    return env


def run_got(cases: list[dict[str, Any]], env: dict[str, str], cwd: Path) -> list[dict[str, Any]]:
    """Run each case (``{"argv": [...], "cwd"?, "watch"?}``) as its own ``got`` process; returns
    ``{"code", "stdout", "stderr", "created"}`` per case, in order."""
    runs = [{"cwd": str(cwd), **case} for case in cases]
    proc = subprocess.run(
        [sys.executable, __file__],
        input=json.dumps(runs),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * max(1, len(runs) // 50),
    )
    if proc.returncode != 0:
        raise AssertionError(f"the got driver failed: {proc.stderr[-4000:]}")
    return json.loads(proc.stdout)


def _child(case: dict, out_path: str, err_path: str) -> None:
    code = 1
    try:
        os.chdir(case["cwd"])
        os.environ.update(case.get("env", {}))
        for name in case.get("unset", []):
            os.environ.pop(name, None)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.argv = ["got", *case["argv"]]
        from got_core.cli import _console_main

        try:
            _console_main()
            code = 0
        except SystemExit as exc:  # what the interpreter does with sys.exit(x)
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:  # an uncaught exception: the interpreter prints the traceback
            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def _listing(roots: list[str]) -> set[str]:
    """Every path under ``roots`` (what a failed command must not add to)."""
    found: set[str] = set()
    for root in roots:
        for base, dirs, files in os.walk(root):
            found.update(os.path.join(base, n) for n in dirs + files)
    return found


def _derived(path: str, before: set[str]) -> bool:
    parent, name = os.path.split(path)
    return name.startswith("index.sqlite3") and os.path.basename(parent) == "got" and os.path.dirname(parent) in before


def main() -> int:
    cases = json.load(sys.stdin)
    timeout = TIMEOUT
    # import once, before forking: the CLI and every plugin group
    from got_core.cli import _load_plugins

    _load_plugins()
    results = []
    with tempfile.TemporaryDirectory(prefix="got-cli-driver-") as scratch:
        for i, case in enumerate(cases):
            out_path, err_path = os.path.join(scratch, f"{i}.out"), os.path.join(scratch, f"{i}.err")
            before = _listing(case.get("watch", []))
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(case, out_path, err_path)
            deadline = time.monotonic() + timeout
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    status = -1
                    break
                time.sleep(0.005)
            code = os.waitstatus_to_exitcode(status) if status != -1 else -9
            with open(out_path, encoding="utf-8", errors="replace") as f:
                stdout = f.read()
            with open(err_path, encoding="utf-8", errors="replace") as f:
                stderr = f.read()
            # an existing repository's derived search index (got/index.sqlite3 and its
            # -wal/-shm files) may appear on any read: it is a cache, not something made
            created = sorted(p for p in _listing(case.get("watch", [])) - before if not _derived(p, before))
            results.append({"code": code, "stdout": stdout, "stderr": stderr, "created": created[:20]})
    json.dump(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
