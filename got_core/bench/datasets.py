"""Benchmark problems: MATH-500 and GPQA-Diamond loaders and study/test splits (§4 of arXiv 2606.14470).

No copy of either data set ships with the project (GPQA's authors ask that its
questions stay out of plain-text repositories). Point the loaders at local
files in the public release formats, or load from the Hugging Face hub when
online:

- MATH-500: JSONL, one object a line with ``problem``, ``solution``, ``answer``,
  ``subject``, ``level``, ``unique_id``.
- GPQA: CSV with ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``,
  ``Subdomain`` and, where present, ``High-level domain`` and ``Record ID``.

GPQA's options are shuffled by a recorded seed: the order depends only on
``(seed, record id)`` — not on row order or Python version — and the
permutation is stored in ``Problem.meta`` so a run can be audited (Table 2).

§4's controlled transfer needs study and test problems that are disjoint and
drawn alike from every domain: :func:`stratified_split` and the zero-overlap
check :func:`audit_overlap`. A separate memory corpus (Table 6: MATH-train) is
checked against the test set by :func:`leakage_audit`.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from got_core.errors import ConfigError, InvalidInputError, MissingExtraError, RemoteError

__all__ = [
    "LETTERS",
    "Problem",
    "Split",
    "audit_overlap",
    "format_question",
    "leakage_audit",
    "load_from_hub",
    "load_gpqa",
    "load_math500",
    "normalize_question",
    "stratified_split",
]

#: Option letters in display order.
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_MATH_FIELDS = ("problem", "answer", "subject", "level", "unique_id")
_GPQA_COLUMNS = (
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
    "Subdomain",
)

# Hub names: short alias -> (dataset id, config, default split).
_HUB = {
    "math500": ("HuggingFaceH4/MATH-500", None, "test"),
    "gpqa_diamond": ("Idavidrein/gpqa", "gpqa_diamond", "train"),
}
_HUB_ALIASES = {
    "huggingfaceh4/math-500": "math500",
    "math-500": "math500",
    "idavidrein/gpqa": "gpqa_diamond",
    "gpqa": "gpqa_diamond",
    "gpqa-diamond": "gpqa_diamond",
}


@dataclass(frozen=True)
class Problem:
    """One benchmark problem, the same shape for both data sets.

    Attributes:
        id: stable identifier (MATH ``unique_id``; GPQA ``Record ID`` or a content hash).
        question: the problem statement (for MCQ, the stem without the options).
        answer: the gold answer (MATH: the LaTeX answer; MCQ: the correct option's text).
        kind: ``"math"`` (free-form, checked with math-verify) or ``"mcq"`` (a letter).
        choices: the options in display order (MCQ only; empty for MATH).
        gold_letter: the correct option's letter in display order (MCQ only).
        subject: fine-grained topic (MATH ``subject``; GPQA ``Subdomain``).
        domain: the stratum for splits (MATH ``subject``; GPQA ``High-level domain``,
            or the subdomain when the file has no such column).
        level: MATH difficulty 1–5; ``None`` for GPQA.
        meta: everything else worth keeping (solution, shuffle seed and permutation, source).

    A ``Problem`` holds lists and dicts, so it is not hashable: key collections by ``id``.
    """

    id: str
    question: str
    answer: str
    kind: Literal["math", "mcq"]
    choices: list[str] = field(default_factory=list)
    gold_letter: str | None = None
    subject: str = ""
    domain: str = ""
    level: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Split:
    """Disjoint study and test problems (§4 controlled transfer).

    Attributes:
        study: problems the agent studies (lessons are distilled from these).
        test: held-out problems every arm is scored on.
        seed: the seed the split was drawn with.
        key: the ``Problem`` attribute the split was stratified on.
        strata: per stratum, ``(n_study, n_test)``.
        dropped: ids left out because their normalized question duplicated another's.
    """

    study: list[Problem]
    test: list[Problem]
    seed: int
    key: str = "domain"
    strata: dict[str, tuple[int, int]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)


# --- parsing one record ----------------------------------------------------------------------


def _text(row: Mapping[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{where}: field {name!r} is missing or empty; fix or drop that record")
    return value.strip()


def _level(value: Any, where: str) -> int:
    # MATH-500 stores an int; the original MATH release writes "Level 3".
    if isinstance(value, bool):
        value = None
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(?:level\s*)?(\d+)\s*", value, re.IGNORECASE)
        value = int(m.group(1)) if m else None
    if not isinstance(value, int) or not 1 <= value <= 5:
        raise InvalidInputError(f"{where}: field 'level' must be an integer 1-5, not {value!r}")
    return value


def _math_problem(row: Any, where: str, origin: str) -> Problem:
    if not isinstance(row, dict):
        raise InvalidInputError(f"{where}: expected a JSON object, got {type(row).__name__}")
    subject = _text(row, "subject", where)
    solution = row.get("solution")
    return Problem(
        id=_text(row, "unique_id", where),
        question=_text(row, "problem", where),
        answer=_text(row, "answer", where),
        kind="math",
        subject=subject,
        domain=subject,
        level=_level(row.get("level"), where),
        meta={"solution": solution if isinstance(solution, str) else "", "source": origin},
    )


def _permutation(seed: int, record_id: str, n: int) -> list[int]:
    """Display order of ``n`` options as original indices; original index 0 is the correct one.

    Sorting by a SHA-256 of ``(seed, record id, index)`` is deterministic per
    ``(seed, record id)``, independent of row order and of ``random``'s algorithm.
    """

    def rank(i: int) -> bytes:
        return hashlib.sha256(f"{seed}\x1f{record_id}\x1f{i}".encode()).digest()

    return sorted(range(n), key=rank)


def _gpqa_problem(row: Mapping[str, Any], where: str, origin: str, seed: int) -> Problem:
    question = _text(row, "Question", where)
    options = [_text(row, "Correct Answer", where)] + [_text(row, f"Incorrect Answer {i}", where) for i in (1, 2, 3)]
    if len(set(options)) != len(options):
        raise InvalidInputError(f"{where}: two answer options are identical; an MCQ needs four distinct options")
    subdomain = _text(row, "Subdomain", where)
    record_id = (row.get("Record ID") or "").strip() if isinstance(row.get("Record ID"), str) else ""
    if not record_id:
        # A content hash, not a row number: the id survives reordering and filtering.
        record_id = "gpqa-" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:16]
    high = row.get("High-level domain")
    domain = high.strip() if isinstance(high, str) and high.strip() else subdomain
    perm = _permutation(seed, record_id, len(options))
    explanation = row.get("Explanation")
    return Problem(
        id=record_id,
        question=question,
        answer=options[0],
        kind="mcq",
        choices=[options[i] for i in perm],
        gold_letter=LETTERS[perm.index(0)],
        subject=subdomain,
        domain=domain,
        level=None,
        meta={
            "shuffle_seed": seed,
            # permutation[k] = original index shown at letter k (0 = correct, 1-3 = incorrect 1-3).
            "permutation": perm,
            "explanation": explanation.strip() if isinstance(explanation, str) else "",
            "source": origin,
        },
    )


def _check_limit(limit: Any) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInputError(f"limit must be a non-negative integer or None, not {limit!r}")


def _check_unique(problems: list[Problem]) -> None:
    seen: dict[str, str] = {}
    for p in problems:
        where = p.meta.get("source", "")
        if p.id in seen:
            raise InvalidInputError(
                f"{where}: duplicate problem id {p.id!r} (first at {seen[p.id]}); ids must be unique"
            )
        seen[p.id] = where


def _open_text(path: str | os.PathLike[str]) -> tuple[Path, str]:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InvalidInputError(f"{p}: no such file; pass the path of a local copy of the data set") from None
    except OSError as exc:
        raise InvalidInputError(f"{p}: cannot read ({exc.strerror or exc})") from None
    try:
        return p, raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InvalidInputError(f"{p}, line {line}: not valid UTF-8; re-save the file as UTF-8") from None


# --- loaders ---------------------------------------------------------------------------------


def load_math500(path: str | os.PathLike[str] | None, limit: int | None = None) -> list[Problem]:
    """Load MATH-500 problems from a JSONL file in the public release format.

    Args:
        path: a ``.jsonl`` file (one object a line: problem, solution, answer,
            subject, level, unique_id); ``None`` loads ``HuggingFaceH4/MATH-500``
            from the hub via :func:`load_from_hub` (online only).
        limit: keep only the first ``limit`` problems of the file.

    Returns:
        ``Problem`` objects of kind ``"math"``, in file order.

    Raises:
        InvalidInputError: unreadable file, bad JSON, a missing/empty field or a
            duplicate id; the message names the file and line.
        ConfigError / MissingExtraError / RemoteError: from :func:`load_from_hub` when ``path`` is None.
    """
    _check_limit(limit)
    if path is None:
        return load_from_hub("math500", limit=limit)
    p, text = _open_text(path)
    problems: list[Problem] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if limit is not None and len(problems) >= limit:
            break
        if not line.strip():
            continue
        where = f"{p}, line {lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{where}: not valid JSON ({exc.msg}); each line must be one JSON object") from None
        problems.append(_math_problem(row, where, f"{p.name}:{lineno}"))
    if not problems and limit != 0:
        raise InvalidInputError(f"{p}: no problems in the file")
    _check_unique(problems)
    return problems


def load_gpqa(path: str | os.PathLike[str], seed: int = 0, limit: int | None = None) -> list[Problem]:
    """Load GPQA multiple-choice problems from a CSV in the public release format.

    The four options are shuffled per record by ``seed`` (see the module docstring);
    ``Problem.meta["permutation"]`` and ``["shuffle_seed"]`` record the order.

    Args:
        path: a ``.csv`` with columns ``Question``, ``Correct Answer``,
            ``Incorrect Answer 1..3``, ``Subdomain`` (``High-level domain``,
            ``Record ID``, ``Explanation`` are used when present; others are ignored).
        seed: the option-shuffle seed, recorded in every problem.
        limit: keep only the first ``limit`` problems of the file.

    Returns:
        ``Problem`` objects of kind ``"mcq"``, in file order.

    Raises:
        InvalidInputError: unreadable file, missing columns, malformed CSV, an
            empty required cell, duplicate options or ids; the message names the
            file and line.
    """
    _check_limit(limit)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidInputError(f"seed must be an integer, not {seed!r}")
    p, text = _open_text(path)
    reader = csv.DictReader(text.splitlines(keepends=True))
    try:
        header = reader.fieldnames or []
    except csv.Error as exc:
        raise InvalidInputError(f"{p}, line 1: malformed CSV header ({exc})") from None
    missing = [c for c in _GPQA_COLUMNS if c not in header]
    if missing:
        raise InvalidInputError(
            f"{p}, line 1: missing column(s) {', '.join(map(repr, missing))}; expected GPQA's public CSV format"
        )
    problems: list[Problem] = []
    start = 2
    while limit is None or len(problems) < limit:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InvalidInputError(f"{p}, line {reader.line_num}: malformed CSV ({exc})") from None
        line, start = start, reader.line_num + 1
        where = f"{p}, line {line}"
        if None in row:
            raise InvalidInputError(f"{where}: more cells than header columns; check quoting")
        problems.append(_gpqa_problem(row, where, f"{p.name}:{line}", seed))
    if not problems and limit != 0:
        raise InvalidInputError(f"{p}: no problems in the file")
    _check_unique(problems)
    return problems


def load_from_hub(name: str, split: str | None = None, *, seed: int = 0, limit: int | None = None) -> list[Problem]:
    """Load MATH-500 or GPQA-Diamond from the Hugging Face hub (online only).

    Args:
        name: ``"math500"`` (``HuggingFaceH4/MATH-500``) or ``"gpqa_diamond"``
            (``Idavidrein/gpqa``, config ``gpqa_diamond``; gated: accept its terms
            and log in with ``huggingface-cli login`` first).
        split: the split; defaults to ``"test"`` for MATH-500, ``"train"`` for GPQA.
        seed: the option-shuffle seed (GPQA only).
        limit: keep only the first ``limit`` problems.

    Returns:
        ``Problem`` objects, as the file loaders build them.

    Raises:
        ConfigError: unknown name, or offline mode (``HF_HUB_OFFLINE`` /
            ``HF_DATASETS_OFFLINE``) is set — use a local file then.
        MissingExtraError: the ``datasets`` package is not installed.
        RemoteError: the hub could not be reached or refused the download.
        InvalidInputError: a record is malformed.
    """
    _check_limit(limit)
    key = name.strip().lower() if isinstance(name, str) else ""
    key = _HUB_ALIASES.get(key, key)
    if key not in _HUB:
        raise ConfigError(f"unknown data set {name!r}; choose one of {', '.join(sorted(_HUB))}")
    # Decide "offline" before importing anything, so the guard never touches the network.
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            raise ConfigError(
                f"cannot load {name!r} from the hub: {var} is set (offline); "
                "pass a local file to load_math500/load_gpqa instead"
            )
    try:
        import datasets
    except ImportError as exc:
        raise MissingExtraError("loading benchmarks from the Hugging Face hub", "bench", exc) from None
    repo_id, config, default_split = _HUB[key]
    split = split or default_split
    try:
        rows: Iterable[Mapping[str, Any]] = datasets.load_dataset(repo_id, config, split=split)
    except Exception as exc:  # the hub client raises many unrelated types
        raise RemoteError(f"could not load {repo_id} ({split}) from the hub: {exc}") from exc
    problems: list[Problem] = []
    for i, row in enumerate(rows):
        if limit is not None and len(problems) >= limit:
            break
        where = f"hub:{repo_id}:{split}, row {i}"
        if key == "math500":
            problems.append(_math_problem(dict(row), where, where))
        else:
            problems.append(_gpqa_problem(row, where, where, seed))
    _check_unique(problems)
    return problems


def format_question(problem: Problem) -> str:
    """The question as a model sees it: MCQ options follow as ``(A) …`` lines.

    Args:
        problem: any ``Problem``.

    Returns:
        The question text; for MCQ, with the options in display order.
    """
    if problem.kind != "mcq":
        return problem.question
    lines = [f"({LETTERS[i]}) {c}" for i, c in enumerate(problem.choices)]
    return problem.question + "\n\n" + "\n".join(lines)


# --- splits ----------------------------------------------------------------------------------

_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalize_question(text: str) -> str:
    """Canonical form for overlap checks: NFKC, case-folded, alphanumerics separated by single spaces."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _NON_ALNUM.sub(" ", folded).strip()


def _apportion(total: int, capacity: dict[str, int], weight: dict[str, int]) -> dict[str, int]:
    """Largest-remainder apportionment of ``total`` by ``weight``, never above ``capacity``."""
    wsum = sum(weight.values())
    quota = {g: min(capacity[g], total * weight[g] // wsum) for g in weight}
    left = total - sum(quota.values())
    # Remainder order: largest fractional share first, then name, so ties are deterministic.
    order = sorted(weight, key=lambda g: (-((total * weight[g]) % wsum), g))
    while left > 0:
        progressed = False
        for g in order:
            if left and quota[g] < capacity[g]:
                quota[g] += 1
                left -= 1
                progressed = True
        if not progressed:  # pragma: no cover - callers check total <= sum(capacity)
            raise InvalidInputError("not enough problems to fill the split")
    return quota


def stratified_split(problems: Sequence[Problem], n_study: int, n_test: int, seed: int, key: str = "domain") -> Split:
    """Deterministic, stratified, disjoint study/test split (§4).

    Each stratum (value of ``key``) gives study and test problems in proportion
    to its size (largest remainder). Within a stratum the order is a seeded
    hash of the problem id, so the split depends only on ``(problems, seed)``,
    not on input order. Problems whose normalized question duplicates another's
    are dropped (the smaller id is kept) so study and test cannot share text.

    Args:
        problems: the pool; ids must be unique.
        n_study: number of study problems.
        n_test: number of test problems.
        seed: the split seed.
        key: the ``Problem`` attribute to stratify on (``"domain"`` by default).

    Returns:
        A :class:`Split`; ``audit_overlap(split) == 0`` by construction.

    Raises:
        InvalidInputError: duplicate ids, negative sizes, or more problems asked
            for than the pool holds after de-duplication.
    """
    for name, value in (("n_study", n_study), ("n_test", n_test)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{name} must be a non-negative integer, not {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidInputError(f"seed must be an integer, not {seed!r}")
    if key not in Problem.__dataclass_fields__ or key in ("meta", "choices"):
        raise InvalidInputError(f"cannot stratify on {key!r}; use a Problem field such as 'domain' or 'subject'")
    pool = list(problems)
    ids = [p.id for p in pool]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvalidInputError(f"duplicate problem id {dup!r} in the pool; ids must be unique")
    by_text: dict[str, Problem] = {}
    dropped: list[str] = []
    for p in sorted(pool, key=lambda q: q.id):
        norm = normalize_question(p.question)
        if norm in by_text:
            dropped.append(p.id)
        else:
            by_text[norm] = p
    unique = list(by_text.values())
    if n_study + n_test > len(unique):
        raise InvalidInputError(
            f"asked for {n_study} study + {n_test} test problems but the pool has {len(unique)} "
            f"distinct problems; ask for fewer"
        )

    def order(p: Problem) -> bytes:
        return hashlib.sha256(f"{seed}\x1f{p.id}".encode()).digest()

    strata: dict[str, list[Problem]] = defaultdict(list)
    for p in unique:
        strata[str(getattr(p, key, ""))].append(p)
    for members in strata.values():
        members.sort(key=order)
    sizes = {g: len(m) for g, m in strata.items()}
    study_q = _apportion(n_study, sizes, sizes)
    test_q = _apportion(n_test, {g: sizes[g] - study_q[g] for g in sizes}, sizes)
    study = [p for g in strata for p in strata[g][: study_q[g]]]
    test = [p for g in strata for p in strata[g][study_q[g] : study_q[g] + test_q[g]]]
    return Split(
        study=sorted(study, key=order),
        test=sorted(test, key=order),
        seed=seed,
        key=key,
        strata={g: (study_q[g], test_q[g]) for g in sorted(strata)},
        dropped=sorted(dropped),
    )


def audit_overlap(split: Split) -> int:
    """Count test problems that also appear in the study set (the zero-overlap audit).

    A test problem overlaps when its id, or its normalized question text
    (:func:`normalize_question`), equals a study problem's.

    Args:
        split: the split to audit.

    Returns:
        The number of overlapping test problems; 0 when study and test are disjoint.
    """
    ids = {p.id for p in split.study}
    texts = {normalize_question(p.question) for p in split.study}
    return sum(1 for p in split.test if p.id in ids or normalize_question(p.question) in texts)


def leakage_audit(
    test: Sequence[Problem], corpus: Sequence[Problem], threshold: float = 0.95, embedder: Any = None
) -> tuple[list[Problem], dict[str, Any]]:
    """Remove corpus problems that leak a test problem: same normalised text, or a near-duplicate.

    A corpus problem leaks when its id or normalised question (:func:`normalize_question`)
    equals a test problem's, or when its MiniLM cosine to a test problem is at least
    ``threshold`` (a reworded copy). Table 6 retrieves from MATH-train; this is the audit
    that the retrieved problems are not the test problems.

    Args:
        test: the test problems.
        corpus: the memory corpus.
        threshold: the near-duplicate cosine (``> 1`` turns the cosine check off).
        embedder: an embedder (MiniLM by default).

    Returns:
        ``(kept, report)``: the corpus without leaking problems (in order), and
        ``{"n_corpus", "n_kept", "threshold", "exact": [{corpus, test}],
        "near": [{corpus, test, cosine}]}``.
    """
    test_ids = {p.id: p.id for p in test}
    texts = {normalize_question(p.question): p.id for p in test}
    exact, near, leaking = [], [], set()
    for q in corpus:
        hit = test_ids.get(q.id) or texts.get(normalize_question(q.question))
        if hit is not None:
            exact.append({"corpus": q.id, "test": hit})
            leaking.add(q.id)
    rest = [q for q in corpus if q.id not in leaking]
    if rest and test and threshold <= 1.0:
        from got_core.memory.embeddings import cosine_matrix

        sims = cosine_matrix([q.question for q in rest], [p.question for p in test], embedder)
        for i, q in enumerate(rest):
            j = int(sims[i].argmax())
            if float(sims[i, j]) >= threshold:
                near.append({"corpus": q.id, "test": test[j].id, "cosine": round(float(sims[i, j]), 4)})
                leaking.add(q.id)
    kept = [q for q in corpus if q.id not in leaking]
    report = {
        "n_corpus": len(corpus),
        "n_kept": len(kept),
        "threshold": threshold,
        "exact": exact,
        "near": near,
    }
    return kept, report
