"""Merged memory across agents (§6.3 of arXiv 2606.14470, Table 9 row 11), one command.

Functional phase, as the paper ran it: N worker *processes* clone a central bare
repository, each accumulates lessons over its own domain and pushes them; the
orchestrator merges. Disjoint domains merge with 0 conflicts; K injected
contradictions (a worker writing the opposite lesson on another domain's topic)
surface as K conflicts; the concatenation control keeps all K contradictory pairs
silently. Both lesson layouts run (``--layouts``): ``keyed`` (one file per topic) and
``content`` (one file per lesson text) — the structural caveat: content-hashed files
never conflict, so the K contradictions pass the merge silently.

Accuracy phase, pre-registered (the plan is written to ``preregistration.json`` before
any question is asked): on a mixed-domain test set, the merged memory vs each solo
memory vs the concatenation (and no memory, and the content-layout merge), same
retrieval and the same model for every arm, accuracy with bootstrap CIs and Δ vs the
merged memory with paired-bootstrap CIs.

    python -m got_core.bench.merged_memory --standin --out runs/merged    # = cookbooks/merged_memory.py
    python -m got_core.bench.merged_memory --base-url http://127.0.0.1:8000/v1 --model M --out runs/merged

Writes ``results.json``, ``table.md`` and the repositories (``<layout>/central.git``,
``<layout>/workers/*.git``) under ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from got_core.bench.merged_memory_data import DOMAINS
from got_core.collab import LAYOUTS, LessonConflict, Orchestrator, Worker, lessons_at
from got_core.errors import ConfigError, GotError, InvalidInputError, MergeConflictError
from got_core.memory.base import Lesson
from got_core.memory.git import render_topic_file
from got_core.types import Conflict

__all__ = [
    "RESOLVERS",
    "accuracy_phase",
    "advice_responder",
    "contradictions",
    "load_domains",
    "main",
    "mixed_test_set",
    "parse_letter",
    "prompt",
    "retrieve",
    "run",
    "scenario",
    "score_resolver",
    "worker_main",
]

VERIFIED_SCORE = 0.8  # a worker's own lessons, checked on its own domain
LETTERS = "ABCDEFGH"
_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"what", "which", "with", "when", "does", "this", "that", "their", "from", "about", "into", "have", "kind"}
MAX_DATA_BYTES = 1 << 20
MAX_DOMAINS = 16  # one worker process each
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


# ----------------------------------------------------------------------------- the data
def load_domains(path: str | Path | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Read and check a domains file: ``{domain: {topic: {lesson, contra, questions: [...]}}}``.

    Each question is ``{"q": text, "options": [2..8 texts], "answer": index}``.

    Args:
        path: a JSON file; None: the default domains (:data:`~got_core.bench.merged_memory_data.DOMAINS`).

    Raises:
        InvalidInputError: the file is too large, not JSON, or not of that shape.
    """
    p = Path(path) if path is not None else Path("<default domains>")
    if path is None:
        data: Any = json.loads(json.dumps(DOMAINS))  # a copy, checked like a file
    else:
        try:
            if p.stat().st_size > MAX_DATA_BYTES:
                raise InvalidInputError(f"{p} is over {MAX_DATA_BYTES} bytes; a domains file is small JSON")
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidInputError(f"cannot read the domains file {p}: {exc}") from None

    def bad(where: str, what: str) -> InvalidInputError:
        return InvalidInputError(f"{p}: {where} {what}; see got_core/bench/merged_memory_data.py for the shape")

    if not isinstance(data, dict) or not 2 <= len(data) <= MAX_DOMAINS:
        raise bad("the top level", f"must map 2 to {MAX_DOMAINS} domain names to topics")
    for domain, topics in data.items():
        # a domain names a worker and its repository's file name: no path tricks
        if not _NAME.fullmatch(domain):
            raise bad(f"domain {domain[:80]!r}", "is not a name (letters, digits, '_' or '-', at most 64)")
        if not isinstance(topics, dict) or not topics:
            raise bad(f"domain {domain!r}", "must map topic names to entries")
        for topic, entry in topics.items():
            if not _NAME.fullmatch(topic):
                raise bad(f"topic {topic[:80]!r} of {domain!r}", "is not a name (letters, digits, '_' or '-')")
            where = f"{domain}/{topic}"
            if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("lesson", "contra")):
                raise bad(where, "needs 'lesson' and 'contra' texts")
            qs = entry.get("questions")
            if not isinstance(qs, list) or not qs:
                raise bad(where, "needs a non-empty 'questions' list")
            for q in qs:
                ok = (
                    isinstance(q, dict)
                    and isinstance(q.get("q"), str)
                    and isinstance(q.get("options"), list)
                    and 2 <= len(q["options"]) <= len(LETTERS)
                    and all(isinstance(o, str) and o for o in q["options"])
                    and isinstance(q.get("answer"), int)
                    and not isinstance(q.get("answer"), bool)
                    and 0 <= q["answer"] < len(q["options"])
                )
                if not ok:
                    raise bad(where, "has a question that is not {q, options (2-8), answer (an index)}")
    return data


