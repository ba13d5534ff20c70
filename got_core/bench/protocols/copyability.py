"""§5 copyability sweep as designed (Table 7, Fig. 3 of arXiv 2606.14470).

One worked example is injected per test question, into a fresh memory, at five similarity
tiers built *by construction*:

* ``identical`` — the test problem itself, with its gold solution and answer;
* ``paraphrase`` — the same problem reworded by the served model (``paraphrase="model"``),
  or read from a file (``"file"``); the template rewrite is a labelled fallback only;
* ``method_band`` — a problem of the same subject whose MiniLM cosine to the test problem
  lies in the method band [0.60, 0.85] (closest to the paper's typical 0.72) and whose
  answer differs: same method, different numbers;
* ``same_subject`` — same subject, below the band, at the paper's typical similarity (0.22);
* ``unrelated`` — another subject, at the paper's typical similarity (0.12).

The non-identical tiers come from a separate corpus (``tier_corpus``, MATH-train format);
without one they come from the rest of the pool, and the table says so. ``levels=(4, 5)``
keeps the paper's Level 4–5 test problems. The table reports per tier the mean cosine,
how many injected answers would be graded correct if copied (the copyable answers), and
how many tiers fell back; Δ is also pooled by cosine bin with the paper's edges. The
example goes in whole (``example_chars`` caps it). ``tiers.jsonl`` and ``sweep.png`` (Fig. 3:
tier-mean Δ against tier-mean cosine, CIs, τ shaded) can overlay several runs
(``overlay``: e.g. a 7B and a 32B run).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from got_core.bench.datasets import Problem, leakage_audit, load_math500, normalize_question, stratified_split
from got_core.bench.protocols.common import (
    ExperimentOptions,
    ExperimentResult,
    begin_run,
    build_config,
    check_backends,
    data_entry,
    finish,
    load_pool,
    model_label,
    resolve_method,
    run_experiment_tasks,
    solver_options,
    write_jsonl,
)
from got_core.bench.report import cosine_bins
from got_core.bench.runner import ModelSpec, Task, model_endpoint, open_central, prepare_run_dir, task_seed
from got_core.errors import ConfigError, InvalidInputError
from got_core.types import canonical_json

__all__ = [
    "PARAPHRASE_MODES",
    "TIERS",
    "TIER_BANDS",
    "build_tiers",
    "copyability_sweep",
    "load_paraphrases",
    "model_paraphrases",
    "paraphrase",
    "paraphrase_ok",
    "worked_example",
]

#: §5's similarity tiers, from "the same problem" to "nothing in common".
TIERS = ("identical", "paraphrase", "method_band", "same_subject", "unrelated")
#: Per tier: the cosine band a constructed example must lie in and the typical cosine the
#: paper reports (the pick is the candidate closest to it). Identical and paraphrase are
#: the problem itself; their bands are what the table is checked against.
TIER_BANDS: dict[str, tuple[float, float, float]] = {
    "identical": (0.99, 1.0, 1.0),
    "paraphrase": (0.80, 1.0, 0.95),
    "method_band": (0.60, 0.85, 0.72),
    "same_subject": (0.10, 0.45, 0.22),
    "unrelated": (-0.10, 0.30, 0.12),
}
PARAPHRASE_MODES = ("model", "file", "template")
PARAPHRASE_REF = "refs/got/paraphrases"
_PARAPHRASE_PROMPT = (
    "Rewrite the following math problem in different words. Keep every number, variable and "
    "mathematical expression exactly as written, keep what is asked, and do not solve it.\n\n"
    "Problem: {question}\n\nReply with one line:\nParaphrase: <the reworded problem>"
)

_REWRITES = (
    (r"^What is\b", "Determine"),
    (r"^Find\b", "Determine"),
    (r"^How many\b", "Count how many"),
    (r"^Compute\b", "Evaluate"),
    (r"^Which\b", "Identify which"),
    (r"\bthe value of\b", "the value of"),
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def paraphrase(question: str) -> str:
    """The template rewrite of ``question`` — the paraphrase tier's labelled fallback.

    The opening verb is swapped ("What is" → "Determine", "How many" → "Count how many"…)
    and a framing sentence is prepended; the mathematics is untouched.
    """
    text = " ".join(question.split())
    for pattern, repl in _REWRITES:
        text = re.sub(pattern, repl, text, count=1)
    return "Consider the following problem. " + text


def paraphrase_ok(original: str, candidate: str | None) -> str | None:
    """Why ``candidate`` is not a usable paraphrase of ``original`` (``None``: it is).

    A paraphrase must be non-empty, differ from the original (normalised), keep every number
    of the original, and be of comparable length (0.5× to 3×).
    """
    text = " ".join((candidate or "").split())
    if not text:
        return "empty"
    if normalize_question(text) == normalize_question(original):
        return "unchanged"
    missing = sorted(set(_NUMBER.findall(original)) - set(_NUMBER.findall(text)))
    if missing:
        return f"dropped the number(s) {', '.join(missing[:3])}"
    if not 0.5 <= len(text) / max(1, len(" ".join(original.split()))) <= 3.0:
        return "length far from the original's"
    return None


def worked_example(problem_text: str, answer: str, solution: str, max_chars: int = 0) -> str:
    """The injected memory of the sweep: a worked example, answer first (§5), whole by default.

    Args:
        problem_text, answer, solution: the example.
        max_chars: cut the text to this many characters (0: no cap).
    """
    sol = " ".join((solution or "").split()) or "(no worked solution in the data)"
    text = f"Worked example. Final answer: {answer.strip()}. Problem: {' '.join(problem_text.split())} Solution: {sol}"
    return text[:max_chars] if max_chars > 0 else text


def _solution(p: Problem) -> str:
    return str(p.meta.get("solution") or p.meta.get("explanation") or "")


def load_paraphrases(path: str | Path) -> dict[str, str]:
    """Read ``{"id": ..., "paraphrase": ...}`` lines (JSONL, at most 16 MiB).

    Raises:
        InvalidInputError: unreadable, too large, or a malformed line.
    """
    p = Path(path)
    try:
        if p.stat().st_size > 16 * 1024 * 1024:
            raise InvalidInputError(f"{p}: over 16 MiB; a paraphrase file holds one line per test problem")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{p}: cannot read the paraphrase file ({exc})") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise InvalidInputError(f"{p}, line {n}: not JSON") from None
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("id"), str)
            or not isinstance(row.get("paraphrase"), str)
        ):
            raise InvalidInputError(f'{p}, line {n}: expected {{"id": str, "paraphrase": str}}')
        out[row["id"]] = row["paraphrase"]
    return out


def model_paraphrases(test: Sequence[Problem], spec: ModelSpec, run_dir: Path, seed: int) -> dict[str, str]:
    """Ask the served model for one paraphrase per test problem (temperature 0, seeded), once per run.

    The replies are committed to ``central.git`` (``refs/got/paraphrases``) before any task
    runs; a resumed run reads them back instead of asking again.

    Returns:
        ``{problem id: raw paraphrase}`` (empty text where the model gave nothing usable).
    """
    from got_core.errors import ModelError
    from got_core.solver.openai_compat import OpenAICompatibleModel

    with open_central(run_dir) as central:
        tip = central.tip(PARAPHRASE_REF)
        if tip is not None:
            stored = json.loads(central.read_file(tip, "paraphrases.json"))
            if all(p.id in stored for p in test):
                return {p.id: stored[p.id] for p in test}
        model = OpenAICompatibleModel(
            spec.base_url, spec.model, api_key=spec.api_key, max_tokens=max(256, spec.max_tokens), timeout=spec.timeout
        )
        out: dict[str, str] = {}
        for i, p in enumerate(test):
            prompt = _PARAPHRASE_PROMPT.format(question=" ".join(p.question.split()))
            try:
                raw = model.complete([{"role": "user", "content": prompt}], temperature=0.0, seed=seed + i).text or ""
            except ModelError:
                raw = ""
            m = re.search(r"(?is)paraphrase\s*:\s*(.+)", raw)
            out[p.id] = " ".join((m.group(1) if m else raw).split())
        central.commit_files(
            PARAPHRASE_REF,
            {"paraphrases.json": canonical_json(out)},
            f"paraphrases of {len(out)} test problems by {spec.model} (temperature 0)\n",
        )
        return out


def _answers_match(test: Problem, answer: str) -> bool:
    """Would ``answer``, copied, be graded correct on ``test``? (the copyable-answer rule)."""
    import logging

    from got_core.bench.checking import check_answer

    # math-verify warns on every check that its signal timeouts are off (checking runs its own).
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    if test.kind == "mcq":
        return " ".join(answer.split()).casefold() == " ".join(test.answer.split()).casefold()
    return check_answer(test, "\\boxed{" + answer.strip() + "}")


def _pick(
    candidates: list[int],
    cos: Sequence[float],
    corpus: Sequence[Problem],
    band: tuple[float, float, float],
    test: Problem,
) -> tuple[int | None, str]:
    """The candidate in the band closest to its target whose answer differs; else a labelled fallback."""
    low, high, target = band
    ranked = sorted(candidates, key=lambda j: (abs(cos[j] - target), corpus[j].id))
    in_band = [j for j in ranked if low <= cos[j] <= high]
    for j in in_band:
        if not _answers_match(test, corpus[j].answer):
            return j, ""
    for j in ranked:
        if not _answers_match(test, corpus[j].answer):
            return j, "fallback: no candidate in the band with another answer; the closest to the target"
    return (ranked[0], "fallback: every candidate has the same answer") if ranked else (None, "fallback: no candidate")


def build_tiers(
    test: Sequence[Problem],
    corpus: Sequence[Problem],
    embedder: Any = None,
    *,
    paraphrases: Mapping[str, str] | None = None,
    paraphrase_source: str = "template",
    bands: Mapping[str, tuple[float, float, float]] = TIER_BANDS,
) -> dict[str, dict[str, dict[str, Any]]]:
    """The worked example of every tier for every test problem, with its MiniLM cosine.

    Args:
        test: the test problems.
        corpus: where the method-band, same-subject and unrelated examples come from
            (problems equal to a test problem after normalisation are never used).
        embedder: an embedder for the cosines (MiniLM by default).
        paraphrases: ``{test id: paraphrase}`` (model or file); a missing or unusable one
            falls back to :func:`paraphrase`, labelled.
        paraphrase_source: ``model`` or ``file`` (where ``paraphrases`` came from).
        bands: :data:`TIER_BANDS` or another ``{tier: (low, high, target)}``.

    Returns:
        ``{test id: {tier: {"source_id", "problem", "answer", "solution", "cosine",
        "copyable", "fallback", "source"}}}`` (``fallback`` is ``""`` or why).

    Raises:
        InvalidInputError: an empty corpus.
    """
    from got_core.memory.embeddings import cosine_matrix

    texts = {normalize_question(p.question) for p in test}
    pool = [q for q in corpus if normalize_question(q.question) not in texts]
    if not pool:
        raise InvalidInputError("the sweep needs a corpus of problems other than the test problems")
    para, para_src, para_why = [], [], []
    for p in test:
        given = (paraphrases or {}).get(p.id)
        why = paraphrase_ok(p.question, given) if given is not None else "none given"
        para.append(" ".join(str(given).split()) if why is None else paraphrase(p.question))
        if paraphrase_source == "template":
            para_src.append("template rewrite (asked for)")
            para_why.append("")
        else:
            para_src.append(paraphrase_source if why is None else "template rewrite")
            para_why.append("" if why is None else f"fallback: the {paraphrase_source} paraphrase was {why}")
    sims = cosine_matrix(
        [p.question for p in test], [q.question for q in pool] + para + [p.question for p in test], embedder
    )
    n = len(pool)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for ti, p in enumerate(test):
        cos = [round(float(sims[ti, j]), 4) for j in range(n)]
        same = [j for j, q in enumerate(pool) if q.subject == p.subject and q.kind == p.kind]
        other = [j for j, q in enumerate(pool) if q.subject != p.subject]
        tiers: dict[str, dict[str, Any]] = {
            "identical": {
                "source_id": p.id,
                "problem": p.question,
                "cosine": round(float(sims[ti, n + len(test) + ti]), 4),
                "fallback": "",
                "source": "the test problem",
            },
            "paraphrase": {
                "source_id": p.id,
                "problem": para[ti],
                "cosine": round(float(sims[ti, n + ti]), 4),
                "fallback": para_why[ti],
                "source": para_src[ti],
            },
        }
        for t in tiers.values():
            t.update(answer=p.answer, solution=_solution(p), copyable=True)
        mb, why_mb = _pick(same, cos, pool, bands["method_band"], p)
        ss, why_ss = _pick(
            [j for j in same if j != mb and cos[j] < bands["method_band"][0]] or [j for j in same if j != mb],
            cos,
            pool,
            bands["same_subject"],
            p,
        )
        un, why_un = _pick(other, cos, pool, bands["unrelated"], p)
        for tier, j, why, relation in (
            ("method_band", mb, why_mb, "same subject"),
            ("same_subject", ss, why_ss, "same subject"),
            ("unrelated", un, why_un, "another subject"),
        ):
            if j is None:  # no problem of that relation at all: the nearest-to-target of the rest
                rest = [k for k in range(n) if k not in (mb, ss)]
                j, why = _pick(rest or list(range(n)), cos, pool, bands[tier], p)
                why = f"fallback: no problem of {relation} in the corpus"
            assert j is not None
            q = pool[j]
            tiers[tier] = {
                "source_id": q.id,
                "problem": q.question,
                "answer": q.answer,
                "solution": _solution(q),
                "cosine": cos[j],
                "copyable": _answers_match(p, q.answer),
                "fallback": why,
                "source": f"corpus, {relation}",
            }
        out[p.id] = tiers
    return out


def _tier_rows(records: Sequence[dict[str, Any]], rows: Sequence[Any], label: str) -> list[dict[str, Any]]:
    by_arm = {r.arm: r for r in rows}
    out = []
    for tier in TIERS:
        mine = [r for r in records if r["arm"] == tier and r.get("phase") == "test"]
        row = by_arm.get(tier)
        if not mine or row is None:
            continue
        d = row.delta
        extra = [r.get("extra") or {} for r in mine]
        out.append(
            {
                "label": label,
                "tier": tier,
                "n": len(mine),
                "mean_cosine": round(sum(float(e["cosine"]) for e in extra) / len(extra), 4),
                "copyable": sum(1 for e in extra if e.get("copyable")),
                "fallbacks": sum(1 for e in extra if e.get("fallback")),
                "accuracy": row.accuracy.acc,
                "delta": d.delta if d else None,
                "delta_low": d.low if d else None,
                "delta_high": d.high if d else None,
                "significant": d.significant if d else None,
            }
        )
    return out


def _read_overlay(run_dir: Path) -> tuple[str, list[dict[str, Any]]]:
    path = Path(run_dir) / "tiers.jsonl"
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise InvalidInputError(
            f"--overlay {run_dir}: no readable tiers.jsonl ({exc}); pass a sweep's run directory"
        ) from None
    label = str(rows[0].get("label") or Path(run_dir).name) if rows else Path(run_dir).name
    return label, rows


def copyability_sweep(opts: ExperimentOptions) -> ExperimentResult:
    """§5 copyability sweep (see the module docstring).

    Raises:
        ConfigError: an unknown paraphrase mode, or ``file`` without a file.
        InvalidInputError: no test problems (e.g. none of the asked levels), a bad corpus.
    """
    if opts.paraphrase not in PARAPHRASE_MODES:
        raise ConfigError(f"unknown --paraphrase {opts.paraphrase!r}; choose from {', '.join(PARAPHRASE_MODES)}")
    if opts.paraphrase == "file" and opts.paraphrase_file is None:
        raise ConfigError("--paraphrase file needs --paraphrase-file FILE (JSONL lines {id, paraphrase})")
    for path in opts.overlay:
        _read_overlay(path)  # refuse a bad overlay before any model call
    arm, more = resolve_method(opts.method)
    pool = load_pool(opts)
    test = stratified_split(pool, 0, opts.m_test, opts.seed).test
    if opts.tier_corpus is not None:
        # A near-copy of a test problem in the corpus would be an identical tier in disguise.
        corpus, leakage = leakage_audit(test, load_math500(opts.tier_corpus), opts.leakage_cosine)
    else:
        corpus, leakage = list(pool), None
    # The first real backend holds the example ("none" would silently inject nothing).
    backend = next((b for b in opts.backends if b != "none"), "vector")
    check_backends([backend])
    edges = (-1.0, *sorted(opts.bin_edges), 1.0001)
    identity: dict[str, Any] = {
        "backend": backend,
        "method": opts.method,
        "m_test": opts.m_test,
        "levels": list(opts.levels or []),
        "paraphrase": opts.paraphrase,
        "tier_corpus": data_entry(opts.tier_corpus, None),
        "example_chars": opts.example_chars,
    }
    pre = begin_run(opts, identity)
    with model_endpoint(opts.spec) as spec:
        if opts.paraphrase == "model":
            paras: dict[str, str] | None = model_paraphrases(test, spec, Path(opts.out), opts.seed)
        elif opts.paraphrase == "file":
            assert opts.paraphrase_file is not None
            paras = load_paraphrases(opts.paraphrase_file)
        else:
            paras = None
        tiers = build_tiers(test, corpus, paraphrases=paras, paraphrase_source=opts.paraphrase)
        options = solver_options(opts, pre, **more, lesson_chars=opts.example_chars or None)
        base: dict[str, Any] = {"experiment": "copyability_sweep", "method": arm, "options": options}
        tasks = [
            Task(
                phase="test",
                arm="none",
                problem=asdict(p),
                seed=task_seed(opts.seed, p.id),
                order=i,
                extra={"tier": "none"},
                **base,
            )
            for i, p in enumerate(test)
        ]
        for tier in TIERS:
            for i, p in enumerate(test):
                t = tiers[p.id][tier]
                lesson = {
                    "text": worked_example(t["problem"], t["answer"], t["solution"], opts.example_chars),
                    "topic_key": "worked-example",
                    "source_problem": t["source_id"],
                    "outcome": "success",
                    "score": 1.0,
                }
                keep = ("source_id", "cosine", "copyable", "fallback", "source")
                tasks.append(
                    Task(
                        phase="test",
                        arm=tier,
                        problem=asdict(p),
                        seed=task_seed(opts.seed, p.id),
                        order=i,
                        memory={"mode": "injected", "backend": backend, "lessons": [lesson]},
                        extra={"tier": tier, **{k: t[k] for k in keep}},
                        **base,
                    )
                )
        rerun = next(t for t in tasks if t.arm == "identical")
        config = build_config(
            opts,
            "copyability_sweep",
            test,
            tasks,
            baseline="none",
            rerun=rerun,
            identity=identity,
            pre=pre,
            protocol={
                "memory_arms": list(TIERS),
                "answer_free_memory": False,
                "answer_free_reason": "the sweep injects a worked example WITH its answer by design (§5)",
                "injects_gold": ["identical", "paraphrase"],
                "fresh_memory": "fresh per question: a new memory holding only the injected example",
            },
            extra={
                "tiers": {"bands": {k: list(v) for k, v in TIER_BANDS.items()}, "bin_edges": list(edges)},
                "leakage": leakage,
            },
        )
        prepare_run_dir(opts.out, config, resume=opts.resume)
        records = run_experiment_tasks(opts, spec, tasks, "sweep")
    return _report(opts, records, edges, corpus_note=_corpus_note(opts, corpus, tiers, leakage), pre=pre)


def _corpus_note(
    opts: ExperimentOptions, corpus: Sequence[Problem], tiers: Mapping[str, Any], leakage: dict[str, Any] | None
) -> str:
    if opts.tier_corpus and leakage:
        removed = len(leakage["exact"]) + len(leakage["near"])
        where = (
            f"tiers from the corpus {Path(opts.tier_corpus).name} ({len(corpus)} problems; {removed} copies "
            f"of a test problem, cosine ≥ {leakage['threshold']:g}, removed)"
        )
    else:
        where = "tiers from the test pool itself (no --tier-corpus)"
    sources = sorted({t["paraphrase"]["source"] for t in tiers.values()})
    levels = f"levels {', '.join(map(str, opts.levels))}" if opts.levels else "all levels"
    cap = f"cut to {opts.example_chars} characters" if opts.example_chars else "whole (not truncated)"
    return f"Test problems: {levels}; {where}; paraphrases: {'; '.join(sources)}; injected example {cap}."


def _report(
    opts: ExperimentOptions, records: list[dict[str, Any]], edges: Sequence[float], *, corpus_note: str, pre: Any
) -> ExperimentResult:
    from got_core.bench.plots import plot_copyability
    from got_core.bench.stats import format_delta_row

    bins = cosine_bins(records, "none", edges, seed=opts.seed, n_resamples=opts.bootstrap)
    notes = [
        "",
        corpus_note,
        "",
        "Pooled by cosine bin (MiniLM, test problem vs injected example):",
        "",
        "| cosine bin | pairs | mean cosine | Δ pp vs none [95% CI] |",
        "|---|---|---|---|",
    ]
    notes += [
        f"| {b.label} | {b.n} | {b.mean_cosine:.3f} | {format_delta_row(b.delta) if b.delta else '—'} |" for b in bins
    ]
    per_tier: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        per_tier.setdefault(r["arm"], []).append(r.get("extra") or {})

    def cols(_rows: Sequence[Any]) -> list[Any]:
        def stat(arm: str, fn: Any) -> str:
            mine = per_tier.get(arm) or []
            return fn(mine) if mine and arm != "none" else "—"

        return [
            ("mean cosine", lambda r: stat(r.arm, lambda e: f"{sum(float(x['cosine']) for x in e) / len(e):.3f}")),
            ("copyable answers", lambda r: stat(r.arm, lambda e: f"{sum(1 for x in e if x.get('copyable'))}/{len(e)}")),
            ("fallbacks", lambda r: stat(r.arm, lambda e: str(sum(1 for x in e if x.get("fallback"))))),
        ]

    result = finish(
        opts,
        records,
        "none",
        "Copyability sweep (§5, Table 7)",
        arms=["none", *TIERS],
        columns=cols,
        notes=notes,
        pre=pre,
    )
    label = model_label(opts)
    mine = _tier_rows(records, result.rows, label)
    result.files["tiers"] = write_jsonl(result.run_dir / "tiers.jsonl", mine)
    result.files["bins"] = write_jsonl(result.run_dir / "bins.jsonl", [b.to_dict() for b in bins])
    runs = [(label, mine)] + [_read_overlay(p) for p in opts.overlay]
    result.files["sweep_png"] = plot_copyability(
        runs, result.run_dir / "sweep.png", tau=opts.tau, title=f"Copyability (Fig. 3): tier-mean Δ vs cosine ({label})"
    )
    return result
