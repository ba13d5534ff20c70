"""Running the real ``git`` binary, off the hot path (bundles, repack, fsck).

The environment is scrubbed so the user's global and system git config (signing,
hooks, credential helpers, pagers) never leak in, and git never prompts. Command-line
settings (which outrank a repository's own config) switch off what a hostile
repository's config could otherwise make git run: hooks, fsmonitor, automatic
maintenance, and every transport but local files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from got_core.errors import ConfigError, GotRuntimeError

__all__ = ["HARDENING", "GitCommandError", "git_env", "run_git"]


class GitCommandError(GotRuntimeError):
    """The git binary exited with an error; ``stderr`` holds what it said."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"git {' '.join(args)} failed ({returncode}): {stderr.strip()[:2000]}")


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment with git's user-level configuration switched off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


#: ``git -c`` settings on every call. Hooks: none (``core.hooksPath`` at a path that
#: holds no files). ``core.fsmonitor``: off. No automatic gc/maintenance (it would run
#: ``pre-auto-gc``). Only the file and bundle transports (no ``ext::`` commands, no network).
HARDENING = (
    "core.hooksPath=" + os.devnull,
    "core.fsmonitor=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
)


def run_git(
    args: Sequence[str],
    *,
    git_dir: Path | str | None = None,
    cwd: Path | str | None = None,
    input: bytes | None = None,
    check: bool = True,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git -c <HARDENING> [--git-dir=...] args`` with the scrubbed environment.

    Raises:
        ConfigError: the git binary is not installed.
        GitCommandError: git failed and ``check`` is true.
    """
    from got_core.storage.git import flush_staged_writes

    flush_staged_writes()  # git reads the object database itself: nothing of ours may be only in memory
    exe = shutil.which("git")
    if exe is None:
        raise ConfigError("this operation needs the git binary on PATH (apt-get install git)")
    cmd = [exe]
    for setting in HARDENING:
        cmd += ["-c", setting]
    if git_dir is not None:
        cmd.append(f"--git-dir={git_dir}")
    cmd += list(args)
    proc = subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, timeout=timeout, env=git_env(env))
    if check and proc.returncode != 0:
        raise GitCommandError(list(args), proc.returncode, proc.stderr.decode("utf-8", "replace"))
    return proc
