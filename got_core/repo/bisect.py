"""``git bisect`` over a memory branch: which lesson made the agent worse? (ARCHITECTURE §4).

The candidates are what ``git bisect`` would test: the commits reachable from the bad
revision and from none of the good ones (or, with ``first_parent``, the bad revision's
first-parent chain down to a good one). Each round tests the candidate that splits the
remaining ones most evenly — git's rule: the commit whose remaining ancestors number
closest to half — so a linear history of ``n`` candidates needs at most ``⌈log2 n⌉`` tests.

A test never touches the user's repository or working copy: the memory at the
candidate is restored into a fresh scratch directory (``GOT_BISECT_DIR``):

- ``memory.git``: a bare repository sharing the user's objects read-only (git's
  ``objects/info/alternates``) whose branch points at the candidate, so
  ``GitMemory(path=...)`` — or stock ``git`` — sees the memory exactly as it was;
- ``files/``: the candidate's tree, written with replay's safety rules
  (:meth:`~got_core.repo.reasoning.ReasoningRepo.materialize`).

The command's exit status is read as ``git bisect run`` reads it: 0 good, 125 skip,
1–127 bad, anything else (128+, a signal, a timeout) aborts. Or a number the command
prints is compared with a threshold. The first bad commit is recorded as a note on
``refs/notes/got-bisect`` (the range, the command and every step), unless ``record=False``;
no other ref of the user's repository moves.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from got_core.errors import BisectError, InvalidInputError
from got_core.repo.notes import set_note
from got_core.repo.reasoning import ReasoningRepo
from got_core.storage.git import CommitData
from got_core.types import parse_trailers

__all__ = [
    "BISECT_NOTES_REF",
    "BisectContext",
    "BisectResult",
    "BisectStep",
    "Metric",
    "Verdict",
    "bisect_memory",
    "command_check",
    "verdict_for_exit",
]

#: Where the first bad commit of each bisection is recorded.
BISECT_NOTES_REF = "refs/notes/got-bisect"
#: Exit status that means "cannot test this commit" (as in ``git bisect run``).
SKIP_STATUS = 125

Verdict = Literal["good", "bad", "skip"]


@dataclass(frozen=True)
class BisectContext:
    """What a check sees for one candidate.

    Attributes:
        commit: the candidate commit (full SHA).
        directory: the scratch directory (``GOT_BISECT_DIR``; the check's working directory).
        memory_repo: the bare repository whose ``branch`` points at ``commit``.
        files: the candidate's files, materialised.
        branch: the bisected branch's name.
    """

    commit: str
    directory: Path
    memory_repo: Path
    files: Path
    branch: str


@dataclass(frozen=True)
class BisectStep:
    """One tested candidate: its verdict, and what the check reported."""

    commit: str
    verdict: Verdict
    status: int | None = None
    metric: float | None = None
    subject: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for notes and ``--json``)."""
        return {
            "commit": self.commit,
            "verdict": self.verdict,
            "status": self.status,
            "metric": self.metric,
            "subject": self.subject,
        }


@dataclass(frozen=True)
class BisectResult:
    """The outcome of a bisection.

    Attributes:
        first_bad: the first bad commit, or ``None`` when skipped commits hide it.
        suspects: the commits that may be first bad (just ``first_bad`` when found;
            the skipped ones and the last bad one otherwise).
        steps: every test run, in order.
        candidates: how many commits the range held.
        message: the first bad commit's message (the lesson it wrote).
        trailers: its ``Got-*`` trailers (``Lesson``, ``Topic``, ``Outcome``...).
        note_ref: where the result was recorded (``None`` when not recorded).
    """

    first_bad: str | None
    suspects: list[str]
    steps: list[BisectStep]
    candidates: int
    message: str = ""
    trailers: dict[str, str] = field(default_factory=dict)
    note_ref: str | None = None

    @property
    def lesson(self) -> str:
        """The lesson text of the first bad commit (its message without subject and trailers)."""
        body = self.message.split("\n\n", 1)[1] if "\n\n" in self.message else ""
        lines = [ln for ln in body.rstrip().splitlines() if not re.match(r"^Got-[A-Za-z-]+: ", ln)]
        return "\n".join(lines).strip()

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for ``--json``)."""
        return {
            "first_bad": self.first_bad,
            "suspects": self.suspects,
            "candidates": self.candidates,
            "steps": [s.to_dict() for s in self.steps],
            "subject": self.message.splitlines()[0] if self.message else "",
            "lesson": self.lesson,
            "trailers": self.trailers,
            "note_ref": self.note_ref,
        }


@dataclass(frozen=True)
class Metric:
    """Judge a candidate by a number its command prints instead of by its exit status.

    Attributes:
        pattern: a regular expression; its first group (or the whole match) of the
            *last* match in the command's standard output is the number.
        threshold: the boundary value.
        higher_is_better: good when the number is ``>= threshold``; otherwise good when ``<=``.
    """

    pattern: str
    threshold: float
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise InvalidInputError(f"--metric {self.pattern!r} is not a regular expression: {exc}") from None
        if not math.isfinite(self.threshold):
            raise InvalidInputError("the metric threshold must be a finite number")

    def read(self, output: str) -> float | None:
        """The number the output reports, or ``None`` when it reports none."""
        matches = list(re.finditer(self.pattern, output, re.MULTILINE))
        if not matches:
            return None
        last = matches[-1]
        text = last.group(1) if last.re.groups else last.group(0)
        try:
            value = float(text)
        except (TypeError, ValueError):
            return None
        return value if math.isfinite(value) else None

    def verdict(self, value: float) -> Verdict:
        """Good or bad by the threshold."""
        good = value >= self.threshold if self.higher_is_better else value <= self.threshold
        return "good" if good else "bad"


#: A check: runs against one candidate and answers an exit status, a verdict, or
#: ``(status, stdout)`` (what :func:`command_check` returns, for metrics).
Check = Callable[[BisectContext], "int | bool | str | tuple[int, str]"]


def verdict_for_exit(status: int) -> Verdict:
    """``git bisect run``'s reading of an exit status.

    Raises:
        BisectError: 128 or more, or a signal (negative): the bisection aborts.
    """
    if status == 0:
        return "good"
    if status == SKIP_STATUS:
        return "skip"
    if 1 <= status <= 127:
        return "bad"
    raise BisectError(
        f"the check exited with status {status} (128 or more, or killed by a signal), which aborts a bisection "
        "as in `git bisect run`; exit 0 for good, 1-127 for bad, 125 to skip"
    )


def command_check(
    command: str | Sequence[str], *, shell: bool = False, timeout: float | None = None, echo: bool = False
) -> Check:
    """A check that runs ``command`` in the scratch directory; returns ``(status, stdout)``.

    Args:
        command: an argv list, or a string split with :func:`shlex.split` (run with
            ``shell=False``), or run by ``/bin/sh -c`` when ``shell`` is true.
        shell: run the string through the shell (pipes, ``&&``...).
        timeout: seconds per run; a run still going then is killed (its whole process
            group) and the bisection aborts.
        echo: pass the command's output through instead of capturing only.

    The command gets ``GOT_BISECT_DIR``, ``GOT_BISECT_MEMORY`` (the bare repository),
    ``GOT_BISECT_FILES`` and ``GOT_BISECT_COMMIT`` in its environment.

    Raises:
        InvalidInputError: an empty command.
    """
    if isinstance(command, str):
        argv = ["/bin/sh", "-c", command] if shell else shlex.split(command)
    else:
        argv = [str(a) for a in command]
        if shell:
            argv = ["/bin/sh", "-c", shlex.join(argv)]
    if not argv or not argv[-1].strip():
        raise InvalidInputError("the bisect command is empty; pass what to run against each candidate")
    shown = command if isinstance(command, str) else shlex.join(argv)

    def check(ctx: BisectContext) -> tuple[int, str]:
        env = dict(os.environ)
        env.update(
            GOT_BISECT_DIR=str(ctx.directory),
            GOT_BISECT_MEMORY=str(ctx.memory_repo),
            GOT_BISECT_FILES=str(ctx.files),
            GOT_BISECT_COMMIT=ctx.commit,
            GOT_BISECT_BRANCH=ctx.branch,
        )
        try:
            proc = subprocess.Popen(  # the user's own command; a shell only when asked
                argv,
                cwd=ctx.directory,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=None if echo else subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except OSError as exc:
            raise BisectError(f"cannot run {shown!r}: {exc}") from None
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise BisectError(
                f"{shown!r} ran past {timeout:g} s on {ctx.commit[:12]}; the bisection stops "
                "(raise --timeout, or exit 125 from the command to skip a commit)"
            ) from None
        if echo and out:
            print(out, end="", flush=True)
        return proc.returncode, out or ""

    return check


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()


# ----------------------------------------------------------------------------- the range


def _range(
    repo: ReasoningRepo, goods: Sequence[str], bad: str, first_parent: bool
) -> tuple[list[str], dict[str, CommitData]]:
    """Candidates newest first (bad first) and their commits."""
    commits = {c.oid: c for c in repo.git.walk([bad], hide=goods, topo=True)}
    if not first_parent:
        return list(commits), commits
    chain, oid = [], bad
    while oid in commits:
        chain.append(oid)
        parents = commits[oid].parents
        if not parents:
            break
        oid = parents[0]
    return chain, {o: commits[o] for o in chain}


def _ancestry(order: list[str], commits: dict[str, CommitData], first_parent: bool) -> dict[str, int]:
    """Each candidate's ancestors among the candidates (itself included), as a bit set."""
    bit = {oid: 1 << i for i, oid in enumerate(order)}
    anc: dict[str, int] = {}
    for oid in reversed(order):  # topological, newest first: reversed, parents come first
        mask = bit[oid]
        parents = commits[oid].parents[:1] if first_parent else commits[oid].parents
        for p in parents:
            if p in anc:
                mask |= anc[p]
        anc[oid] = mask
    return anc


