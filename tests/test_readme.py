"""The README runs as pasted.

* Every ```python block runs on its own, in a fresh empty directory, with this interpreter
  (a block whose first line is ``# <name>.py — run with: <command>`` is saved as that file
  and run with that command).
* Every ```bash block outside "Fresh machine" runs in order in one temporary directory, one
  line at a time (``\\`` continuations joined); each line must exit 0, or the status its own
  comment names ("... exit 3 when conflicts await review" allows 0 or 3). A block whose first
  line is ``# after the Python example above`` runs after that section's last Python example,
  in the same directory. The directory is a stand-in for a clone's root: ``cookbooks/``,
  ``benchmarks/`` and ``tests/`` are linked into it, and the checkout must be unchanged after.
* A block whose first line is ``# not run: <why>`` is skipped; such blocks are few, and each
  says why (a model server, the network, minutes of compute).
* A block whose first line is ``# needs <program>: <why>`` (a system program no pip extra
  installs, e.g. ``java``) is skipped where that program is not on PATH, except under CI
  (``$CI`` set: ``.ci/run`` installs it), where it always runs.
* The two install commands of "Fresh machine" are not run here (they build virtual
  environments); ``.ci/run`` runs the test command verbatim, which is checked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from timeouts import TEST_TIMEOUT

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INSTALL_SECTION = "Fresh machine: two commands"
NOT_RUN = "# not run:"
AFTER_PYTHON = "# after the Python example above"
_NEEDS = re.compile(r"^#\s*needs\s+(?P<program>[\w.+-]+)\s*:\s*(?P<why>.+)$")
#: Blocks a reader cannot run here (model servers, network, minutes of compute): keep it few.
#: Seven today: two `got solve` lines and two cookbook runs against a model server (vLLM),
#: installing vLLM itself, the full-size cookbooks and the full-size benchmarks.
MAX_NOT_RUN = 7


@dataclass
class Block:
    lang: str
    section: str
    line: int  # 1-based line of the opening fence
    text: str

    @property
    def first(self) -> str:
        return self.text.split("\n", 1)[0].strip()

    @property
    def skipped(self) -> bool:
        return self.first.startswith(NOT_RUN)

    @property
    def missing_program(self) -> str | None:
        """The system program a ``# needs <program>:`` block needs and this machine lacks (never under CI)."""
        m = _NEEDS.match(self.first)
        if m is None or shutil.which(m["program"]) is not None or os.environ.get("CI"):
            return None
        return m["program"]

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.section})"


