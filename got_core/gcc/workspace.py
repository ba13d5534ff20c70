"""GCC context tools: an agent manages its own memory like git (arXiv 2508.00031; ARCHITECTURE §1).

The Git Context Controller gives an agent five verbs: log each
Observation–Thought–Action step (``log_ota``), ``commit`` a milestone summary that
compresses the steps since the last commit, ``branch`` to explore, ``merge`` what
worked, and read back ``context(k)``: the roadmap, the last ``k`` commit summaries
and the current OTA log, formatted for a prompt. GCC's ablation (SWE-Bench Verified
69.1 → 80.2) credits the structure: roadmap, logs, metadata, branch/merge.

Here a workspace lives in a :class:`~got_core.repo.ReasoningRepo` — the same
repository as everything else. Each GCC branch is a git branch
``refs/heads/<namespace>/<branch>`` whose tree mirrors Contexa's ``.GCC/`` layout
(see :mod:`got_core.gcc.contexa`), so export is a copy::

    main.md                          roadmap
    branches/<b>/metadata.yaml       purpose, created_from, status
    branches/<b>/commit.md           milestone records
    branches/<b>/log.md              OTA steps since the last commit
    branches/<b>/ota/<commit id>.md  the steps each commit compressed (our addition)

Unlike Contexa, whose merge appends one log to another and can never conflict,
``merge`` is a real three-way git merge (a commit naming both parents). Every
verb is one compare-and-swap commit on one ref, retried on a lost race.

Example::

    ws = GCCWorkspace(ReasoningRepo.open("agent.git"), roadmap="Solve the LP")
    ws.log_ota("objective is linear", "try the simplex", "call pulp")
    ws.commit("Formulated the LP; 3 constraints")
    print(ws.context(k=1))
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from got_core.errors import (
    ConcurrentUpdateError,
    CorruptRepositoryError,
    InvalidInputError,
    MergeConflictError,
    StorageError,
    UnknownRefError,
)
from got_core.gcc.contexa import (
    BranchMetadata,
    CommitRecord,
    OTARecord,
    check_branch_name,
    commit_header,
    log_header,
    parse_commits,
    parse_metadata,
    parse_steps,
    render_commits,
    render_metadata,
    render_steps,
)
from got_core.memory.base import MAX_LESSON_BYTES, validate_text
from got_core.names import decode_component, encode_component
from got_core.repo.base import Publish
from got_core.types import Conflict, MergeResult

if TYPE_CHECKING:
    from got_core.repo import ReasoningRepo

__all__ = [
    "ROOT_BRANCH",
    "BranchMetadata",
    "CommitRecord",
    "GCCContext",
    "GCCWorkspace",
    "OTARecord",
]

#: The branch every workspace starts on (Contexa's ``MAIN_BRANCH``).
ROOT_BRANCH = "main"
_FIRST_PREVIOUS = "Initial state — no prior commits."


def _field(value: Any, what: str) -> str:
    """An OTA field: text (possibly empty), stripped, within the lesson size limit."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be text, not {type(value).__name__}")
    return validate_text(value, what, MAX_LESSON_BYTES).strip() if value.strip() else ""


def _required(value: Any, what: str) -> str:
    return validate_text(value, what, MAX_LESSON_BYTES).strip()


@dataclass(frozen=True)
class GCCContext:
    """What CONTEXT (GCC §3.5) reveals: roadmap, last ``k`` commits, the current OTA log."""

    branch: str
    k: int
    roadmap: str
    metadata: BranchMetadata
    commits: tuple[CommitRecord, ...]
    ota: tuple[OTARecord, ...]

    @property
    def summaries(self) -> list[str]:
        """The milestone summaries shown, oldest first (exactly ``k`` when that many exist)."""
        return [c.summary for c in self.commits]

    def render(self) -> str:
        """The context formatted for a prompt (markdown, Contexa's record format)."""
        parts = [
            f"# CONTEXT — branch `{self.branch}` (K={self.k})\n",
            "## Global Roadmap\n" + self.roadmap.strip() + "\n",
            "## Branch Purpose\n" + (self.metadata.purpose or "(none)") + "\n",
            f"## Last {len(self.commits)} Commit(s)\n"
            + (render_commits(self.commits, with_steps=False) or "(no commits yet)\n"),
            f"## OTA Steps Since the Last Commit ({len(self.ota)})\n" + (render_steps(self.ota) or "(none)\n"),
        ]
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.render()