def _pick(order: list[str], anc: dict[str, int], remaining: int, avoid: set[str], bad: str) -> str | None:
    """git's choice: the untested candidate whose remaining ancestors are closest to half."""
    total = remaining.bit_count()
    best, best_score = None, -1
    for i in range(len(order) - 1, -1, -1):  # oldest first: ties go to the older commit
        oid = order[i]
        if oid == bad or oid in avoid or not remaining & (1 << i):
            continue
        k = (anc[oid] & remaining).bit_count()
        score = min(k, total - k)
        if score > best_score:
            best, best_score = oid, score
    return best


# ----------------------------------------------------------------------------- restore


def _missing_dirs(path: Path) -> list[Path]:
    """The directories ``mkdir(parents=True)`` would create for ``path``, deepest first."""
    missing: list[Path] = []
    p = path.absolute()
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    return missing


def _restore(repo: ReasoningRepo, commit: str, root: Path, branch: str) -> BisectContext:
    """A scratch memory at ``commit`` under ``root`` (a new directory), sharing objects read-only."""
    root.mkdir(parents=True, exist_ok=False)
    memory = root / "memory.git"
    scratch = ReasoningRepo(memory, create=True, session_branch=branch)
    scratch.close()
    # git's alternates: the scratch repository reads the user's objects, writes only its own
    info = memory / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(str(Path(repo.gitdir).resolve() / "objects") + "\n", encoding="utf-8")
    scratch = ReasoningRepo(memory, create=False, session_branch=branch)
    try:
        scratch.set_ref(scratch.ref(branch), commit)
    finally:
        scratch.close()
    files = repo.materialize(commit, root / "files")
    return BisectContext(commit, root, memory, files, branch)


