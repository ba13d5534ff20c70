"""§4 controlled transfer across memory substrates (arXiv 2606.14470).

Study K problems with memory writes on, distil one answer-free lesson each, make *every*
backend ingest the *same* lessons, then test M held-out problems per backend with the
memory read-only (each test question sees exactly the post-ingest memory). Study and test
come from a deterministic, domain-stratified split audited for zero overlap. The solver
is the paper's single-shot retrieval-augmented agent by default (``method="tot"`` for the
full tree of thoughts); MATH and GPQA get one table each.

``memory_mode="online"`` (issue 16 §3): each backend's memory instead starts empty (or
with the study lessons) and accumulates the agent's own verified lessons as the test
stream proceeds (:mod:`got_core.bench.protocols.online`); the table adds accuracy by
quartile and ``online.png``.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from got_core.bench.datasets import Problem, audit_overlap, stratified_split
from got_core.bench.protocols.common import (
    ExperimentOptions,
    ExperimentResult,
    begin_run,
    build_config,
    check_backends,
    finish,
    load_pool,
    resolve_method,
    run_experiment_tasks,
    solver_options,
)
from got_core.bench.protocols.online import (
    Stream,
    online_files,
    online_memory,
    online_notes,
    run_streams,
    writable_backend,
)
from got_core.bench.runner import (
    INGEST_PREFIX,
    Task,
    memory_fingerprint,
    model_endpoint,
    open_central,
    prepare_run_dir,
    task_seed,
)
from got_core.errors import ConfigError, InvalidInputError
from got_core.names import encode_component
from got_core.types import canonical_json

__all__ = ["MEMORY_MODES", "distill_lessons", "five_substrates", "ingest"]

MEMORY_MODES = ("shared", "online")

# A lesson keeps at least this many words (of 3+ letters) once stated answers are dropped.
_MIN_LESSON_WORDS = 4
_WORDS = re.compile(r"[A-Za-z]{3,}")


def distill_lessons(
    study: Sequence[dict[str, Any]], problems: dict[str, Problem], min_chars: int = 4
) -> tuple[list[Any], list[dict[str, str]]]:
    """One answer-free lesson per study result (§4): the solver's lesson, with every sentence
    that states *any* value as an answer dropped, refused if it names the gold answer or if
    too little is left.

    The solver already strips its *own* answer from a lesson, but a wrong answer to a study
    problem (``The answer to this problem is $x = 2$``) may be a test question's right one.
    Filtering by the test answers would itself leak them, so the rule is gold-free: the
    audit's answer-cue rule (:func:`got_core.bench.audit.needles.strip_stated_answers`) drops every
    sentence stating a value after an answer cue. The study problem's gold answer is checked
    too (the study phase may use gold), with the audit's rule
    (:func:`got_core.bench.audit.answer_needles`).

    Returns:
        ``(lessons, dropped)``: :class:`~got_core.memory.Lesson` objects in study order, and
        ``{"problem_id", "reason"}`` for study problems that gave none.
    """
    from got_core.bench.audit.needles import answer_needles, strip_stated_answers
    from got_core.memory import Lesson

    lessons, dropped = [], []
    for r in study:
        pid, text = r["problem_id"], (r.get("lesson") or "").strip()
        if not text:
            dropped.append({"problem_id": pid, "reason": f"no lesson ({r.get('lesson_source')})"})
            continue
        kept = strip_stated_answers(text)
        if len(_WORDS.findall(kept)) < _MIN_LESSON_WORDS:
            dropped.append(
                {"problem_id": pid, "reason": "the lesson states an answer and too little is left without it"}
            )
            continue
        checked, _ = answer_needles(problems[pid].answer, min_chars)
        if any(n in kept for n in checked):
            dropped.append({"problem_id": pid, "reason": "the lesson names the gold answer"})
            continue
        lessons.append(
            Lesson(
                text=kept,
                source_problem=pid,
                outcome="success" if r.get("outcome") == "success" else "failure",
                score=0.5,
                meta={"study_problem": pid},
            )
        )
    return lessons, dropped


def ingest(
    run_dir: Path, backend: str, lessons: Sequence[Any], dropped: Sequence[dict[str, str]], *, name: str | None = None
) -> dict[str, Any]:
    """Make ``backend`` ingest ``lessons`` into the store ``RUN_DIR/memory/<name>``, once; record it in git.

    The record is a commit on ``refs/got/ingest/<name>`` in ``central.git`` (``name``
    defaults to the backend's): the lessons given, the lessons the backend then holds, and
    its fingerprint — what the audit compares every test question's memory with (a task
    reading a store other than the backend's own names it as ``memory["store"]``). A store
    whose record exists is not touched again (a resumed run); one without is wiped and
    ingested from scratch.

    Returns:
        The ``state.json`` of the record.
    """
    name = name or backend
    with open_central(run_dir) as central:
        ref = INGEST_PREFIX + encode_component(name, "backend")
        tip = central.tip(ref)
        if tip is not None:
            return json.loads(central.read_file(tip, "state.json"))
        path = Path(run_dir) / "memory" / name
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        with writable_backend(backend, path) as mem:
            mem.add_lessons(lessons)
            if backend == "git":
                mem.repo.reindex()  # build the derived index once, before readers in many processes
            fp = memory_fingerprint(mem) or {}
            stored = sorted((l.outcome, l.topic_key, l.text) for l in mem.all_lessons())
        tip_sha = fp.pop("tip", None)
        state = {
            "backend": backend,
            "fingerprint": fp,
            "tip": tip_sha,
            "n_given": len(lessons),
            "n_stored": len(stored),
            "dropped": list(dropped),
            "path": f"memory/{name}",
        }
        given = "".join(
            json.dumps(
                {"text": l.text, "outcome": l.outcome, "source_problem": l.source_problem},
                sort_keys=True,
                ensure_ascii=False,
            )
            + "\n"
            for l in lessons
        )
        held = "".join(json.dumps(list(s), ensure_ascii=False) + "\n" for s in stored)
        central.commit_files(
            ref,
            {"lessons.jsonl": given, "stored.jsonl": held, "state.json": canonical_json(state) + "\n"},
            f"ingest {name}: {len(lessons)} lessons given, {len(stored)} held\n",
            parents=[],
        )
        return state


def five_substrates(opts: ExperimentOptions) -> ExperimentResult:
    """§4 controlled transfer across memory substrates (see the module docstring).

    Raises:
        InvalidInputError: too few problems for ``k_study + m_test``, or an overlapping split.
        UnknownBackendError: a backend name that is not registered.
        ConfigError: an unknown method or memory mode.
    """
    if opts.memory_mode not in MEMORY_MODES:
        raise ConfigError(f"unknown memory mode {opts.memory_mode!r}; choose {' or '.join(MEMORY_MODES)}")
    online = opts.memory_mode == "online"
    if online and opts.online_start not in ("empty", "study"):
        raise ConfigError("--online-start for five substrates is 'empty' or 'study'")
    arm, more = resolve_method(opts.method)
    pool = load_pool(opts)
    split = stratified_split(pool, opts.k_study, opts.m_test, opts.seed)
    overlap = audit_overlap(split)
    if overlap:
        raise InvalidInputError(f"study and test share {overlap} problem(s); the split must be disjoint")
    backends = tuple(dict.fromkeys(("none", *opts.backends)))
    check_backends(backends)
    memory_arms = [b for b in backends if b != "none"]
    identity: dict[str, Any] = {
        "backends": list(backends),
        "method": opts.method,
        "k_study": opts.k_study,
        "m_test": opts.m_test,
        "memory_mode": opts.memory_mode,
        **({"online_start": opts.online_start, "online_verify": opts.online_verify} if online else {}),
    }
    pre = begin_run(opts, identity)
    base: dict[str, Any] = {
        "experiment": "five_substrates",
        "method": arm,
        "options": solver_options(opts, pre, **more),
    }
    run_study = not (online and opts.online_start == "empty")
    study = [
        Task(
            phase="study",
            arm="study",
            problem=asdict(p),
            seed=task_seed(opts.seed, p.id),
            order=i,
            memory={"mode": "study", "backend": "git"},
            **base,
        )
        for i, p in enumerate(split.study if run_study else [])
    ]

    def memory_spec(b: str, i: int) -> dict[str, Any]:
        if online and b != "none":
            return online_memory(b, b, i, offer="lessons")
        return {"mode": "shared", "backend": b, "path": f"memory/{b}"}

    test = [
        Task(
            phase="test",
            arm=b,
            problem=asdict(p),
            seed=task_seed(opts.seed, p.id),
            order=i,
            memory=memory_spec(b, i),
            **base,
        )
        for b in backends
        for i, p in enumerate(split.test)
    ]
    # The re-run needs the memory as its question saw it: online, only a git stream keeps every state.
    rerunnable = [b for b in memory_arms if not online or b == "git"]
    rerun = next((t for t in test if t.arm in rerunnable), test[0])
    streams = [
        Stream(b, b, [t for t in test if t.arm == b], verify=opts.online_verify, offer="lessons")
        for b in (memory_arms if online else [])
    ]
    config = build_config(
        opts,
        "five_substrates",
        split.study + split.test,
        study + test,
        baseline="none",
        rerun=rerun,
        identity=identity,
        pre=pre,
        split={
            "study": [p.id for p in split.study],
            "test": [p.id for p in split.test],
            "strata": {k: list(v) for k, v in split.strata.items()},
            "overlap": overlap,
            "key": split.key,
            "dropped": split.dropped,
        },
        protocol={
            "memory_arms": memory_arms,
            "answer_free_memory": True,
            "fresh_memory": (
                "online: question i sees exactly the memory after question i-1 (refs/got/online/<arm>)"
                if online
                else "read-only: every test question sees the post-ingest memory"
            ),
            "study_arm": "study",
            "memory_mode": opts.memory_mode,
        },
        extra={"online": {"streams": [s.describe() for s in streams]}} if online else None,
    )
    with model_endpoint(opts.spec) as spec:
        prepare_run_dir(opts.out, config, resume=opts.resume)
        done = run_experiment_tasks(opts, spec, study, "study")
        lessons, dropped = distill_lessons(done, {p.id: p for p in split.study})
        if online:
            ingest(Path(opts.out), "none", lessons, dropped)  # the baseline reads as in the shared mode
            for s in streams:
                s.start = list(lessons) if opts.online_start == "study" else []
            # the baseline needs no memory: it runs as usual, the streams one question at a time
            results = run_experiment_tasks(opts, spec, [t for t in test if t.arm == "none"], "test none")
            results += run_streams(streams, opts.out, spec, workers=opts.workers, progress=opts.progress)
        else:
            for b in backends:
                ingest(Path(opts.out), b, lessons, dropped)
            results = run_experiment_tasks(opts, spec, test, "test")
    if online:
        start = f"starting from {len(lessons)} study lessons" if opts.online_start == "study" else "starting empty"
        summary = f"Online memory per backend ({start}), accumulating the agent's verified lessons."
    else:
        summary = (
            f"{len(lessons)} lessons ingested by every backend ({len(dropped)} study problems gave none). "
            "Memory read-only at test."
        )
    notes = ["", f"Study K={len(done)}, test M={len(split.test)} per backend; solver {opts.method}. {summary}"]
    quartile_rows: list[dict[str, Any]] = []
    if online:
        more_notes, quartile_rows = online_notes(results, memory_arms, "none", opts)
        notes += more_notes
    result = finish(
        opts,
        done + results,
        "none",
        "Five-substrate controlled transfer (§4)",
        arms=list(backends),
        notes=notes,
        pre=pre,
    )
    if online:
        online_files(result, results, memory_arms, "none", quartile_rows, opts)
    return result
