"""Checks that re-run something: one task solved again with its seed, and the run's
pre-registration (when issue 15's ``got_core.bench.prereg`` is there to judge it)."""

from __future__ import annotations

import hashlib
import importlib
import json
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from got_core.bench.audit._core import Check
from got_core.bench.audit._view import RunView
from got_core.bench.runner import ModelSpec, Task, execute_task, model_endpoint, read_result, stable_record
from got_core.errors import GotError
from got_core.repo import ReasoningRepo
from got_core.types import canonical_json

__all__ = ["PREREG", "RERUN", "check_prereg", "check_rerun"]

RERUN = "seeded re-run identical"
#: Where a pre-registration lives in central.git (issue 15), or ``config.json``'s ``prereg``.
PREREG_REF = "refs/got/prereg"
PREREG = "pre-registration precedes the run"
_TIMING_KEYS = ("latency_ms", "tool_ms", "elapsed_s")
#: metadata fields derived from commit SHAs of other nodes (which hash measured latencies).
_SHA_DERIVED = ("node_id", "after_failure")


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


def check_rerun(view: RunView, overrides: dict[str, Any]) -> Check:
    """Solve the config's audit task again in a scratch directory: the same record, bit-identical nodes."""
    config, run_dir, central = view.config, view.run_dir, view.central
    task = Task.from_dict(config["audit"]["rerun_task"])
    original = view.records.get(task.key)
    if original is None:
        return Check(RERUN, "FAIL", f"the task to re-run ({task.key}) has no result")
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
                    return Check(RERUN, "FAIL", f"the re-run of {task.key} stored no result")
                new_nodes, new_shas = _node_contents(scratch, again["result_sha"])
    except GotError as exc:
        return Check(RERUN, "FAIL", f"could not re-run {task.key}: {exc}")
    old_nodes, old_shas = _node_contents(central, original["result_sha"])
    a, b = stable_record(original), stable_record(fresh)
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    n = sum(old_nodes.values())
    if diff or old_nodes != new_nodes:
        return Check(
            RERUN,
            "FAIL",
            f"re-ran {task.key} (seed {task.seed}): differing result fields {diff or '—'}; "
            f"{sum((old_nodes & new_nodes).values())}/{n} nodes identical in content",
        )
    same = len(old_shas & new_shas)
    if same != n:
        return Check(
            RERUN,
            "FAIL",
            f"re-ran {task.key} (seed {task.seed}): nodes identical in content but only "
            f"{same}/{n} commit SHAs identical (the commits are not bit-identical)",
        )
    return Check(
        RERUN,
        "PASS",
        f"re-ran {task.key} (seed {task.seed}) in a scratch directory: result record and "
        f"{n}/{n} node commits bit-identical (same SHAs)",
    )


def check_prereg(view: RunView) -> Check:
    """Issue 15's pre-registration check, ``got_core.bench.prereg.check_prereg(run_dir) -> (ok, detail)``.

    SKIP when the run was not pre-registered (no ``prereg`` entry in ``config.json`` and no
    ref under ``refs/got/prereg``), when that module is not there, or when it answers
    ``ok=None``.
    """
    if not view.central.refs(PREREG_REF) and not view.config.get("prereg"):
        return Check(PREREG, "SKIP", "the run was not pre-registered (no prereg in config.json, no refs/got/prereg)")
    try:
        module = importlib.import_module("got_core.bench.prereg")
    except ImportError:
        return Check(PREREG, "SKIP", "no pre-registration support (got_core.bench.prereg) in this version")
    judge = getattr(module, "check_prereg", None)
    if not callable(judge):
        return Check(PREREG, "SKIP", "got_core.bench.prereg has no check_prereg(run_dir)")
    ok, detail = judge(view.run_dir)
    if ok is None:
        return Check(PREREG, "SKIP", str(detail or "the run was not pre-registered"))
    return Check(PREREG, "PASS" if ok else "FAIL", str(detail))