def mixed_test_set(domains: dict[str, Any]) -> list[dict[str, Any]]:
    """The mixed-domain test set: every question of every domain, interleaved by domain."""
    per = [
        [
            {"id": f"{d}/{t}/{i}", "domain": d, "topic": f"{d}/{t}", **q}
            for t, e in topics.items()
            for i, q in enumerate(e["questions"])
        ]
        for d, topics in domains.items()
    ]
    out: list[dict[str, Any]] = []
    for i in range(max(len(p) for p in per)):
        out.extend(p[i] for p in per if i < len(p))
    return out


def contradictions(domains: dict[str, Any], k: int) -> list[dict[str, str]]:
    """K planted contradictions, round-robin over domains: the next domain's worker writes
    the opposite lesson (``contra``) on this domain's topic."""
    names = list(domains)
    pool = [[(d, t) for t in domains[d]] for d in names]
    if k > sum(len(p) for p in pool):
        raise ConfigError(f"--contradictions {k} is more than the {sum(len(p) for p in pool)} topics")
    out: list[dict[str, str]] = []
    i = 0
    while len(out) < k:
        d = i % len(names)
        if pool[d]:
            domain, topic = pool[d].pop(0)
            writer = names[(d + 1) % len(names)]
            out.append({"topic": f"{domain}/{topic}", "writer": writer, "text": domains[domain][topic]["contra"]})
        i += 1
    return out


