"""Checks on the memories, each store re-read from its files at audit time (never trusted from
fingerprints taken during the run): no gold answer in any memory, every store still holding
exactly what its ingest record says, and each test question having seen the memory the
protocol promises."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from got_core.bench.audit._core import Check, finding, listing
from got_core.bench.audit._view import RunView, walk_commits
from got_core.bench.audit.needles import MIN_ANSWER_CHARS, letter_markers, occurrences
from got_core.bench.runner import INGEST_PREFIX, LESSON_PREFIX, memory_fingerprint
from got_core.errors import CorruptRepositoryError, GotError
from got_core.storage.git import GitRepo

__all__ = ["MemoryText", "check_fresh", "check_memory_answers", "check_stores", "memory_texts", "online_chain"]

#: Files under a memory directory larger than this are not read (a store of lessons is small).
_MAX_FILE = 256 * 1024 * 1024
_TEXT_SUFFIXES = (".md", ".json", ".jsonl", ".txt", ".yaml", ".yml", ".csv")


@dataclass(frozen=True)
class MemoryText:
    """One text of a memory, as the audit scans it.

    Attributes:
        where: what it is (repository, ref kind, object or file).
        text: its content.
        readable: a test question can read it (study lessons cannot).
        long_only: raw bytes of a binary store: only answers matched anywhere are searched.
    """

    where: str
    text: str
    readable: bool
    long_only: bool = False


def _git_texts(gitdir: Path, prefixes: tuple[str, ...], label: str, readable: bool) -> list[MemoryText]:
    git = GitRepo(gitdir, create=False)
    tips = [git.peel_to_commit(s) or s for n, s in sorted(git.list_refs().items()) if n.startswith(prefixes)]
    commits, _problems = walk_commits(git, tips)  # damage is the 'objects intact' row's
    out: list[MemoryText] = []
    blobs: set[str] = set()
    for oid, tree, _parents in commits:
        try:
            out.append(MemoryText(f"{label} commit {oid[:10]} message", git.read_commit(oid).message, readable))
            for path, blob in git.tree_files(tree).items():
                if blob not in blobs:
                    blobs.add(blob)
                    data = git.read_blob(blob).decode("utf-8", "replace")
                    out.append(MemoryText(f"{label} {path} (blob {blob[:10]})", data, readable))
        except CorruptRepositoryError:
            continue  # a damaged object: the 'objects intact' row names it and fails the audit
    return out


def _store_texts(name: str, path: Path) -> list[MemoryText]:
    from got_core.memory import BACKENDS, get_backend

    out: list[MemoryText] = []
    for f in sorted(path.rglob("*")):
        if f.is_symlink() or not f.is_file() or f.stat().st_size > _MAX_FILE:
            continue
        data = f.read_bytes()
        text_like = f.suffix in _TEXT_SUFFIXES
        out.append(
            MemoryText(
                f"memory/{name}/{f.relative_to(path)}",
                data.decode("utf-8", "replace"),
                True,
                long_only=not text_like,
            )
        )
    if name in BACKENDS and name not in ("none", "git"):
        with get_backend(name, path=path, read_only=True, create=False) as store:
            out += [
                MemoryText(f"memory/{name} lesson {i + 1}", l.text, True) for i, l in enumerate(store.all_lessons())
            ]
    return out


def memory_texts(view: RunView, skip: frozenset[str] = frozenset()) -> list[MemoryText]:
    """Every text of every memory in the run, read now: central's ingest and study-lesson
    refs (whole history: a lesson written then removed still counts), the git memory's
    history, and every file (and parsed lesson) of the other stores.

    Args:
        view: the run.
        skip: store directories (``memory/<name>``) left out.
    """
    out = _git_texts(view.central.gitdir, (INGEST_PREFIX,), "central.git ingest", True)
    out += _git_texts(view.central.gitdir, (LESSON_PREFIX,), "central.git study lessons", False)
    root = view.run_dir / "memory"
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if d.is_symlink() or not d.is_dir() or d.name == "injected" or f"memory/{d.name}" in skip:
            continue
        if d.name == "git":
            out += _git_texts(d, ("refs/",), "memory/git", True)
        else:
            out += _store_texts(d.name, d)
    return out


def check_memory_answers(view: RunView, min_chars: int = MIN_ANSWER_CHARS) -> Check:
    """No test answer in any memory, no study answer in a memory a test question can read."""
    name = "no expected answer in memory"
    proto = view.config.get("protocol") or {}
    if proto.get("answer_free_memory") is None:
        return Check(name, "SKIP", "no memory arm in this experiment")
    if proto.get("answer_free_memory") is False:
        return Check(name, "SKIP", proto.get("answer_free_reason", "not part of this protocol"))
    split = view.config.get("split") or {"study": [], "test": list(view.problems)}
    # An online memory holds the agent's own earlier solutions by design; which memory each
    # question saw is the 'fresh memory per question' row's (the chain of memory states).
    online = frozenset(
        str(m.get("path") or f"memory/{m.get('backend')}")
        for r in view.records.values()
        if r and (m := r.get("memory") or {}).get("mode") == "online"
    )
    texts = memory_texts(view, online)
    gold_letters = Counter(
        str(view.problems[p].get("gold_letter")) for p in split["test"] if view.problems[p].get("gold_letter")
    )
    hits: list[str] = []
    chance: list[str] = []
    n_short = 0
    for pid in list(split["test"]) + list(split["study"]):
        is_test = pid in split["test"]
        answer = view.problems[pid].get("answer")
        n_short += 0 < len(str(answer or "").strip()) < min_chars
        for mt in texts:
            if not (is_test or mt.readable):
                continue
            if mt.long_only and len(str(answer or "").strip()) < min_chars:
                continue  # raw bytes of a binary store: its parsed lessons are scanned for short answers
            for occ in occurrences(mt.text, answer, min_chars):
                what = f"{'test' if is_test else 'study'} answer {occ.needle!r} of {pid} in {mt.where}: {occ.context!r}"
                (hits if occ.stated else chance).append(what)
    for mt in texts:
        if mt.readable and not mt.long_only:
            for letter, ctx in letter_markers(mt.text, "".join(gold_letters)):
                hits.append(
                    f"option letter {letter} (gold of {gold_letters[letter]} test questions) in {mt.where}: {ctx!r}"
                )
    rule = (
        f"{len(texts)} memory texts re-read now (git histories, store files, parsed lessons); answers of "
        f"{min_chars}+ characters anywhere, {n_short} shorter ones as whole tokens, failing where stated as an "
        f"answer; {len(chance)} whole-token occurrences by chance{': ' + listing(chance, 2) if chance else ''}"
        + (f"; online memories ({', '.join(sorted(online))}) left to 'fresh memory per question'" if online else "")
    )
    if hits:
        return Check(name, "FAIL", f"{len(hits)} hits: {listing(hits)}. Rule: {rule}")
    return Check(name, "PASS", rule)


# ----------------------------------------------------------------------------- stores


def _open_store(backend: str, path: Path) -> Any:
    from got_core.memory import get_backend
    from got_core.memory.git import GitMemory
    from got_core.repo import ReasoningRepo

    if backend == "git":
        return GitMemory(repo=ReasoningRepo(path, create=False), read_only=True)
    return get_backend(backend, path=path, read_only=True, create=False)


def _lesson_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _ingests(view: RunView) -> dict[str, dict[str, Any]]:
    out = {}
    for ref, sha in sorted(view.central.refs(INGEST_PREFIX).items()):
        files = view.central.files(sha)
        out[ref[len(INGEST_PREFIX) :]] = {
            "state": json.loads(files["state.json"]),
            "stored": [tuple(json.loads(x)) for x in files["stored.jsonl"].decode().splitlines() if x.strip()],
            "given": [json.loads(x) for x in files["lessons.jsonl"].decode().splitlines() if x.strip()],
        }
    return out


def check_stores(view: RunView) -> Check:
    """Each memory store, re-read from its files now, holds exactly what its ingest record says.

    Also: every backend was given the same lessons, those distilled from the study results
    (less the recorded drops), and every lesson a test question was shown is in its store.
    """
    name = "memory stores match the ingest record"
    ingests = _ingests(view)
    if not ingests:
        return Check(name, "SKIP", "no memory was ingested in this experiment")
    bad: list[str] = []
    givens = {b: [g["text"] for g in i["given"]] for b, i in ingests.items()}
    if len({json.dumps(g) for g in givens.values()}) > 1:
        bad.append(
            f"the backends were given different lessons ({', '.join(f'{b}: {len(g)}' for b, g in givens.items())})"
        )
    dropped = {d["problem_id"] for i in ingests.values() for d in i["state"].get("dropped", [])}
    study = [
        (tv.record or {}).get("lesson") or ""
        for tv in view.finished()
        if (tv.record or {}).get("phase") == "study" and (tv.record or {}).get("problem_id") not in dropped
    ]
    if study and any([s.strip() for s in study] != g for g in givens.values()):
        bad.append("the ingested lessons are not the study results' lessons")
    held: dict[str, set[str]] = {}
    for backend, ing in ingests.items():
        state = ing["state"]
        if backend == "none":
            continue
        path = view.run_dir / str(state.get("path") or f"memory/{backend}")
        if not path.exists():
            bad.append(f"{path.relative_to(view.run_dir)} is missing")
            continue
        try:
            with _open_store(backend, path) as store:
                lessons = sorted((l.outcome, l.topic_key, l.text) for l in store.all_lessons())
                fp = memory_fingerprint(store) or {}
        except GotError as exc:
            bad.append(f"memory/{backend} cannot be read: {exc}")
            continue
        held[backend] = {_lesson_hash(t) for _o, _k, t in lessons} | {t[:500] for _o, _k, t in lessons}
        now_tip = fp.pop("tip", None)
        if lessons != sorted(ing["stored"]) or fp != state.get("fingerprint"):
            extra = [t for _o, _k, t in lessons if (_o, _k, t) not in set(ing["stored"])]
            bad.append(
                f"memory/{backend} holds {len(lessons)} lessons now, its ingest record {len(ing['stored'])}"
                + (f" (not in the record: {extra[0][:60]!r})" if extra else " (changed after the run)")
            )
        if backend == "git" and now_tip != state.get("tip"):
            bad.append(f"the git memory moved after ingest ({str(state.get('tip'))[:10]} -> {str(now_tip)[:10]})")
    for tv in view.finished():
        mem = (tv.record or {}).get("memory") or {}
        if mem.get("mode") != "shared" or mem.get("backend") not in held:
            continue
        have = held[str(mem["backend"])]
        with finding(bad, tv.key):
            used = [h for h in (tv.record or {}).get("lessons_used") or [] if h not in have]
            root = view.root(tv)
            shown = [l for l in ((root.meta.get("lessons") or []) if root else []) if str(l) not in have]
            if used or shown:
                bad.append(
                    f"{tv.key}: {len(used) + len(shown)} lessons shown that memory/{mem['backend']} does not hold"
                )
    if bad:
        return Check(name, "FAIL", f"{len(bad)} differences: {listing(bad)}")
    return Check(
        name,
        "PASS",
        f"{len(held)} stores ({', '.join(sorted(held))}) re-read from their files: each holds exactly its "
        f"ingest record's {len(next(iter(givens.values())))} lessons, the same for every backend and the study "
        "results' own; every lesson a test question was shown is in its store",
    )


# ----------------------------------------------------------------------------- fresh memory


def online_chain(records: list[dict[str, Any]], starts: dict[str, Any]) -> list[str]:
    """Online mode: the memory at question i is exactly the memory after question i−1.

    Per arm, in test order: ``memory.before`` of question i equals ``memory.after`` of
    question i−1 (content fingerprints), and so do the git tips when recorded; the
    top-level ``memory_state`` (the memory ref's commit the question saw) equals that
    question's ``tips.before`` and the previous question's ``tips.after``. The first
    question starts from an empty memory or from an ingest record's state.

    Args:
        records: result records whose ``memory.mode`` is ``online``.
        starts: backend -> the fingerprint an online memory may start from (its ingest record's).

    Returns:
        One line per question that saw another memory (empty when the chain holds).
    """
    bad: list[str] = []
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_arm.setdefault(str(r["arm"]), []).append(r)
    for arm, recs in by_arm.items():
        prev: dict[str, Any] | None = None
        for r in sorted(recs, key=lambda x: x.get("order", 0)):
            m = r["memory"]
            tips = m.get("tips") or {}
            key = f"{arm}/{r['problem_id']}"
            state = r.get("memory_state")
            if state is not None and tips.get("before") is not None and state != tips.get("before"):
                bad.append(f"{key}: memory_state {str(state)[:10]} is not the tip it read")
            if prev is None:
                start = starts.get(str(m.get("backend")))
                if (m.get("before") or {}).get("n", 0) != 0 and m.get("before") != start:
                    bad.append(f"{key}: the online memory did not start empty or from its ingest record")
            else:
                p = prev["memory"]
                ptips = p.get("tips") or {}
                seen = state if state is not None else tips.get("before")
                if m.get("before") != p.get("after") or (
                    seen is not None and ptips.get("after") is not None and seen != ptips["after"]
                ):
                    bad.append(f"{key}: the memory it saw is not the memory after {prev['problem_id']}")
            prev = r
    return bad


def check_fresh(view: RunView) -> Check:
    """Each test question saw the memory its protocol promises (see the module docstring)."""
    from got_core.names import encode_component

    name = "fresh memory per question"
    mem = [r for r in view.records.values() if r and r.get("memory")]
    if not mem:
        return Check(name, "SKIP", "no memory arm in this experiment")
    states: dict[str, Any] = {}
    bad: list[str] = []
    counts: Counter[str] = Counter()
    for r in mem:
        m, key = r["memory"], f"{r['arm']}/{r['problem_id']}"
        counts[str(m["mode"])] += 1
        tips = m.get("tips") or {}
        if m["mode"] == "shared":
            if m["backend"] not in states:
                sha = view.central.tip(INGEST_PREFIX + encode_component(m["backend"], "backend"))
                states[m["backend"]] = json.loads(view.central.read_file(sha, "state.json")) if sha else None
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
    online = [r for r in mem if r["memory"]["mode"] == "online"]
    if online:
        starts = {}
        for sha in view.central.refs(INGEST_PREFIX).values():
            state = json.loads(view.central.read_file(sha, "state.json"))
            starts[str(state.get("backend"))] = state.get("fingerprint")
        bad += online_chain(online, starts)
    detail = ", ".join(f"{n} {mode}" for mode, n in sorted(counts.items()))
    if bad:
        return Check(name, "FAIL", f"{len(bad)} questions: {listing(bad)}")
    promise = (view.config.get("protocol") or {}).get("fresh_memory") or ""
    if online:
        promise += (
            "; online: the memory at question i is exactly the memory after question i-1 (fingerprints, "
            "git tips and memory_state chained)"
        )
    return Check(name, "PASS", f"{detail} questions; {promise.lstrip('; ')}")