def blocks(text: str | None = None) -> list[Block]:
    """Every fenced code block of the README, with its ``##`` section."""
    out: list[Block] = []
    section, fence, body, start = "", None, [], 0
    for n, line in enumerate((text if text is not None else README.read_text(encoding="utf-8")).splitlines(), 1):
        if fence is None:
            if line.startswith("## "):
                section = line[3:].strip()
            elif line.startswith("```"):
                fence, body, start = line[3:].strip(), [], n
        elif line.startswith("```"):
            out.append(Block(fence, section, start, "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    return out


PYTHON = [b for b in blocks() if b.lang == "python"]
BASH = [b for b in blocks() if b.lang == "bash" and b.section != INSTALL_SECTION]


def _env(tmp_path: Path) -> dict[str, str]:
    """This interpreter's scripts first on PATH (got, python), temp files inside the test's directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    bindir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "TMPDIR": str(tmp),
        "COLUMNS": "80",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


_RUN_WITH = re.compile(r"^#\s*(?P<file>[\w.-]+\.py)\s*[—-]+\s*run with:\s*(?P<cmd>.+)$")


def _run_python(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    named = _RUN_WITH.match(block.first)
    if named:
        (cwd / named["file"]).write_text(block.text, encoding="utf-8")
        cmd = named["cmd"].split()
        cmd = [sys.executable, *cmd[1:]] if cmd[0] == "python" else cmd
    else:
        (cwd / "snippet.py").write_text(block.text, encoding="utf-8")
        cmd = [sys.executable, "snippet.py"]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TEST_TIMEOUT)


@pytest.mark.parametrize("block", [b for b in PYTHON if not b.skipped], ids=str)
def test_python_block_runs_on_its_own_in_an_empty_directory(block, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    proc = _run_python(block, work, _env(tmp_path))
    assert proc.returncode == 0, f"{block} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


def test_skipped_blocks_are_few_and_say_why():
    skipped = [b for b in PYTHON + BASH if b.skipped]
    assert len(skipped) <= MAX_NOT_RUN, [str(b) for b in skipped]
    for b in skipped:
        reason = b.first[len(NOT_RUN) :].strip()
        assert len(reason) >= 10, f"{b}: say why it is not run"
    assert len(PYTHON) - sum(b.skipped for b in PYTHON) >= 8 and len(BASH) - sum(b.skipped for b in BASH) >= 6


def _commands(block: Block) -> list[tuple[int, str]]:
    """(README line, command) for each command of a block: continuations joined, comments kept."""
    out: list[tuple[int, str]] = []
    pending, first = "", 0
    for offset, raw in enumerate(block.text.splitlines(), 1):
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            first = block.line + offset
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((first, pending + line))
        pending = ""
    assert not pending, f"{block}: a continuation runs off the end"
    return out


_EXIT = re.compile(r"#.*\bexit (\d+)\b")


def _script(tmp_path: Path) -> str:
    """One bash script: every README command, each checked for its exit status, in README order."""
    snippets = tmp_path / "snippets"
    snippets.mkdir()
    parts = ["set -u", 'fail() { echo "README.md:$1: exit status $2 (allowed: $3): $4" >&2; exit 1; }']
    last_python: dict[str, Block] = {}
    for b in blocks():
        if b.lang == "python" and not b.skipped:
            last_python[b.section] = b
        if b not in BASH or b.skipped:
            continue
        if b.missing_program:
            parts.append(f"echo '# skipped README.md:{b.line}: needs {b.missing_program}, which is not installed' >&2")
            continue
        if b.first.startswith(AFTER_PYTHON):
            source = last_python.get(b.section)
            assert source is not None, f"{b} runs after a Python example, but its section has none"
            path = snippets / f"readme-{source.line}.py"
            path.write_text(source.text, encoding="utf-8")
            parts.append(f"python {path} >/dev/null || fail {source.line} $? 0 'the Python example'")
        for line, command in _commands(b):
            allowed = {"0", *_EXIT.findall(command)}
            quoted = command.replace("'", "'\"'\"'")
            checks = " && ".join(f'[ "$s" != {a} ]' for a in sorted(allowed))
            parts.append(f"echo '$ {quoted}'")
            # each command in a subshell with -e and pipefail, so `a ; b` fails on a as well
            parts.append(f"( set -e -o pipefail; {command}\n)")
            parts.append(f"s=$?; if {checks}; then fail {line} $s '{'|'.join(sorted(allowed))}' '{quoted}'; fi")
    return "\n".join(parts) + "\n"


def _checkout_state() -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all", "--ignored=matching"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return ""  # not a git checkout (an sdist): nothing to compare
    return "\n".join(l for l in proc.stdout.splitlines() if "__pycache__" not in l and ".pyc" not in l)


@pytest.mark.slow
def test_bash_blocks_run_in_order_in_one_directory(tmp_path):
    pytest.importorskip("langgraph")
    pytest.importorskip("llama_index.core")
    if shutil.which("git") is None:
        pytest.skip("needs the git binary")
    work = tmp_path / "clone" / "work"  # `..` of a README line stays inside the test's directory
    work.mkdir(parents=True)
    for name in ("cookbooks", "benchmarks", "tests"):
        (work / name).symlink_to(ROOT / name, target_is_directory=True)
    script = tmp_path / "readme.sh"
    script.write_text(_script(tmp_path), encoding="utf-8")
    before = _checkout_state()
    proc = subprocess.run(
        ["bash", str(script)], cwd=work, env=_env(tmp_path), capture_output=True, text=True, timeout=TEST_TIMEOUT
    )
    assert proc.returncode == 0, f"{proc.stderr[-4000:]}\n--- stdout ---\n{proc.stdout[-4000:]}"
    assert "Traceback (most recent call last)" not in proc.stdout + proc.stderr
    assert _checkout_state() == before  # README commands never write into the repository


def test_the_install_commands_are_what_ci_runs():
    install = [b for b in blocks() if b.section == INSTALL_SECTION and b.lang == "bash"]
    assert len(install) == 2, "Fresh machine holds the two commands: the main job, then the tests"
    main_job, tests = (b.text.strip() for b in install)
    assert "pip install -e '.[langgraph]'" in main_job and main_job.endswith("got threads demo")
    assert "torch" not in main_job  # the main job never installs torch
    assert "pip install -e '.[dev]'" in tests and "python -m pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert any(line.startswith(tests) for line in ci), ".ci/run must run the README's test command verbatim"


def test_the_block_parser_sees_sections_fences_and_markers():
    text = "## A\n\n```bash\n# not run: needs a server, really\nx\n```\n## B\n```python\nprint(1)\n```\n"
    a, b = blocks(text)
    assert (a.lang, a.section, a.line, a.skipped) == ("bash", "A", 3, True)
    assert (b.lang, b.section, b.text, b.skipped) == ("python", "B", "print(1)\n", False)
    joined = _commands(Block("bash", "A", 10, "# c\ngot a \\\n  --b   # exit 3 when\n\ngot c\n"))
    assert joined == [(12, "got a    --b   # exit 3 when"), (15, "got c")]
    assert _EXIT.findall(joined[0][1]) == ["3"]


def test_a_needs_marker_skips_only_where_the_program_is_missing(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    absent = Block("bash", "A", 1, "# needs no-such-program-here: a system program\nx\n")
    present = Block("bash", "A", 1, "# needs git: the git binary\nx\n")
    assert absent.missing_program == "no-such-program-here" and not absent.skipped
    assert present.missing_program is None  # the suite needs git anyway
    monkeypatch.setenv("CI", "1")
    assert absent.missing_program is None  # under CI the block always runs
