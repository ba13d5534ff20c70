"""Pre-registration as git commits: the decision rule is fixed before the first model call.

The paper (arXiv 2606.14470) commits its decision rules and validity conditions before
running. ``--prereg FILE`` (YAML or JSON) does the same here:

1. :func:`load_prereg` reads and validates the file (hostile input: size-capped, every
   field type-checked, unknown keys refused).
2. :func:`commit_prereg` commits it to the run's ``central.git`` on ``refs/got/prereg``
   (``prereg.json`` normalised, ``prereg.source`` as given) — before any model call.
3. Every task carries the commit (:func:`plant_prereg` rebuilds it, bit-identical, as the
   first commit of the task's own repository), so the root node of every reasoning tree
   has the pre-registration commit as its parent: every node commit *descends* from it,
   and none could have been written before it existed (its SHA is in their history).
4. :func:`evaluate` applies the rule to the results; the table reports the verdict.
5. :func:`check_prereg` is the audit's check: the pre-registration commit exists, is the
   one the config names, and is the only root of every result's history.

A file looks like::

    title: git memory beats no memory on MATH-500
    decision_rule:
      arm: git                 # the arm under test
      baseline: none           # default: the experiment's baseline
      require: ci_above_zero   # ci_above_zero | ci_below_zero | ci_excludes_zero
      benchmark: math          # optional: math | gpqa (default: every benchmark's table)
    validity:
      - {check: empty_predictions, max: 0}
      - {check: baseline_below_ceiling, max_accuracy: 0.95}
      - {check: control_positive, arm: identical, baseline: none}
      - {check: min_n, value: 3}
      - {check: max_timeouts, max: 0}

The verdict is ``INVALID`` when a validity condition fails, else ``CONFIRMED`` when the
rule holds and ``NOT CONFIRMED`` when it does not.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from got_core.errors import ConfigError, GotRuntimeError, InvalidInputError
from got_core.repo import ReasoningRepo
from got_core.types import DeterministicClock, canonical_json

__all__ = [
    "PREREG_REF",
    "REQUIREMENTS",
    "VALIDITY_CHECKS",
    "Prereg",
    "PreregMismatchError",
    "Verdict",
    "check_prereg",
    "commit_prereg",
    "evaluate",
    "load_prereg",
    "parse_prereg",
    "plant_prereg",
]

#: Where the pre-registration commit lives in ``central.git``.
PREREG_REF = "refs/got/prereg"
#: The commit's timestamp. Fixed, so that every task repository can rebuild the identical
#: commit; *when* it was registered is in ``prereg.json`` (``registered_at``), and *that* it
#: came first is proven by ancestry, not by a clock.
PREREG_TIME = 1_699_999_000
#: Largest pre-registration file accepted.
MAX_PREREG_BYTES = 64 * 1024
#: Decision rules: what the paired 95% CI of Δ(arm − baseline) must do.
REQUIREMENTS = ("ci_above_zero", "ci_below_zero", "ci_excludes_zero")
#: Validity conditions and their parameters (name -> (required keys, optional keys)).
VALIDITY_CHECKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "empty_predictions": (("max",), ("arms",)),
    "baseline_below_ceiling": (("max_accuracy",), ()),
    "control_positive": (("arm",), ("baseline",)),
    "min_n": (("value",), ()),
    "max_timeouts": (("max",), ("arms",)),
}
#: Benchmark name -> the ``kind`` of its problems.
BENCHMARKS = {"math": "math", "gpqa": "mcq"}


class PreregMismatchError(GotRuntimeError):
    """A task repository could not rebuild the pre-registration commit bit for bit."""


@dataclass(frozen=True)
class Prereg:
    """A validated pre-registration.

    Attributes:
        title: what is claimed.
        arm: the arm under test; baseline: what it is compared with (``None``: the experiment's).
        require: one of :data:`REQUIREMENTS`.
        benchmark: ``math`` / ``gpqa``, or ``None`` for every benchmark's table.
        validity: conditions, each ``{"check": name, ...parameters}``.
    """

    title: str
    arm: str
    require: str
    baseline: str | None = None
    benchmark: str | None = None
    validity: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The normalised file form (what ``prereg.json`` holds, less ``registered_at``);
        :func:`parse_prereg` reads it back."""
        rule: dict[str, Any] = {"arm": self.arm, "require": self.require}
        if self.baseline is not None:
            rule["baseline"] = self.baseline
        if self.benchmark is not None:
            rule["benchmark"] = self.benchmark
        return {"title": self.title, "decision_rule": rule, "validity": [dict(v) for v in self.validity]}


@dataclass
class Verdict:
    """The rule applied to one benchmark's results."""

    benchmark: str
    verdict: str
    rule: str
    rule_met: bool | None
    conditions: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    def line(self) -> str:
        """One line for a table's notes."""
        conds = "; ".join(
            f"{c['check']}: {'holds' if c['ok'] else 'VIOLATED'} ({c['detail']})" for c in self.conditions
        )
        return f"Pre-registered verdict ({self.benchmark}): **{self.verdict}** — {self.rule}" + (
            f"; validity: {conds}" if conds else ""
        )


# ----------------------------------------------------------------------------- loading


def _need(data: dict[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise InvalidInputError(f"{where}: {key!r} must be a {names}, not {type(value).__name__}")
    if isinstance(value, str) and not value.strip():
        raise InvalidInputError(f"{where}: {key!r} is empty")
    return value


def _number(data: dict[str, Any], key: str, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"{where}: {key!r} must be a number, not {value!r}")
    return float(value)


def _condition(raw: Any, i: int) -> dict[str, Any]:
    where = f"validity[{i}]"
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{where} must be a mapping with a 'check' key")
    check = _need(raw, "check", (str,), where)
    if check not in VALIDITY_CHECKS:
        raise InvalidInputError(f"{where}: unknown check {check!r}; choose from {', '.join(VALIDITY_CHECKS)}")
    required, optional = VALIDITY_CHECKS[check]
    unknown = sorted(set(raw) - {"check", *required, *optional})
    if unknown:
        raise InvalidInputError(f"{where} ({check}): unknown key(s) {', '.join(unknown)}")
    out: dict[str, Any] = {"check": check}
    for key in required + optional:
        if key not in raw:
            if key in required:
                raise InvalidInputError(f"{where} ({check}) needs {key!r}")
            continue
        if key in ("arm", "baseline"):
            out[key] = _need(raw, key, (str,), where)
        elif key == "arms":
            arms = raw[key]
            if not isinstance(arms, list) or not all(isinstance(a, str) and a for a in arms):
                raise InvalidInputError(f"{where} ({check}): 'arms' must be a list of arm names")
            out[key] = list(arms)
        else:
            out[key] = _number(raw, key, where)
    return out


def load_prereg(path: str | Path) -> tuple[Prereg, bytes]:
    """Read and validate a pre-registration file (YAML or JSON).

    Returns:
        ``(prereg, the file's bytes)``.

    Raises:
        InvalidInputError: missing, too large, not YAML/JSON, or a field that is wrong.
    """
    import yaml

    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"{p}: cannot read the pre-registration ({exc.strerror or exc})") from None
    if len(raw) > MAX_PREREG_BYTES:
        raise InvalidInputError(f"{p}: {len(raw)} bytes; a pre-registration is at most {MAX_PREREG_BYTES}")
    try:
        data = yaml.safe_load(raw.decode("utf-8"))  # JSON is YAML; safe_load builds plain data only
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InvalidInputError(f"{p}: not valid YAML or JSON ({str(exc).splitlines()[0]})") from None
    return parse_prereg(data, str(p)), raw


def parse_prereg(data: Any, where: str = "pre-registration") -> Prereg:
    """Validate already-parsed pre-registration data (see the module docstring for the form).

    Raises:
        InvalidInputError: a missing or wrong field.
    """
    if not isinstance(data, dict):
        raise InvalidInputError(f"{where}: a pre-registration is a mapping with title, decision_rule, validity")
    unknown = sorted(set(data) - {"title", "decision_rule", "validity", "registered_at"})
    if unknown:
        raise InvalidInputError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
    title = _need(data, "title", (str,), where)
    rule = data.get("decision_rule")
    if not isinstance(rule, dict):
        raise InvalidInputError(f"{where}: 'decision_rule' must be a mapping (arm, baseline, require)")
    bad = sorted(set(rule) - {"arm", "baseline", "require", "benchmark"})
    if bad:
        raise InvalidInputError(f"{where}: decision_rule has unknown key(s) {', '.join(map(str, bad))}")
    arm = _need(rule, "arm", (str,), f"{where}: decision_rule")
    require = rule.get("require", "ci_above_zero")
    if require not in REQUIREMENTS:
        raise InvalidInputError(f"{where}: decision_rule.require must be one of {', '.join(REQUIREMENTS)}")
    baseline = _need(rule, "baseline", (str,), f"{where}: decision_rule") if "baseline" in rule else None
    bench = rule.get("benchmark")
    if bench is not None and bench not in BENCHMARKS:
        raise InvalidInputError(f"{where}: decision_rule.benchmark must be one of {', '.join(BENCHMARKS)}")
    validity = data.get("validity") or []
    if not isinstance(validity, list):
        raise InvalidInputError(f"{where}: 'validity' must be a list of conditions")
    return Prereg(
        title=title.strip(),
        arm=arm,
        require=require,
        baseline=baseline,
        benchmark=bench,
        validity=tuple(_condition(c, i) for i, c in enumerate(validity)),
    )


# ----------------------------------------------------------------------------- committing


def _files(spec: dict[str, Any]) -> dict[str, str | bytes]:
    return {"prereg.json": spec["files"]["prereg.json"], "prereg.source": spec["files"]["prereg.source"]}


def _write(path: Path, ref: str, spec: dict[str, Any]) -> str:
    # A handle of its own, on the fixed clock: the same bytes give the same commit everywhere.
    with ReasoningRepo.open(path, clock=DeterministicClock(PREREG_TIME)) as repo:
        tip = repo.tip(ref)
        if tip is not None:
            return tip
        return repo.commit_files(ref, _files(spec), spec["message"], parents=[], fresh_tree=True)


def _spec(prereg: Prereg, body: bytes, source: bytes, sha: str | None = None) -> dict[str, Any]:
    return {
        "sha": sha,
        "ref": PREREG_REF,
        "message": f"pre-registration: {prereg.title}\n\nCommitted before the first model call of this run.\n",
        "files": {"prereg.json": body.decode("utf-8"), "prereg.source": source.decode("utf-8")},
    }


def commit_prereg(run_dir: str | Path, prereg: Prereg, source: bytes) -> dict[str, Any]:
    """Commit ``prereg`` to ``RUN_DIR/central.git`` on :data:`PREREG_REF`, once.

    Call it before the first model call. A resumed run finds the commit and checks the
    rule is the same.

    Returns:
        ``{"sha", "ref", "message", "files"}``: what :func:`plant_prereg` needs (tasks carry it).

    Raises:
        ConfigError: the run was pre-registered with a different rule.
    """
    central = Path(run_dir) / "central.git"
    with ReasoningRepo.open(central) as repo:
        old = repo.tip(PREREG_REF)
        if old is not None:
            stored = json.loads(repo.read_file(old, "prereg.json"))
            stored.pop("registered_at", None)
            if stored != prereg.to_dict():
                raise ConfigError(
                    f"{run_dir} was pre-registered with another rule ({PREREG_REF} {old[:10]}); "
                    "a pre-registration cannot change once the run started: resume with the same file"
                )
            return _spec(prereg, repo.read_file(old, "prereg.json"), repo.read_file(old, "prereg.source"), old)
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()
    body = canonical_json({**prereg.to_dict(), "registered_at": now}).encode("utf-8")
    spec = _spec(prereg, body, source)
    spec["sha"] = _write(central, PREREG_REF, spec)
    return spec


def plant_prereg(repo_path: str | Path, spec: dict[str, Any]) -> str:
    """Rebuild the pre-registration commit as the tip of ``master`` in a task's repository.

    The solver's root node then continues ``master``: it has the pre-registration commit as
    its parent, so every node of the tree descends from it.

    Raises:
        PreregMismatchError: the rebuilt commit is not bit-identical to ``spec["sha"]``.
    """
    sha = _write(Path(repo_path), "refs/heads/master", spec)
    if sha != spec["sha"]:
        raise PreregMismatchError(
            f"the pre-registration commit rebuilt in {repo_path} is {sha[:10]}, not {spec['sha'][:10]}; "
            "the task's repository already held other commits: delete it and resume"
        )
    return sha


# ----------------------------------------------------------------------------- the verdict


def _by_arm(records: Sequence[dict[str, Any]], benchmark: str | None) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        if r.get("phase", "test") != "test" or (benchmark and r.get("kind") != BENCHMARKS[benchmark]):
            continue
        out.setdefault(r["arm"], {})[r["problem_id"]] = r
    return out


def _delta(arms: dict[str, dict[str, dict[str, Any]]], arm: str, base: str, seed: int, n: int) -> Any:
    from got_core.bench.stats import paired_bootstrap_delta

    mine, theirs = arms.get(arm) or {}, arms.get(base) or {}
    common = [p for p in mine if p in theirs]
    if not common:
        return None
    return paired_bootstrap_delta(
        [bool(mine[p]["correct"]) for p in common], [bool(theirs[p]["correct"]) for p in common], n, seed
    )


def _fmt(d: Any) -> str:
    return f"Δ {100 * d.delta:+.1f} pp [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"


def _check_one(cond: dict[str, Any], arms: dict[str, Any], base: str, seed: int, n: int) -> dict[str, Any]:
    kind = cond["check"]
    ok, detail = True, ""
    if kind in ("empty_predictions", "max_timeouts"):
        names = cond.get("arms") or sorted(arms)
        if kind == "empty_predictions":
            count = sum(
                1 for a in names for r in (arms.get(a) or {}).values() if not str(r.get("answer") or "").strip()
            )
            what = "empty predictions"
        else:
            count = sum(1 for a in names for r in (arms.get(a) or {}).values() if r.get("outcome") == "timeout")
            what = "timeouts"
        ok, detail = count <= cond["max"], f"{count} {what}, at most {cond['max']:g} allowed"
    elif kind == "baseline_below_ceiling":
        recs = list((arms.get(base) or {}).values())
        acc = sum(bool(r["correct"]) for r in recs) / len(recs) if recs else float("nan")
        ok = bool(recs) and acc <= cond["max_accuracy"]
        detail = f"baseline {base} at {100 * acc:.1f}%, ceiling {100 * cond['max_accuracy']:.0f}%"
    elif kind == "control_positive":
        d = _delta(arms, cond["arm"], cond.get("baseline", base), seed, n)
        ok = d is not None and d.low > 0
        detail = f"{cond['arm']} vs {cond.get('baseline', base)}: " + (_fmt(d) if d else "no paired results")
    elif kind == "min_n":
        sizes = [len(v) for v in arms.values()]
        smallest = min(sizes) if sizes else 0
        ok, detail = smallest >= cond["value"], f"smallest arm has {smallest} problems, {cond['value']:g} required"
    return {"check": kind, "ok": bool(ok), "detail": detail}


def evaluate(
    prereg: Prereg, records: Sequence[dict[str, Any]], baseline: str, *, seed: int = 0, n_resamples: int = 10_000
) -> list[Verdict]:
    """Apply the decision rule and validity conditions to result records, one verdict per benchmark.

    Args:
        prereg: the registered rule.
        records: result records (study-phase records are ignored).
        baseline: the experiment's baseline (used when the rule names none).
        seed, n_resamples: the paired bootstrap's (the tables' own).

    Returns:
        One :class:`Verdict` per benchmark present (or only the one the rule names).
    """
    kinds = {kind: name for name, kind in BENCHMARKS.items()}
    present = sorted({kinds[r["kind"]] for r in records if r.get("phase", "test") == "test" and r.get("kind") in kinds})
    benches = [prereg.benchmark] if prereg.benchmark else present
    base = prereg.baseline or baseline
    out = []
    for bench in benches:
        arms = _by_arm(records, bench)
        d = _delta(arms, prereg.arm, base, seed, n_resamples)
        met = None
        if d is not None:
            met = {
                "ci_above_zero": d.low > 0,
                "ci_below_zero": d.high < 0,
                "ci_excludes_zero": d.low > 0 or d.high < 0,
            }[prereg.require]
        rule = f"rule {prereg.require} on Δ({prereg.arm} − {base}): " + (_fmt(d) if d else "no paired results")
        conds = [_check_one(c, arms, base, seed, n_resamples) for c in prereg.validity]
        if not all(c["ok"] for c in conds) or met is None:
            verdict = "INVALID"
        else:
            verdict = "CONFIRMED" if met else "NOT CONFIRMED"
        out.append(Verdict(bench, verdict, rule, met, conds))
    return out


# ----------------------------------------------------------------------------- the audit's check


def check_prereg(run_dir: str | Path, config: dict[str, Any] | None = None) -> tuple[str, str]:
    """The audit check "the pre-registration commit precedes every node commit".

    Passes when ``central.git`` holds :data:`PREREG_REF`, it is the commit ``config.json``
    names, its ``prereg.json`` is a valid pre-registration, and it is the *only* root
    (parentless commit) of every result's history: every node commit descends from it.

    Args:
        run_dir: the run directory.
        config: its ``config.json`` (read when not given).

    Returns:
        ``(status, detail)`` with status ``PASS``, ``FAIL`` or ``SKIP`` (no pre-registration).
    """
    run_dir = Path(run_dir)
    if config is None:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    named = (config.get("prereg") or {}).get("sha")
    central = run_dir / "central.git"
    if not central.exists():
        return "FAIL", f"{run_dir} has no central.git"
    with ReasoningRepo(central, create=False) as repo:
        tip = repo.tip(PREREG_REF)
        if named is None and tip is None:
            return "SKIP", "this run was not pre-registered (no --prereg)"
        if tip is None:
            return "FAIL", f"config.json names pre-registration {str(named)[:10]} but {PREREG_REF} is missing"
        if named != tip:
            return "FAIL", f"{PREREG_REF} is {tip[:10]} but config.json names {str(named)[:10]}"
        try:
            parse_prereg(json.loads(repo.read_file(tip, "prereg.json")), f"{PREREG_REF}:prereg.json")
        except (KeyError, ValueError) as exc:
            return "FAIL", f"{PREREG_REF} {tip[:10]} holds no valid prereg.json ({exc})"
        if repo.log(tip, decorate=False)[0].parents:
            return "FAIL", f"{PREREG_REF} {tip[:10]} has parents; it must be the first commit"
        bad, n_nodes, n_results = [], 0, 0
        for t in config.get("tasks", []):
            sha = repo.tip(t["ref"])
            if sha is None:
                bad.append(f"{t['key']}: no result")
                continue
            n_results += 1
            commits = repo.log(sha, decorate=False)
            roots = {c.oid for c in commits if not c.parents}
            n_nodes += len(commits) - 2  # less the result commit and the pre-registration
            if roots != {tip}:
                others = sorted(roots - {tip})
                bad.append(
                    f"{t['key']}: {len(others)} node history root(s) before or beside it ({', '.join(o[:10] for o in others[:2])})"
                )
        if bad:
            return "FAIL", f"{len(bad)} results not descended from the pre-registration: {'; '.join(bad[:3])}"
        return "PASS", (
            f"{PREREG_REF} {tip[:10]} is the only root of all {n_results} result histories "
            f"({n_nodes} commits): every node commit descends from it"
        )
