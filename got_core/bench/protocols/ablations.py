"""MATH-500 ablations as the paper ran them (Table 6, Fig. 2 of arXiv 2606.14470).

Every arm answers the same test problems with the paper's single-shot retrieval-augmented
agent (the solver is one flag away), against one memory corpus (``memory_corpus``: MATH-train
problems with gold worked solutions, in the MATH-500 JSONL format) that is leakage-audited
against the test set first (normalised problem text, and MiniLM near-duplicates at cosine ≥
``leakage_cosine``: such corpus items are removed). Arms (:data:`ABLATION_ARMS`):

==========================  ===================================================================
``none``                    no memory (the baseline)
``sc5``                     self-consistency, 5 samples, no memory
``static_fewshot``          the same 3 worked exemplars for every question, no retrieval
``markdown``/``vector``/    top-3 retrieval of worked examples (problem, answer, solution) from
``git``                     the corpus ingested by that substrate
``vector_subject``          the same, retrieving only from the test problem's subject
``vector_answer_only``      content arm: problem and final answer, no solution
``vector_full_solution``    content arm: problem and the full gold worked solution as written
``vector_lesson``           content arm: an answer-free lesson (the method, every occurrence of
                            the answer and the boxed result removed)
``git_online``              a git memory that starts empty and accumulates the agent's own
                            verified solutions across the test stream (accuracy by quartile)
==========================  ===================================================================

One table (accuracy, Δ vs none [95% CI], *, content, retrieval, tokens), ``forest.png``
(Fig. 2: a horizontal forest, significant arms highlighted), the online arm's quartiles
and ``online.png``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from got_core.bench.datasets import Problem, leakage_audit, load_math500, stratified_split
from got_core.bench.protocols.common import (
    ExperimentOptions,
    ExperimentResult,
    begin_run,
    build_config,
    data_entry,
    finish,
    load_pool,
    model_label,
    resolve_method,
    run_experiment_tasks,
    solver_options,
    write_jsonl,
)
from got_core.bench.protocols.copyability import worked_example
from got_core.bench.protocols.five_substrates import ingest
from got_core.bench.protocols.online import Stream, online_files, online_memory, online_notes, run_streams
from got_core.bench.runner import Task, model_endpoint, prepare_run_dir, task_seed
from got_core.errors import ConfigError, InvalidInputError
from got_core.names import encode_component

__all__ = ["ABLATION_ARMS", "CONTENTS", "math500_ablations", "render_content"]

#: arm -> (memory kind, backend, content). Memory kinds: none, static, shared, subject, online.
ABLATION_ARMS: dict[str, tuple[str, str | None, str | None]] = {
    "none": ("none", None, None),
    "sc5": ("none", None, None),
    "static_fewshot": ("static", None, "worked"),
    "markdown": ("shared", "markdown", "worked"),
    "vector": ("shared", "vector", "worked"),
    "git": ("shared", "git", "worked"),
    "vector_subject": ("subject", "vector", "worked"),
    "vector_answer_only": ("shared", "vector", "answer_only"),
    "vector_full_solution": ("shared", "vector", "full_solution"),
    "vector_lesson": ("shared", "vector", "lesson"),
    "git_online": ("online", "git", "solution"),
}
#: What a memory item holds.
CONTENTS = ("worked", "answer_only", "full_solution", "lesson")
_BOXED = re.compile(r"\\boxed\s*\{")


def _strip_boxed(text: str) -> str:
    """``text`` with every ``\\boxed{...}`` (balanced braces) replaced by ``[answer withheld]``."""
    out, i = [], 0
    for m in _BOXED.finditer(text):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        out.append(text[i : m.start()] + "[answer withheld]")
        i = j
    return "".join(out) + text[i:]


def render_content(p: Problem, content: str, max_chars: int = 0) -> str:
    """One corpus problem as a memory item of kind ``content`` (see :data:`CONTENTS`).

    Raises:
        ConfigError: an unknown content kind.
    """
    solution = " ".join(str(p.meta.get("solution") or "").split())
    question = " ".join(p.question.split())
    if content == "worked":
        return worked_example(p.question, p.answer, solution, max_chars)
    if content == "answer_only":
        text = f"Example. Final answer: {p.answer.strip()}. Problem: {question}"
    elif content == "full_solution":
        text = f"Solved example. Problem: {question} Solution: {solution or '(no worked solution in the data)'}"
    elif content == "lesson":
        from got_core.solver._answers import answer_free

        method = answer_free(_strip_boxed(solution), [p.answer], drop_stated=False) if solution else None
        body = method or "work out each quantity the problem defines, then check the result against every condition"
        text = f"Lesson from a solved {p.subject or 'math'} problem (answer withheld). Problem type: {question} Method: {body}"
    else:
        raise ConfigError(f"unknown content {content!r}; choose from {', '.join(CONTENTS)}")
    return text[:max_chars] if max_chars > 0 else text


def _lessons(corpus: Sequence[Problem], content: str, max_chars: int) -> list[Any]:
    from got_core.memory import Lesson

    return [
        Lesson(
            render_content(q, content, max_chars),
            topic_key=f"corpus-{encode_component(q.id, 'problem id')}"[:190],
            source_problem=q.id,
            outcome="success",
            score=1.0,
            meta={"subject": q.subject, "content": content},
        )
        for q in corpus
    ]


def _fewshot(corpus: Sequence[Problem], ids: Sequence[str], seed: int) -> list[Problem]:
    """The three static exemplars: the given ids, else one per subject in a seeded order."""
    by_id = {q.id: q for q in corpus}
    if ids:
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise InvalidInputError(
                f"--fewshot-ids {', '.join(missing)} not in the memory corpus (after the leakage audit)"
            )
        return [by_id[i] for i in ids]
    ordered = sorted(corpus, key=lambda q: hashlib.sha256(f"{seed}\x1f{q.id}".encode()).digest())
    picked: list[Problem] = []
    for q in ordered:
        if q.subject not in {p.subject for p in picked}:
            picked.append(q)
        if len(picked) == 3:
            return picked
    return (picked + [q for q in ordered if q not in picked])[:3]


def _subject_store(subject: str) -> str:
    return "vector_subject." + encode_component(subject or "none", "subject")


def math500_ablations(opts: ExperimentOptions) -> ExperimentResult:
    """Table 6's arms on the same MATH test problems (see the module docstring).

    Raises:
        ConfigError: an unknown arm, no memory corpus, or a bad online start.
        InvalidInputError: a malformed data file, or no corpus left after the leakage audit.
    """
    names = tuple(dict.fromkeys(("none", *(opts.arms or tuple(ABLATION_ARMS)))))
    unknown = [a for a in names if a not in ABLATION_ARMS]
    if unknown:
        raise ConfigError(f"unknown ablation arm(s) {', '.join(unknown)}; choose from {', '.join(ABLATION_ARMS)}")
    if opts.memory_corpus is None:
        raise ConfigError("the ablations need --memory-corpus FILE (MATH-train problems in the MATH-500 JSONL format)")
    if opts.online_start not in ("empty", "corpus"):
        raise ConfigError("--online-start for the ablations is 'empty' or 'corpus'")
    arm, more = resolve_method(opts.method)
    pool = [p for p in load_pool(opts) if p.kind == "math"]
    test = stratified_split(pool, 0, min(opts.m_test, len(pool)), opts.seed).test
    corpus, leakage = leakage_audit(test, load_math500(opts.memory_corpus), opts.leakage_cosine)
    if not corpus:
        raise InvalidInputError("no memory corpus left after the leakage audit; every item duplicates a test problem")
    identity: dict[str, Any] = {
        "arms": list(names),
        "method": opts.method,
        "m_test": opts.m_test,
        "memory_corpus": data_entry(opts.memory_corpus, None),
        "k_retrieve": opts.k_retrieve,
        "online": [opts.online_start, opts.online_verify],
        "example_chars": opts.example_chars,
    }
    pre = begin_run(opts, identity)
    chars = opts.example_chars
    fewshot = _fewshot(corpus, opts.fewshot_ids, opts.seed)
    base_opts = solver_options(opts, pre, **more, lesson_chars=chars or None)
    tasks: list[Task] = []
    stores: dict[str, tuple[str, list[Any]]] = {}  # store name -> (backend, lessons)
    for name in names:
        kind, backend, content = ABLATION_ARMS[name]
        method, options = arm, base_opts
        if name == "sc5":
            method, options = "self_consistency", {**base_opts, "tools": [], "max_steps": 0, "arm_options": {"n": 5}}
        for i, p in enumerate(test):
            memory: dict[str, Any] | None = None
            if kind == "static":
                memory = {
                    "mode": "static",
                    "backend": "static",
                    "lessons": [l.to_dict() for l in _lessons(fewshot, "worked", chars)],
                }
            elif kind == "shared":
                assert backend is not None and content is not None
                store = backend if content == "worked" else f"{backend}_{content}"
                stores.setdefault(store, (backend, _lessons(corpus, content, chars)))
                memory = {"mode": "shared", "backend": backend, "store": store, "path": f"memory/{store}"}
            elif kind == "subject":
                store = _subject_store(p.subject)
                stores.setdefault(
                    store, ("vector", _lessons([q for q in corpus if q.subject == p.subject], "worked", chars))
                )
                memory = {"mode": "shared", "backend": "vector", "store": store, "path": f"memory/{store}"}
            elif kind == "online":
                memory = online_memory(name, "git", i, offer="solution")
            tasks.append(
                Task(
                    experiment="math500_ablations",
                    phase="test",
                    arm=name,
                    problem=asdict(p),
                    method=method,
                    seed=task_seed(opts.seed, p.id),
                    order=i,
                    memory=memory,
                    options=options,
                    extra={"content": content or "—"},
                )
            )
    online_arms = [n for n in names if ABLATION_ARMS[n][0] == "online"]
    start = _lessons(corpus, "worked", chars) if opts.online_start == "corpus" else []
    streams = [
        Stream(n, "git", [t for t in tasks if t.arm == n], verify=opts.online_verify, offer="solution", start=start)
        for n in online_arms
    ]
    memory_arms = [n for n in names if ABLATION_ARMS[n][0] != "none"]
    rerun = next((t for t in tasks if t.arm == "vector"), next((t for t in tasks if t.memory), tasks[0]))
    config = build_config(
        opts,
        "math500_ablations",
        test,
        tasks,
        baseline="none",
        rerun=rerun,
        identity=identity,
        pre=pre,
        protocol={
            "memory_arms": memory_arms,
            "answer_free_memory": False,
            "answer_free_reason": (
                "the memory corpus holds worked solutions with their answers by design (Table 6), "
                "leakage-audited against the test set (config.leakage); the online arm stores the agent's "
                "own verified solutions"
            ),
            "fresh_memory": (
                "read-only post-ingest stores; static few-shot fixed; online: question i sees exactly the "
                "memory after question i-1 (refs/got/online/<arm>)"
            ),
            "same_lessons": False,
            "same_lessons_reason": "each arm's store holds its own content of the memory corpus (Table 6)",
        },
        extra={
            "leakage": leakage,
            "fewshot": [q.id for q in fewshot],
            "online": {"streams": [s.describe() for s in streams]},
        },
    )
    with model_endpoint(opts.spec) as spec:
        prepare_run_dir(opts.out, config, resume=opts.resume)
        for store, (backend, lessons) in stores.items():
            ingest(Path(opts.out), backend, lessons, [], name=store)
        fixed = [t for t in tasks if t.arm not in online_arms]
        records = run_experiment_tasks(opts, spec, fixed, "ablations")
        records += run_streams(streams, opts.out, spec, workers=opts.workers, progress=opts.progress)
    return _report(opts, records, names, online_arms, corpus, leakage, fewshot, pre)


def _report(
    opts: ExperimentOptions,
    records: list[dict[str, Any]],
    names: Sequence[str],
    online_arms: Sequence[str],
    corpus: Sequence[Problem],
    leakage: dict[str, Any],
    fewshot: Sequence[Problem],
    pre: Any,
) -> ExperimentResult:
    from got_core.bench.plots import plot_forest

    def retrieval(arm: str) -> str:
        kind = ABLATION_ARMS[arm][0]
        return {
            "none": "—",
            "static": "fixed 3 exemplars",
            "shared": f"top-{opts.k_retrieve}",
            "subject": f"top-{opts.k_retrieve}, same subject",
            "online": f"top-{opts.k_retrieve}, grows online",
        }[kind]

    base_tokens: dict[str, float] = {}

    def cols(rows: Sequence[Any]) -> list[Any]:
        base_tokens["none"] = next((r.extra["tokens_mean"] for r in rows if r.arm == "none"), 0.0)
        return [
            ("content", lambda r: ABLATION_ARMS[r.arm][2] or "—"),
            ("retrieval", lambda r: retrieval(r.arm)),
            ("tokens/problem", lambda r: f"{r.extra['tokens_mean']:.0f}"),
        ]

    notes = [
        "",
        (
            f"Memory corpus {Path(opts.memory_corpus or '').name}: {leakage['n_corpus']} problems, "
            f"{len(leakage['exact'])} exact and {len(leakage['near'])} near-duplicate (cosine ≥ "
            f"{leakage['threshold']:g}) of a test problem removed, {len(corpus)} kept. Static few-shot: "
            f"{', '.join(q.id for q in fewshot)}. Solver {opts.method}."
        ),
    ]
    if online_arms:
        more, quartile_rows = online_notes(records, online_arms, "none", opts)
        notes += more
    result = finish(
        opts, records, "none", "MATH-500 ablations (Table 6)", arms=list(names), columns=cols, notes=notes, pre=pre
    )
    for bench, rows in result.tables.items():
        if any(r.delta is not None for r in rows):
            result.files["forest_png"] = plot_forest(
                rows, result.run_dir / "forest.png", f"MATH-500 ablations (Fig. 2) — {bench} ({model_label(opts)})"
            )
    result.files["leakage"] = write_jsonl(result.run_dir / "leakage.jsonl", [leakage])
    if online_arms:
        online_files(result, records, online_arms, "none", quartile_rows, opts)
    return result