# ----------------------------------------------------------------------------- worker processes
def worker_main(spec_path: str) -> int:
    """One worker process: clone central, learn its domain (and any planted lessons), push."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    w = Worker(spec["path"], spec["central"], spec["agent"], layout=spec["layout"])
    try:
        w.sync()
        commits = []
        for item in spec["lessons"]:
            _, commit = w.add_lesson(item["text"], topic_key=item["topic"], score=item["score"])
            commits.append(commit)
        pushed = w.push()
    finally:
        w.close()
    print(json.dumps({"agent": spec["agent"], "pid": os.getpid(), "commits": commits, "pushed": pushed}))
    return 0


def run_workers(root: Path, central: Path, layout: str, jobs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Start one worker process per agent at once, wait for all, return their reports."""
    timeout = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))
    (root / "workers").mkdir(parents=True, exist_ok=True)
    procs = {}
    for agent, lessons in jobs.items():
        spec = root / "workers" / f"{agent}.json"
        spec.write_text(
            json.dumps(
                {
                    "path": str(root / "workers" / f"{agent}.git"),
                    "central": str(central),
                    "agent": agent,
                    "layout": layout,
                    "lessons": lessons,
                }
            ),
            encoding="utf-8",
        )
        procs[agent] = subprocess.Popen(
            [sys.executable, "-m", "got_core.bench.merged_memory", "--worker-spec", str(spec)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    reports = {}
    for agent, proc in procs.items():
        out, err = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"worker {agent} failed (exit {proc.returncode}):\n{err[-2000:]}")
        reports[agent] = json.loads(out.strip().splitlines()[-1])
    return reports


# ----------------------------------------------------------------------------- merging
def score_resolver(conflict: Conflict) -> str:
    """Keep the side whose best lesson has the higher confidence; abstain on a tie."""
    lc = LessonConflict.from_conflict(conflict)
    best = {
        name: max((l.score for l in side), default=-1.0) for name, side in (("ours", lc.ours), ("theirs", lc.theirs))
    }
    if best["ours"] == best["theirs"]:
        raise MergeConflictError(f"equal confidence on {lc.topic_key!r}; a reviewer must decide", [conflict])
    return render_topic_file(list(lc.ours if best["ours"] > best["theirs"] else lc.theirs))


RESOLVERS: dict[str, str | Callable[[Conflict], Any]] = {"score": score_resolver, "ours": "ours", "theirs": "theirs"}


def _fsck(gitdir: Path) -> bool:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    proc = subprocess.run(
        ["git", f"--git-dir={gitdir}", "fsck", "--strict", "--no-dangling"], capture_output=True, env=env
    )
    return proc.returncode == 0


def _both_kept(lessons: Sequence[Lesson], domains: dict[str, Any], planted: list[dict[str, str]]) -> int:
    """How many planted contradictions have both sides in ``lessons`` (nothing flagged them)."""
    texts = {(l.topic_key, l.text) for l in lessons}
    n = 0
    for p in planted:
        domain, topic = p["topic"].split("/", 1)
        if (p["topic"], domains[domain][topic]["lesson"]) in texts and (p["topic"], p["text"]) in texts:
            n += 1
    return n


def scenario(
    root: Path, domains: dict[str, Any], layout: str, planted: list[dict[str, str]], resolve: str
) -> dict[str, Any]:
    """One central repository, N worker processes, the concatenation control, then the merges.

    Returns the table row and the memories the accuracy phase reads (lesson lists).
    """
    orch = Orchestrator(root / "central.git")
    jobs: dict[str, list[dict[str, Any]]] = {
        d: [{"topic": f"{d}/{t}", "text": e["lesson"], "score": VERIFIED_SCORE} for t, e in topics.items()]
        for d, topics in domains.items()
    }
    for p in planted:
        jobs[p["writer"]].append({"topic": p["topic"], "text": p["text"], "score": p["score"]})
    reports = run_workers(root, orch.path, layout, jobs)
    # The control arm first: every worker's lessons appended to one log, no conflict signal.
    concat = orch.concatenate_lessons(root / "concatenation.md")
    surfaced = pending = resolved = 0
    for agent in orch.workers():
        report = orch.merge_workers([agent], strategy="review")
        surfaced += len(report.conflicts)
        if report.pending:
            pending += 1
            result = orch.resolve(agent, RESOLVERS[resolve])
            resolved += len(result.conflicts)
    merged = orch.lessons()
    row = {
        "layout": layout,
        "scenario": "contradictions" if planted else "disjoint",
        "workers": len(jobs),
        "worker_pids": sorted(r["pid"] for r in reports.values()),
        "lessons_pushed": sum(len(v) for v in jobs.values()),
        "lessons_merged": len(merged),
        "injected": len(planted),
        "conflicts": surfaced,
        "merges_left_for_review": pending,
        "resolved": resolved,
        "silent_in_merge": _both_kept(merged, domains, planted),
        "concatenation_lessons": len(concat.lessons),
        "silent_in_concatenation": _both_kept([l for _, l in concat.lessons], domains, planted),
        "fsck_clean": _fsck(orch.path),
    }
    memories = {
        "merged": merged,
        "concatenation": [l for _, l in concat.lessons],
        **{f"solo:{a}": lessons_at(orch.repo, f"refs/heads/agents/{a}/memory") for a in jobs},
    }
    orch.repo.close()
    return {"row": row, "memories": memories}


# ----------------------------------------------------------------------------- the accuracy phase
def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in _STOP}


