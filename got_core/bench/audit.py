"""The fairness audit of a benchmark run, from git alone (Table 2 of arXiv 2606.14470).

:func:`audit_run` reads ``RUN_DIR/config.json`` (what was asked) and the
repositories (what happened: ``central.git`` and the memory substrates) and checks:

* **results complete** — every task of the config has its result commit;
* **split disjoint** — study and test share no problem id and no normalised question;
* **same gold letters across arms** — every arm's result of a multiple-choice problem
  records the same gold letter and option order as the config (and as the data file
  re-shuffled with the recorded seed, when that file is still there);
* **every node a commit** — each result commit reaches exactly the nodes its record
  lists, each a commit with ``metadata.json`` for that problem;
* **no expected answer in memory** — ``git log -S <answer>`` semantics
  (:meth:`ReasoningRepo.pickaxe`, exact and case-sensitive) over every memory ref:
  study lessons, ingest records and the git backend's branches. Rule for short answers:
  answers shorter than :data:`MIN_ANSWER_CHARS` characters (``"2"``, ``"24"``, ``"1/4"``)
  are skipped, because such strings occur by chance in any text; the output says how
  many were skipped. Test answers must appear in no memory ref; study answers in no
  memory a test question can read;
* **fresh memory per question** — where the protocol says so: a shared memory is the
  same (content and git tip) before and after every test question as right after
  ingest; an injected one holds exactly the injected example; a study one starts empty;
* **seeded re-run identical** — one task is solved again into a scratch directory with
  the same seed; its result record (less measured timings) must be identical, and every
  node commit bit-identical: the same SHAs (runs record no measured latencies in
  ``trace.jsonl`` and commit on a deterministic clock, so a seeded re-run against the
  same model writes the same objects);
* **git fsck** — ``central.git`` is clean.

A check that does not apply to the experiment is ``SKIP`` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from got_core.bench.runner import (
    INGEST_PREFIX,
    LESSON_PREFIX,
    ModelSpec,
    Task,
    execute_task,
    load_config,
    model_endpoint,
    read_result,
    stable_record,
)
from got_core.errors import ConfigError, GotError
from got_core.names import encode_component
from got_core.repo import ReasoningRepo
from got_core.types import canonical_json

__all__ = ["MIN_ANSWER_CHARS", "AuditReport", "Check", "answer_needles", "audit_run", "print_report"]

#: Answers shorter than this are not searched for (they occur by chance: "2", "24", "1/4").
MIN_ANSWER_CHARS = 4
_TIMING_KEYS = ("latency_ms", "tool_ms", "elapsed_s")
#: metadata fields derived from commit SHAs of other nodes (which hash measured latencies).
_SHA_DERIVED = ("node_id", "after_failure")


@dataclass
class Check:
    """One line of the audit: ``status`` is ``PASS``, ``FAIL`` or ``SKIP``."""

    name: str
    status: str
    detail: str


@dataclass
class AuditReport:
    """All checks of one run; :attr:`ok` is false when any check FAILed."""

    run_dir: Path
    experiment: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed."""
        return all(c.status != "FAIL" for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "run_dir": str(self.run_dir),
            "experiment": self.experiment,
            "ok": self.ok,
            "checks": [vars(c) for c in self.checks],
        }


def answer_needles(answer: str | None, min_chars: int = MIN_ANSWER_CHARS) -> tuple[list[str], list[str]]:
    """Split an answer into strings to search for and strings skipped as too short.

    Returns:
        ``([answer], [])`` when the stripped answer has at least ``min_chars`` characters,
        else ``([], [answer])``.
    """
    text = (answer or "").strip()
    if not text:
        return [], []
    return ([text], []) if len(text) >= min_chars else ([], [text])


def _records(config: dict[str, Any], central: ReasoningRepo) -> dict[str, dict[str, Any] | None]:
    out = {}
    for t in config.get("tasks", []):
        sha = central.tip(t["ref"])
        out[t["key"]] = (
            None if sha is None else {**json.loads(central.read_file(sha, "result.json")), "result_sha": sha}
        )
    return out


def _complete(config: dict[str, Any], records: dict[str, Any]) -> Check:
    missing = [k for k, r in records.items() if r is None]
    if missing:
        return Check(
            "results complete",
            "FAIL",
            f"{len(missing)} of {len(records)} tasks have no result commit "
            f"(first: {', '.join(missing[:3])}); resume the run with --resume",
        )
    return Check("results complete", "PASS", f"{len(records)} result commits in central.git")