class GCCWorkspace:
    """A GCC workspace inside a reasoning repository.

    Args:
        repo: the repository (shared with nodes, memory, checkpoints).
        branch: the GCC branch to work on (must exist, except ``main`` before init).
        namespace: workspace name; its branches live under ``refs/heads/<namespace>/``.
        roadmap: initialise the workspace with this roadmap when it does not exist yet
            (otherwise the first write initialises it with an empty one).

    Attributes:
        last_merge: the :class:`~got_core.types.MergeResult` of the latest :meth:`merge`.
        skipped: for a workspace made by :func:`import_gcc` with ``skip_unsafe=True``, the
            entries of the ``.GCC`` directory left out (links, special files, unusable names)
            and why.

    Raises:
        InvalidNameError: a hostile branch or namespace name.
        UnknownRefError: ``branch`` does not exist.
    """

    root_branch = ROOT_BRANCH

    def __init__(
        self, repo: ReasoningRepo, branch: str = ROOT_BRANCH, *, namespace: str = "gcc", roadmap: str | None = None
    ) -> None:
        self.repo = repo
        self.namespace = encode_component(namespace, "GCC namespace")
        self._prefix = f"refs/heads/{self.namespace}/"
        self.last_merge: MergeResult | None = None
        self.skipped: tuple[str, ...] = ()
        branch = check_branch_name(branch)
        if roadmap is not None and not self.exists:
            self.init(roadmap)
        if (self.exists or branch != ROOT_BRANCH) and repo.tip(self._ref(branch)) is None:
            raise UnknownRefError(
                f"no GCC branch {branch!r} in workspace {namespace!r}; existing: {', '.join(self.branches()) or 'none'}"
            )
        self._branch = branch

    @classmethod
    def resume(cls, repo: ReasoningRepo, *, namespace: str = "gcc") -> GCCWorkspace:
        """Open the workspace on the branch it was last switched to (remembered per repository)."""
        ws = cls(repo, namespace=namespace)
        try:
            name = ws._head_file().read_text(encoding="utf-8").strip()
        except OSError:
            return ws
        if name and name != ROOT_BRANCH and repo.tip(ws._ref(check_branch_name(name))) is not None:
            ws._branch = name
        return ws

    # ------------------------------------------------------------------ naming
    @property
    def current_branch(self) -> str:
        """The current GCC branch (Contexa's name for it)."""
        return self._branch

    @property
    def exists(self) -> bool:
        """Whether the workspace has been initialised."""
        return self.repo.tip(self._ref(ROOT_BRANCH)) is not None

    def _ref(self, name: str) -> str:
        return self._prefix + encode_component(name, "GCC branch name")

    @staticmethod
    def _dir(name: str) -> str:
        return "branches/" + encode_component(name, "GCC branch name")

    def _head_file(self) -> Path:
        return Path(self.repo.gitdir) / "got-gcc" / f"{self.namespace}.HEAD"

    def _set_branch(self, name: str) -> None:
        self._branch = name
        path = self._head_file()
        try:
            path.parent.mkdir(exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(name + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            raise StorageError(f"cannot remember the current GCC branch in {path}: {exc}") from None

    def _now(self) -> str:
        seconds, offset = self.repo.clock.now()
        return datetime.fromtimestamp(seconds, timezone(timedelta(minutes=offset))).isoformat()

    # ------------------------------------------------------------------ reading
    def _tip(self, name: str) -> str:
        tip = self.repo.tip(self._ref(check_branch_name(name)))
        if tip is None:
            raise self._no_branch(name)
        return tip

    def _no_branch(self, name: str) -> UnknownRefError:
        return UnknownRefError(f"no GCC branch {name!r}; existing: {', '.join(self.branches()) or 'none'}")

    def _text(self, tip: str, path: str) -> str | None:
        try:
            data = self.repo.read_file(tip, path)
        except UnknownRefError:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRepositoryError(f"{path} at {tip[:12]} is not UTF-8 text") from None

    def _meta(self, tip: str, name: str) -> BranchMetadata:
        text = self._text(tip, self._dir(name) + "/metadata.yaml")
        return parse_metadata(text, name) if text else BranchMetadata(name, "")

    def branches(self) -> dict[str, BranchMetadata]:
        """Every GCC branch of the workspace -> its metadata, by name."""
        out = {}
        for ref, tip in sorted(self.repo.refs(self._prefix).items()):
            name = decode_component(ref[len(self._prefix) :])
            out[name] = self._meta(tip, name)
        return out

    def metadata(self, branch: str | None = None) -> BranchMetadata:
        """A branch's metadata (default: the current branch)."""
        name = branch or self._branch
        return self._meta(self._tip(name), name)

    def roadmap(self, branch: str | None = None) -> str:
        """``main.md`` as seen from a branch (default: the current branch)."""
        return self._text(self._tip(branch or self._branch), "main.md") or ""

    def commits(self, branch: str | None = None) -> list[CommitRecord]:
        """Every milestone record of a branch, oldest first."""
        name = branch or self._branch
        return parse_commits(self._text(self._tip(name), self._dir(name) + "/commit.md") or "", name)

    def ota(self, branch: str | None = None) -> list[OTARecord]:
        """The OTA steps logged since the branch's last commit, oldest first."""
        name = branch or self._branch
        return parse_steps(self._text(self._tip(name), self._dir(name) + "/log.md") or "")

    def compressed_steps(self, commit_id: str, branch: str | None = None) -> list[OTARecord]:
        """The OTA steps the milestone ``commit_id`` rolled up (empty when it compressed none)."""
        name = branch or self._branch
        path = f"{self._dir(name)}/ota/{encode_component(commit_id, 'commit id')}.md"
        return parse_steps(self._text(self._tip(name), path) or "")

    def snapshot(self, k: int = 1, branch: str | None = None) -> GCCContext:
        """CONTEXT as data: roadmap, the last ``k`` commits and the current OTA log.

        Raises:
            InvalidInputError: ``k`` is not a non-negative int.
        """
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise InvalidInputError(f"k must be a non-negative int, not {k!r}")
        name = branch or self._branch
        tip = self._tip(name)
        commits = parse_commits(self._text(tip, self._dir(name) + "/commit.md") or "", name)
        return GCCContext(
            name,
            k,
            self._text(tip, "main.md") or "",
            self._meta(tip, name),
            tuple(commits[len(commits) - k :] if k else ()),
            tuple(parse_steps(self._text(tip, self._dir(name) + "/log.md") or "")),
        )

    def context(self, k: int = 1, branch: str | None = None) -> str:
        """CONTEXT (GCC §3.5) formatted for a prompt; ``k=1`` (the paper's best) shows one commit."""
        return self.snapshot(k, branch).render()

    # ------------------------------------------------------------------ writing
    def _update(self, name: str, build: Callable[[str], tuple[dict[str, str | None], str, Any]]) -> Any:
        def publish(tip: str | None) -> Publish:
            if tip is None:
                raise self._no_branch(name)
            changes, message, result = build(tip)
            return Publish(self.repo.prepare_commit([tip], changes, message), result)

        return self.repo.update_ref(self._ref(name), publish)  # the branch moved: rebuilt on the new tip

    def _ensure(self) -> None:
        if not self.exists:
            self.init("")

    def init(self, roadmap: str = "") -> None:
        """Create the workspace: ``main.md`` and the ``main`` branch (as Contexa's ``init``).

        Raises:
            InvalidInputError: it already exists, or ``roadmap`` is not text.
        """
        roadmap = _field(roadmap, "roadmap")
        if self.exists:
            raise InvalidInputError(f"GCC workspace {self.namespace!r} already exists")
        now = self._now()
        meta = BranchMetadata(ROOT_BRANCH, "Primary reasoning trajectory", "", now)
        files: dict[str, str | None] = {
            "main.md": f"# Project Roadmap\n\n**Initialized:** {now}\n\n{roadmap}\n",
            **self._branch_files(ROOT_BRANCH, meta),
        }
        try:
            self.repo.commit_files(
                self._ref(ROOT_BRANCH), files, f"gcc(init): {self.namespace}\n\n{roadmap}\n", parents=[], expected=None
            )
        except ConcurrentUpdateError:
            raise InvalidInputError(f"GCC workspace {self.namespace!r} was initialised concurrently") from None

    def _branch_files(self, name: str, meta: BranchMetadata) -> dict[str, str | None]:
        d = self._dir(name)
        return {
            f"{d}/log.md": log_header(name),
            f"{d}/commit.md": commit_header(name),
            f"{d}/metadata.yaml": render_metadata(meta),
        }

    def log_ota(self, observation: str, thought: str, action: str) -> OTARecord:
        """Append one Observation–Thought–Action step to the current branch's log (one commit).

        Raises:
            InvalidInputError: a field is not text, or all three are empty.
        """
        o, t, a = _field(observation, "observation"), _field(thought, "thought"), _field(action, "action")
        if not (o or t or a):
            raise InvalidInputError("an OTA step needs an observation, a thought or an action")
        self._ensure()
        name = self._branch

        def build(tip: str) -> tuple[dict[str, str | None], str, OTARecord]:
            path = self._dir(name) + "/log.md"
            text = self._text(tip, path) or log_header(name)
            steps = parse_steps(text)
            if steps:
                number = steps[-1].step + 1
            else:  # Contexa numbers steps per branch across commits
                done = parse_commits(self._text(tip, self._dir(name) + "/commit.md") or "", name)
                number = sum(c.ota_steps or 0 for c in done) + 1
            rec = OTARecord(number, self._now(), o, t, a)
            headline = (t or a or o).split("\n", 1)[0][:60]
            message = (
                f"gcc(log): {name} step {number}: {headline}\n\nObservation: {o}\nThought: {t}\n"
                f"Action: {a}\n\nGot-GCC-Branch: {encode_component(name)}\nGot-GCC-Step: {number}\n"
            )
            return {path: text + render_steps([rec])}, message, rec

        return self._update(name, build)

    def commit(
        self, summary: str, *, previous_summary: str | None = None, update_roadmap: str | None = None
    ) -> CommitRecord:
        """COMMIT (GCC §3.2): record a milestone that compresses the OTA steps since the last one.

        The steps move out of ``log.md`` into the milestone's ``ota/<id>.md``; the record
        (branch purpose, previous progress, this contribution) is appended to ``commit.md``.

        Args:
            summary: this milestone's contribution.
            previous_summary: progress so far (default: the last milestone's summary).
            update_roadmap: text appended to ``main.md`` as an update section.

        Raises:
            InvalidInputError: an empty or non-text summary.
        """
        summary = _required(summary, "commit summary")
        prev = None if previous_summary is None else _field(previous_summary, "previous summary")
        roadmap = _field(update_roadmap, "roadmap update")
        self._ensure()
        return self._commit(self._branch, summary, prev, roadmap, {}, "commit")

    def _commit(
        self, name: str, summary: str, prev: str | None, roadmap: str, extra: dict[str, str | None], kind: str
    ) -> CommitRecord:
        def build(tip: str) -> tuple[dict[str, str | None], str, CommitRecord]:
            d = self._dir(name)
            commit_text = self._text(tip, d + "/commit.md") or commit_header(name)
            done = parse_commits(commit_text, name)
            steps = parse_steps(self._text(tip, d + "/log.md") or "")
            previous = prev if prev is not None else (done[-1].summary if done else _FIRST_PREVIOUS)
            now = self._now()
            # a content hash, not Contexa's random id: the same milestone on the same tip, the same id
            cid = hashlib.sha256("\0".join((name, tip, now, previous, summary)).encode()).hexdigest()[:8]
            rec = CommitRecord(cid, name, now, self._meta(tip, name).purpose, previous, summary, len(steps))
            changes: dict[str, str | None] = {
                d + "/commit.md": commit_text + render_commits([rec]),
                d + "/log.md": log_header(name),
                **extra,
            }
            if steps:
                changes[f"{d}/ota/{cid}.md"] = log_header(name) + render_steps(steps)
            if roadmap:
                changes["main.md"] = (self._text(tip, "main.md") or "") + f"\n## Update ({now})\n{roadmap}\n"
            message = (
                f"gcc({kind}): {summary.split(chr(10), 1)[0][:60]}\n\n{summary}\n\n"
                f"Got-GCC-Branch: {encode_component(name)}\nGot-GCC-Commit: {cid}\n"
                f"Got-GCC-Steps: {len(steps)}\n"
            )
            return changes, message, rec

        return self._update(name, build)

    def branch(self, name: str, purpose: str) -> BranchMetadata:
        """BRANCH (GCC §3.3): fork the current branch into ``name`` and switch to it.

        The new branch starts with an empty log and no commits; its metadata records
        the purpose and where it came from.

        Raises:
            InvalidNameError: a hostile name.
            InvalidInputError: the branch exists, or an empty purpose.
        """
        name = check_branch_name(name)
        purpose = _required(purpose, "branch purpose")
        self._ensure()
        if self.repo.tip(self._ref(name)) is not None:
            raise InvalidInputError(f"GCC branch {name!r} already exists; switch to it instead")
        src = self._branch
        tip = self._tip(src)
        meta = BranchMetadata(name, purpose, src, self._now())
        stale = dict.fromkeys(self.repo.list_files(tip, self._dir(name)))
        try:
            self.repo.commit_files(
                self._ref(name),
                {**stale, **self._branch_files(name, meta)},
                f"gcc(branch): {name} from {src}\n\n{purpose}\n",
                parents=[tip],
                expected=None,
            )
        except ConcurrentUpdateError:
            raise InvalidInputError(f"GCC branch {name!r} was created concurrently; switch to it instead") from None
        self._set_branch(name)
        return meta

    def switch(self, name: str) -> None:
        """Make ``name`` the current branch.

        Raises:
            UnknownRefError: no such branch.
        """
        self._tip(name)
        self._set_branch(name)

    @staticmethod
    def _resolve_roadmap(conflict: Conflict) -> str:
        # main.md only ever grows by appended update sections: keep both sides' additions.
        base, ours, theirs = conflict.base or "", conflict.ours, conflict.theirs
        if (
            conflict.path == "main.md"
            and ours is not None
            and theirs is not None
            and ours.startswith(base)
            and theirs.startswith(base)
        ):
            return ours + theirs[len(base) :]
        raise MergeConflictError(
            f"GCC merge conflict on {conflict.path}; resolve it with ReasoningRepo.merge", [conflict]
        )

    def merge(self, branch: str, *, summary: str | None = None, target: str | None = None) -> CommitRecord:
        """MERGE (GCC §3.4): a real git merge of ``branch`` into ``target``, then a milestone.

        The source's metadata is marked merged, the git merge commit names both
        parents, and a milestone on ``target`` records the merge (its summary defaults
        to the source's contributions, as Contexa writes it). ``target`` becomes current.

        Args:
            branch: the branch to merge.
            summary: the merge milestone's summary.
            target: where to merge (default: the current branch, or the source's parent
                when the source is current).

        Raises:
            UnknownRefError: no such branch or target.
            InvalidInputError: merging a branch into itself.
            MergeConflictError: the trees conflict beyond the roadmap (nothing is merged).
        """
        src = check_branch_name(branch)
        src_meta = self.metadata(src)
        dest = (
            check_branch_name(target)
            if target is not None
            else (self._branch if self._branch != src else (src_meta.created_from or ROOT_BRANCH))
        )
        self._tip(dest)
        if dest == src:
            raise InvalidInputError(f"cannot merge GCC branch {src!r} into itself; name a target")
        text = None if summary is None else _required(summary, "merge summary")
        if text is None:
            parts = " | ".join(c.summary for c in self.commits(src))
            text = f"Merged branch `{src}` ({len(self.commits(src))} commits). Contributions: {parts}"
        merged = replace(src_meta, status="merged", merged_into=dest, merged_at=self._now())
        meta_path = self._dir(src) + "/metadata.yaml"
        # Mark the source first so it is an ancestor of the target afterwards (fully merged).
        self._update(
            src,
            lambda tip: ({meta_path: render_metadata(merged)}, f"gcc(merge): mark {src} merged into {dest}\n", None),
        )
        try:
            self.last_merge = self.repo.merge(
                self._ref(src),
                into=self._ref(dest),
                strategy=self._resolve_roadmap,
                message=f"gcc(merge): merge {src} into {dest}\n",
            )
        except MergeConflictError:
            self._update(
                src,
                lambda tip: (
                    {meta_path: render_metadata(src_meta)},
                    f"gcc(merge): {src} not merged (conflict)\n",
                    None,
                ),
            )
            raise
        record = self._commit(
            dest,
            text,
            f"Merging branch `{src}` with purpose: {src_meta.purpose}",
            f"Merged `{src}`: {text}",
            {},
            "merge",
        )
        self._set_branch(dest)
        return record