def retrieve(lessons: Sequence[Lesson], question: str, k: int) -> list[str]:
    """The same retrieval for every arm: the k lessons sharing most content words with the question."""
    q = _words(question)
    scored = sorted(((len(q & _words(l.text)), l.text) for l in lessons), key=lambda x: (-x[0], x[1]))
    out: list[str] = []
    for n, text in scored:
        if n and text not in out:
            out.append(text)
    return out[:k]


def prompt(lessons: Sequence[str], q: dict[str, Any]) -> list[dict[str, str]]:
    """The chat messages for one question with an arm's retrieved lessons."""
    memory = "\n".join(f"- {t}" for t in lessons) if lessons else "(no lessons retrieved)"
    options = "\n".join(f"{LETTERS[i]}) {o}" for i, o in enumerate(q["options"]))
    return [
        {
            "role": "system",
            "content": "You answer multiple-choice questions. Lessons from memory "
            f"(they may be wrong or disagree):\n{memory}",
        },
        {
            "role": "user",
            "content": f"Question:\n{q['q']}\n\nOptions:\n{options}\n\n"
            "Reply with the letter of the best option as: Final Answer: <letter>",
        },
    ]


def parse_letter(text: str, n_options: int) -> str | None:
    """The option letter of a reply (``Final Answer: B``; else the last standalone letter)."""
    valid = LETTERS[:n_options]
    m = re.search(rf"(?i:final answer)\s*[:=]?\s*\(?([{valid}])\b", text)
    if m:
        return m.group(1)
    found = re.findall(rf"\b([{valid}])\b", text)
    return found[-1] if found else None


def advice_responder(request: dict[str, Any]) -> str:
    """The stand-in's script: follow the lessons in the system prompt, guess without them.

    A lesson counts when it shares two content words with the question; an option is
    supported by each counted lesson that contains all its words. One best-supported
    option is the answer; a tie (two lessons that disagree) or no support is a guess,
    a deterministic hash of the question over the tied options. A caricature of a model
    that trusts its memory — not a model.
    """
    messages = request.get("messages") or []
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    m = re.search(r"Question:\n(.*?)\n\nOptions:\n(.*?)\n\n", user, re.DOTALL)
    if not m:
        return "Final Answer: A"
    question = m.group(1)
    options = re.findall(r"^[A-H]\) (.*)$", m.group(2), re.MULTILINE)
    lessons = [line[2:] for line in system.splitlines() if line.startswith("- ")]
    counted = [set(_WORD.findall(t.lower())) for t in lessons if len(_words(t) & _words(question)) >= 2]
    support = [sum(1 for w in counted if set(_WORD.findall(o.lower())) <= w) for o in options]
    top = max(support, default=0)
    tied = [i for i, s in enumerate(support) if s == top]
    if top == 0:
        tied = list(range(len(options)))
    pick = tied[int(hashlib.sha256(question.encode()).hexdigest(), 16) % len(tied)] if len(tied) > 1 else tied[0]
    return f"Following the lessons where they apply.\nFinal Answer: {LETTERS[pick]}"