def _split(config: dict[str, Any]) -> Check:
    split = config.get("split")
    if not split:
        return Check("split disjoint", "SKIP", "no study/test split in this experiment")
    by_id = {p["id"]: p for p in config["problems"]}
    ids = set(split["study"]) & set(split["test"])
    texts = {by_id[i]["question_sha"] for i in split["study"]} & {by_id[i]["question_sha"] for i in split["test"]}
    if ids or texts:
        return Check("split disjoint", "FAIL", f"{len(ids)} shared ids, {len(texts)} shared normalised questions")
    strata = ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted((split.get("strata") or {}).items()))
    return Check(
        "split disjoint",
        "PASS",
        f"study {len(split['study'])}, test {len(split['test'])}: 0 shared ids, "
        f"0 shared normalised questions; strata (study/test by {split.get('key')}): {strata}",
    )


def _gold(config: dict[str, Any], records: dict[str, Any]) -> Check:
    mcq = {p["id"]: p for p in config["problems"] if p["kind"] == "mcq"}
    if not mcq:
        return Check("same gold letters across arms", "SKIP", "no multiple-choice problems in this run")
    bad, arms_seen = [], set()
    for r in filter(None, records.values()):
        p = mcq.get(r["problem_id"])
        if p is None:
            continue
        arms_seen.add(r["arm"])
        if r.get("gold_letter") != p["gold_letter"] or r.get("choices_sha") != p["choices_sha"]:
            bad.append(f"{r['arm']}/{r['problem_id']}: {r.get('gold_letter')} vs {p['gold_letter']}")
    detail = f"{len(mcq)} multiple-choice problems × {len(arms_seen)} arms: one gold letter and option order each"
    data = (config.get("data") or {}).get("gpqa")
    if (
        data
        and Path(data["path"]).exists()
        and hashlib.sha256(Path(data["path"]).read_bytes()).hexdigest() == data["sha256"]
    ):
        from got_core.bench.datasets import load_gpqa

        fresh = {
            p.id: p.gold_letter
            for p in load_gpqa(data["path"], seed=config["data"]["shuffle_seed"], limit=data.get("limit"))
        }
        bad += [
            f"data file: {i} is {fresh.get(i)} not {p['gold_letter']}"
            for i, p in mcq.items()
            if fresh.get(i) != p["gold_letter"]
        ]
        detail += f"; equal to {Path(data['path']).name} re-shuffled with seed {config['data']['shuffle_seed']}"
    if bad:
        return Check("same gold letters across arms", "FAIL", f"{len(bad)} mismatches: {'; '.join(bad[:3])}")
    return Check("same gold letters across arms", "PASS", detail)


def _nodes(central: ReasoningRepo, records: dict[str, Any]) -> Check:
    bad, total = [], 0
    for key, r in records.items():
        if r is None:
            continue
        labels: Counter[str] = Counter()
        for info in central.log(r["result_sha"])[1:]:
            try:
                meta = json.loads(central.read_file(info.oid, "metadata.json"))
            except KeyError:
                continue
            if meta.get("problem_id") == r["problem_id"]:
                labels[str(meta.get("label", ""))] += 1
        total += sum(labels.values())
        if labels != Counter(r.get("node_labels") or []):
            bad.append(f"{key}: {sum(labels.values())} node commits, {r.get('n_nodes')} nodes recorded")
    if bad:
        return Check("every node a commit", "FAIL", "; ".join(bad[:3]))
    return Check("every node a commit", "PASS", f"{total} nodes, each a commit reachable from its result")


def _memory_refs(central: ReasoningRepo, run_dir: Path) -> list[tuple[ReasoningRepo, list[str], bool]]:
    """``(repo, refs, readable_at_test)`` for every memory in the run (the caller closes non-central repos)."""
    out = []
    lesson_refs = sorted(central.refs(LESSON_PREFIX))
    if lesson_refs:
        out.append((central, lesson_refs, False))
    ingest_refs = sorted(central.refs(INGEST_PREFIX))
    if ingest_refs:
        out.append((central, ingest_refs, True))
    git_mem = run_dir / "memory" / "git"
    if git_mem.exists():
        repo = ReasoningRepo(git_mem, create=False)
        refs = sorted(repo.refs("refs/heads/"))
        if refs:
            out.append((repo, refs, True))
        else:
            repo.close()
    return out