# ----------------------------------------------------------------------------- the bisection


def _judge(outcome: int | bool | str | tuple[int, str], metric: Metric | None, commit: str) -> BisectStep:
    status: int | None = None
    output = ""
    if isinstance(outcome, tuple):
        status, output = outcome
    elif isinstance(outcome, bool):
        return BisectStep(commit, "good" if outcome else "bad")
    elif isinstance(outcome, int):
        status = outcome
    elif outcome in ("good", "bad", "skip"):
        return BisectStep(commit, outcome)  # type: ignore[arg-type]
    else:
        raise BisectError(f"a check answered {outcome!r}; answer an exit status, True/False or good/bad/skip")
    if metric is None or status == SKIP_STATUS:
        return BisectStep(commit, verdict_for_exit(status), status)
    if status >= 128 or status < 0:
        verdict_for_exit(status)  # raises: an abort stays an abort with a metric
    value = metric.read(output)
    if value is None:
        raise BisectError(
            f"the check printed no number matching --metric {metric.pattern!r} on {commit[:12]} "
            f"(exit status {status}); print it, or exit 125 to skip this commit"
        )
    return BisectStep(commit, metric.verdict(value), status, value)


def bisect_memory(
    repo: ReasoningRepo,
    *,
    good: str | Sequence[str],
    check: Check | str | Sequence[str],
    bad: str | None = None,
    branch: str = "memory",
    first_parent: bool = False,
    metric: Metric | None = None,
    timeout: float | None = None,
    record: bool = True,
    scratch: str | os.PathLike[str] | None = None,
    keep_scratch: bool = False,
    progress: Callable[[BisectStep, int, int], None] | None = None,
) -> BisectResult:
    """Find the first bad commit of ``branch`` between ``good`` and ``bad``.

    Args:
        repo: the repository holding the memory branch (never modified, except the
            note that records the result).
        good: one or more revisions known good (each must be an ancestor of ``bad``).
        check: a command (argv list or string, see :func:`command_check`) or a Python
            callable ``f(BisectContext) -> exit status | bool | "good"/"bad"/"skip"``.
        bad: the revision known bad (default: the branch's tip).
        branch: the memory branch.
        first_parent: follow only first parents (a merge is tested as one step).
        metric: judge by a printed number instead of the exit status.
        timeout: seconds per command run (commands only).
        record: write the result as a note on :data:`BISECT_NOTES_REF`.
        scratch: where to make scratch directories (default: the system temp dir).
        keep_scratch: leave each candidate's scratch directory in place.
        progress: called after each test with ``(step, tests so far, tests left at most)``.

    Returns:
        A :class:`BisectResult`.

    Raises:
        UnknownRefError: a revision or the branch does not exist.
        InvalidInputError: a good revision that is not an ancestor of the bad one,
            or good equal to bad.
        BisectError: a check aborted (status 128+, a signal, a timeout, no metric).
    """
    goods_in = [good] if isinstance(good, str) else list(good)
    if not goods_in:
        raise InvalidInputError("give at least one good revision (--good)")
    tip = repo.tip(repo.ref(branch))
    bad_oid = repo.resolve(bad) if bad is not None else tip
    if bad_oid is None:
        raise InvalidInputError(f"branch {branch!r} has no commits; nothing to bisect")
    goods = [repo.resolve(g) for g in goods_in]
    for g, name in zip(goods, goods_in, strict=True):
        if g == bad_oid:
            raise InvalidInputError(f"good {name!r} and bad are the same commit {g[:12]}; nothing to bisect")
        if not repo.git.is_ancestor(g, bad_oid):
            raise InvalidInputError(
                f"good {name!r} ({g[:12]}) is not an ancestor of bad ({bad_oid[:12]}): a lesson cannot have broken "
                "something that is not in its history; check the order of --good and --bad"
            )
    run: Check = command_check(check, timeout=timeout) if isinstance(check, (str, list, tuple)) else check  # type: ignore[assignment]
    order, commits = _range(repo, goods, bad_oid, first_parent)
    anc = _ancestry(order, commits, first_parent)
    index = {oid: i for i, oid in enumerate(order)}
    remaining = sum(1 << i for i in range(len(order)))
    current_bad = bad_oid
    skipped: set[str] = set()
    steps: list[BisectStep] = []
    base = Path(scratch) if scratch is not None else Path(tempfile.gettempdir())
    made = _missing_dirs(base)
    base.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="got-bisect-", dir=base))
    try:
        while remaining.bit_count() > 1:
            candidate = _pick(order, anc, remaining, skipped, current_bad)
            if candidate is None:
                break
            ctx = _restore(repo, candidate, workdir / f"{len(steps):03d}-{candidate[:12]}", branch)
            try:
                step = _judge(run(ctx), metric, candidate)
            finally:
                if not keep_scratch:
                    shutil.rmtree(ctx.directory, ignore_errors=True)
            step = BisectStep(
                step.commit, step.verdict, step.status, step.metric, commits[candidate].message.split("\n")[0]
            )
            steps.append(step)
            if step.verdict == "good":
                remaining &= ~anc[candidate]
            elif step.verdict == "bad":
                remaining &= anc[candidate]
                current_bad = candidate
            else:
                skipped.add(candidate)
            if progress is not None:
                left = remaining.bit_count()
                progress(step, len(steps), math.ceil(math.log2(left)) if left > 1 else 0)
    finally:
        if not keep_scratch:
            shutil.rmtree(workdir, ignore_errors=True)
            for d in made:  # deepest first; only the directories this run created, and only if empty
                try:
                    d.rmdir()
                except OSError:
                    break
    suspects = [oid for oid in order if remaining & (1 << index[oid])]
    first_bad = current_bad if remaining.bit_count() == 1 else None
    if first_bad is None:
        return BisectResult(None, suspects, steps, len(order))
    message = commits[first_bad].message
    trailers = parse_trailers(message)
    note_ref = None
    if record:
        set_note(
            repo,
            first_bad,
            {
                "bisect": "first bad commit",
                "branch": branch,
                "good": goods,
                "bad": bad_oid,
                "first_parent": first_parent,
                "command": check
                if isinstance(check, str)
                else list(check)
                if isinstance(check, (list, tuple))
                else "python",
                "metric": None if metric is None else {"pattern": metric.pattern, "threshold": metric.threshold},
                "steps": [s.to_dict() for s in steps],
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
            ref=BISECT_NOTES_REF,
        )
        note_ref = BISECT_NOTES_REF
    return BisectResult(first_bad, [first_bad], steps, len(order), message, dict(trailers), note_ref)