def accuracy_phase(
    out: Path, memories: dict[str, list[Lesson]], tests: list[dict[str, Any]], model: Any, args: Any
) -> dict[str, Any]:
    """Pre-register, then ask every arm every question; accuracy and paired Δ vs merged."""
    from got_core.bench.stats import bootstrap_accuracy_ci, paired_bootstrap_delta

    arms = list(memories)
    plan = {
        "arms": arms,
        "primary": "merged vs concatenation",
        "secondary": [f"merged vs {a}" for a in arms if a != "merged"],
        "retrieval": f"top {args.k} lessons by shared content words, identical for every arm",
        "test_set_sha256": hashlib.sha256(json.dumps(tests, sort_keys=True).encode()).hexdigest(),
        "n_questions": len(tests),
        "bootstrap": args.bootstrap,
        "seed": args.seed,
        "model": getattr(model, "model_name", "") or args.model or "",
        "written_at": time.time(),
    }
    (out / "preregistration.json").write_text(json.dumps(plan, indent=2), encoding="utf-8")
    per_arm: dict[str, list[int]] = {}
    records = []
    for arm in arms:
        verdicts = []
        for q in tests:
            lessons = retrieve(memories[arm], q["q"], args.k)
            reply = model.complete(prompt(lessons, q), temperature=0.0, max_tokens=args.max_tokens, seed=args.seed)
            letter = parse_letter(reply.text or "", len(q["options"]))
            ok = letter == LETTERS[q["answer"]]
            verdicts.append(int(ok))
            records.append({"arm": arm, "id": q["id"], "lessons": lessons, "letter": letter, "correct": ok})
        per_arm[arm] = verdicts
    rows = []
    for arm in arms:
        ci = bootstrap_accuracy_ci(per_arm[arm], n_resamples=args.bootstrap, seed=args.seed)
        row: dict[str, Any] = {"arm": arm, "acc": ci.acc, "low": ci.low, "high": ci.high, "n": ci.n}
        if arm != "merged":
            d = paired_bootstrap_delta(per_arm["merged"], per_arm[arm], n_resamples=args.bootstrap, seed=args.seed)
            row.update(delta=d.delta, delta_low=d.low, delta_high=d.high, significant=d.significant)
        rows.append(row)
    with (out / "answers.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    return {"preregistration": plan, "rows": rows}


# ----------------------------------------------------------------------------- tables
FUNCTIONAL_COLUMNS = [
    ("layout", "layout"),
    ("scenario", "scenario"),
    ("workers", "worker processes"),
    ("lessons_merged", "lessons merged"),
    ("injected", "contradictions injected"),
    ("conflicts", "conflicts surfaced"),
    ("resolved", "resolved"),
    ("silent_in_merge", "kept silently by the merge"),
    ("silent_in_concatenation", "kept silently by concatenation"),
    ("fsck_clean", "git fsck"),
]


def markdown(functional: list[dict[str, Any]], accuracy: dict[str, Any] | None) -> str:
    """Both tables as markdown."""
    lines = ["| " + " | ".join(h for _, h in FUNCTIONAL_COLUMNS) + " |", "|" + "---|" * len(FUNCTIONAL_COLUMNS)]
    for r in functional:
        cells = ["clean" if r[k] is True else "FAIL" if r[k] is False else str(r[k]) for k, _ in FUNCTIONAL_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    if accuracy:
        lines += ["", "| arm | accuracy [95% CI] | Δ merged − arm [95% paired CI] |", "|---|---|---|"]
        for r in accuracy["rows"]:
            acc = f"{100 * r['acc']:.1f}% [{100 * r['low']:.1f}, {100 * r['high']:.1f}]"
            delta = (
                f"{100 * r['delta']:+.1f} pp [{100 * r['delta_low']:+.1f}, {100 * r['delta_high']:+.1f}]"
                + (" *" if r["significant"] else "")
                if "delta" in r
                else "—"
            )
            lines.append(f"| {r['arm']} (n={r['n']}) | {acc} | {delta} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the command
def parser() -> argparse.ArgumentParser:
    """The command line (``--help`` lists it)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--out", type=Path, default=Path("runs") / "merged_memory", help="run directory (created; must be empty)"
    )
    p.add_argument("--domains", type=Path, default=None, help="domains JSON (one worker per domain) [built in]")
    p.add_argument("--contradictions", type=int, default=4, help="K planted contradictions")
    p.add_argument("--contradiction-score", type=float, default=0.3, help="confidence of a planted (unverified) lesson")
    p.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated: keyed, content")
    p.add_argument(
        "--resolve", choices=sorted(RESOLVERS), default="score", help="how the orchestrator decides conflicts"
    )
    p.add_argument("--no-accuracy", action="store_true", help="functional phase only")
    p.add_argument("--k", type=int, default=3, help="lessons retrieved per question")
    p.add_argument("--standin", action="store_true", help="answer with the stand-in server (no model)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint [$GOT_BASE_URL]")
    p.add_argument("--model", default=None, help="served model name [$GOT_MODEL]")
    p.add_argument("--api-key", default=None, help="API key [$GOT_API_KEY]")
    p.add_argument("--max-tokens", type=int, default=64, help="completion tokens per answer")
    p.add_argument("--bootstrap", type=int, default=10_000, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap and model seed")
    p.add_argument("--worker-spec", default=None, help=argparse.SUPPRESS)  # a worker process's own entry
    return p


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both phases; returns what ``results.json`` holds."""
    import contextlib

    layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    if not layouts or any(x not in LAYOUTS for x in layouts):
        raise ConfigError(f"--layouts takes {', '.join(LAYOUTS)} (comma-separated), not {args.layouts!r}")
    if args.contradictions < 1 or args.k < 1:
        raise ConfigError("--contradictions and --k must be at least 1")
    if args.standin and args.base_url:
        raise ConfigError("pass either --standin or --base-url, not both")
    base_url = args.base_url or os.environ.get("GOT_BASE_URL")
    model_name = args.model or os.environ.get("GOT_MODEL")
    if not args.no_accuracy and not args.standin and not (base_url and model_name):
        raise ConfigError("the accuracy phase needs a model: --base-url and --model, or --standin (or --no-accuracy)")
    out: Path = args.out
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty; give a new --out")
    out.mkdir(parents=True, exist_ok=True)
    domains = load_domains(args.domains)
    planted = [{**p, "score": args.contradiction_score} for p in contradictions(domains, args.contradictions)]
    functional: list[dict[str, Any]] = []
    arms: dict[str, list[Lesson]] = {}  # the accuracy phase's memories, read after the contradictions
    for layout in layouts:
        for name, plant in (("disjoint", []), ("contradictions", planted)):
            result = scenario(out / layout / name, domains, layout, plant, args.resolve)
            functional.append(result["row"])
            if plant and layout == "keyed":
                arms = {**result["memories"], **arms}
            elif plant:
                arms["merged (content layout)"] = result["memories"]["merged"]
    accuracy = None
    if not args.no_accuracy:
        if "merged" not in arms:
            raise ConfigError("the accuracy phase compares against the keyed merge: include 'keyed' in --layouts")
        arms["none"] = []
        with contextlib.ExitStack() as stack:
            from got_core.solver.openai_compat import OpenAICompatibleModel

            if args.standin:
                from got_core.bench.standin import StandInOpenAIServer

                server = stack.enter_context(StandInOpenAIServer(responder=advice_responder))
                model = OpenAICompatibleModel(server.url, server.model)
            else:
                key = args.api_key or os.environ.get("GOT_API_KEY") or "EMPTY"
                model = OpenAICompatibleModel(str(base_url), str(model_name), api_key=key)
            accuracy = accuracy_phase(out, arms, mixed_test_set(domains), model, args)
    results = {
        "planted": planted,
        "resolve": args.resolve,
        "model": "stand-in (advice_responder)" if args.standin else model_name,
        "orchestrator_pid": os.getpid(),
        "functional": functional,
        "accuracy": accuracy,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    (out / "table.md").write_text(markdown(functional, accuracy), encoding="utf-8")
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the experiment and print its tables; exit 2 on a usage or input error."""
    args = parser().parse_args(argv)
    if args.worker_spec:
        return worker_main(args.worker_spec)
    try:
        results = run(args)
    except GotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(markdown(results["functional"], results["accuracy"]), end="")
    print(f"\nwrote {args.out / 'results.json'} and {args.out / 'table.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