def _answers(config: dict[str, Any], central: ReasoningRepo, run_dir: Path, min_chars: int) -> Check:
    name = "no expected answer in memory"
    proto = config.get("protocol") or {}
    if proto.get("answer_free_memory") is None:
        return Check(name, "SKIP", "no memory arm in this experiment")
    if proto.get("answer_free_memory") is False:
        return Check(name, "SKIP", proto.get("answer_free_reason", "not part of this protocol"))
    by_id = {p["id"]: p for p in config["problems"]}
    split = config.get("split") or {"study": [], "test": list(by_id)}
    memories = _memory_refs(central, run_dir)
    n_refs = sum(len(refs) for _, refs, _ in memories)
    n_repos = len({str(repo.path) for repo, _, _ in memories})
    hits, checked, skipped = [], 0, []
    try:
        for pid in split["test"] + split["study"]:
            is_test = pid in split["test"]
            needles, short = answer_needles(by_id[pid]["answer"], min_chars)
            skipped += short
            for needle in needles:
                checked += 1
                for repo, refs, readable in memories:
                    if not (is_test or readable):
                        continue
                    for info in repo.pickaxe(needle, refs=refs):
                        hits.append(
                            f"{'test' if is_test else 'study'} answer {needle!r} of {pid} in "
                            f"{Path(repo.path).name} commit {info.oid[:10]}"
                        )
    finally:
        for repo, _, _ in memories:
            if repo is not central:
                repo.close()
    rule = (
        f"git log -S semantics (exact, case-sensitive) over {n_refs} memory refs in {n_repos} "
        f"repositories; {checked} answers checked, {len(skipped)} skipped as shorter than {min_chars} "
        f"characters ({', '.join(repr(s) for s in skipped[:6])}{'…' if len(skipped) > 6 else ''})"
    )
    if hits:
        return Check(name, "FAIL", f"{len(hits)} hits: {'; '.join(hits[:3])}. Rule: {rule}")
    return Check(name, "PASS", rule)


def _fresh(config: dict[str, Any], central: ReasoningRepo, records: dict[str, Any], run_dir: Path) -> Check:
    name = "fresh memory per question"
    mem = [r for r in records.values() if r and r.get("memory")]
    if not mem:
        return Check(name, "SKIP", "no memory arm in this experiment")
    states: dict[str, Any] = {}
    bad: list[str] = []
    counts: Counter[str] = Counter()
    for r in mem:
        m, key = r["memory"], f"{r['arm']}/{r['problem_id']}"
        counts[m["mode"]] += 1
        tips = m.get("tips") or {}
        if m["mode"] == "shared":
            if m["backend"] not in states:
                sha = central.tip(INGEST_PREFIX + encode_component(m["backend"], "backend"))
                states[m["backend"]] = json.loads(central.read_file(sha, "state.json")) if sha else None
            state = states[m["backend"]]
            if state is None:
                bad.append(f"{key}: no ingest record for {m['backend']}")
            elif not (
                m["before"] == m["after"] == state["fingerprint"]
                and tips.get("before") == tips.get("after") == state.get("tip")
            ):
                bad.append(f"{key}: memory differs from the post-ingest state")
        elif m["mode"] == "injected":
            if not (m["before"] == m["after"] == m.get("expected")):
                bad.append(f"{key}: memory does not hold exactly the injected example")
        elif m["mode"] == "study" and (m["before"] or {}).get("n", 0) != 0:
            bad.append(f"{key}: the study memory was not empty")
    git_state = states.get("git")
    if git_state and git_state.get("tip") and (run_dir / "memory" / "git").exists():
        # The git substrate can also prove it was not touched after the run: its tip is still the ingest tip.
        with ReasoningRepo(run_dir / "memory" / "git", create=False) as repo:
            now = repo.tip("memory")
        if now != git_state["tip"]:
            bad.append(f"the git memory moved after ingest ({git_state['tip'][:10]} -> {(now or 'none')[:10]})")
    detail = ", ".join(f"{n} {mode}" for mode, n in sorted(counts.items()))
    if bad:
        return Check(name, "FAIL", f"{len(bad)} questions: {'; '.join(bad[:3])}")
    return Check(name, "PASS", f"{detail} questions; {config['protocol'].get('fresh_memory') or ''}")


def _node_contents(repo: ReasoningRepo, result_sha: str) -> tuple[Counter[str], set[str]]:
    contents: Counter[str] = Counter()
    shas: set[str] = set()
    for info in repo.log(result_sha)[1:]:
        files = repo.files(info.oid)
        if "metadata.json" not in files:
            continue
        meta = {k: v for k, v in json.loads(files["metadata.json"]).items() if k not in _SHA_DERIVED}
        trace = [
            {k: v for k, v in json.loads(line).items() if k not in _TIMING_KEYS}
            for line in files.get("trace.jsonl", b"").decode().splitlines()
            if line.strip()
        ]
        blob = canonical_json([files["thought.md"].decode(), json.loads(files["scores.json"]), meta, trace])
        contents[hashlib.sha256(blob.encode()).hexdigest()] += 1
        shas.add(info.oid)
    return contents, shas


def _rerun(
    config: dict[str, Any], run_dir: Path, central: ReasoningRepo, records: dict[str, Any], overrides: dict[str, Any]
) -> Check:
    name = "seeded re-run identical"
    task = Task.from_dict(config["audit"]["rerun_task"])
    original = records.get(task.key)
    if original is None:
        return Check(name, "FAIL", f"the task to re-run ({task.key}) has no result")
    spec = ModelSpec(**{**config["runtime"]["model"], "api_key": overrides.get("api_key") or "EMPTY"})
    if overrides.get("base_url"):
        spec = replace(spec, base_url=overrides["base_url"], standin=None)
    if overrides.get("model"):
        spec = replace(spec, model=overrides["model"])
    try:
        with model_endpoint(spec) as live, tempfile.TemporaryDirectory(prefix="audit-rerun-", dir=run_dir) as tmp:
            fresh = execute_task(task, live, run_dir, out_dir=tmp)
            with ReasoningRepo(Path(tmp) / "central.git", create=False) as scratch:
                again = read_result(scratch, task)
                if again is None:
                    return Check(name, "FAIL", f"the re-run of {task.key} stored no result")
                new_nodes, new_shas = _node_contents(scratch, again["result_sha"])
    except GotError as exc:
        return Check(name, "FAIL", f"could not re-run {task.key}: {exc}")
    old_nodes, old_shas = _node_contents(central, original["result_sha"])
    a, b = stable_record(original), stable_record(fresh)
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    n = sum(old_nodes.values())
    if diff or old_nodes != new_nodes:
        return Check(
            name,
            "FAIL",
            f"re-ran {task.key} (seed {task.seed}): differing result fields {diff or '—'}; "
            f"{sum((old_nodes & new_nodes).values())}/{n} nodes identical in content",
        )
    same = len(old_shas & new_shas)
    if same != n:
        return Check(
            name,
            "FAIL",
            f"re-ran {task.key} (seed {task.seed}): nodes identical in content but only "
            f"{same}/{n} commit SHAs identical (the commits are not bit-identical)",
        )
    return Check(
        name,
        "PASS",
        f"re-ran {task.key} (seed {task.seed}) in a scratch directory: result record and "
        f"{n}/{n} node commits bit-identical (same SHAs)",
    )


def audit_run(
    run_dir: str | Path,
    *,
    rerun: bool = True,
    min_answer_chars: int = MIN_ANSWER_CHARS,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    fsck: bool = True,
) -> AuditReport:
    """Audit a run directory (the checks are listed in the module docstring).

    Args:
        run_dir: a directory written by a cookbook / :mod:`got_core.bench.protocols`.
        rerun: re-solve one task to check seeded reproducibility (needs the model server, or
            starts the stand-in again when the run used it).
        min_answer_chars: answers shorter than this are not searched for in memory.
        base_url, model, api_key: override the recorded endpoint for the re-run.
        fsck: run ``git fsck`` on ``central.git``.

    Returns:
        An :class:`AuditReport`; ``report.ok`` is false when a check failed.

    Raises:
        ConfigError: ``run_dir`` is not a run directory.
    """
    run_dir = Path(run_dir).resolve()
    config = load_config(run_dir)
    if not (run_dir / "central.git").exists():
        raise ConfigError(f"{run_dir} has no central.git; the run never started")
    report = AuditReport(run_dir, config.get("experiment", "?"))
    with ReasoningRepo(run_dir / "central.git", create=False) as central:
        records = _records(config, central)
        report.checks += [
            _complete(config, records),
            _split(config),
            _gold(config, records),
            _nodes(central, records),
            _answers(config, central, run_dir, min_answer_chars),
            _fresh(config, central, records, run_dir),
        ]
        if rerun:
            report.checks.append(
                _rerun(config, run_dir, central, records, {"base_url": base_url, "model": model, "api_key": api_key})
            )
        else:
            report.checks.append(Check("seeded re-run identical", "SKIP", "--no-rerun"))
        if fsck:
            try:
                ok, text = central.fsck()
                report.checks.append(
                    Check("git fsck central.git", "PASS" if ok else "FAIL", "clean" if ok else text.strip()[:300])
                )
            except (GotError, OSError) as exc:
                report.checks.append(Check("git fsck central.git", "SKIP", f"git unavailable ({exc})"))
    return report


def print_report(report: AuditReport, console: Any = None) -> None:
    """Print the checks as a rich table, then the verdict."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    table = Table(title=f"Audit of {report.run_dir} ({report.experiment}) — Table 2, from git alone")
    for col in ("check", "status", "detail"):
        table.add_column(col, overflow="fold")
    colour = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow"}
    for c in report.checks:
        table.add_row(c.name, f"[{colour.get(c.status, 'white')}]{c.status}[/]", escape(c.detail))
    console.print(table)
    console.print("[green]audit passed[/]" if report.ok else "[bold red]audit FAILED[/]")
