"""The plain data of a benchmark run: tasks, the model spec, run ids and seeds, the endpoint.

What :mod:`got_core.bench.runner` runs and what the protocols build, apart from the
machinery that runs it (workers, the driver, central): a :class:`Task` is one (arm,
problem) pair, a :class:`ModelSpec` says how to reach the model, and the ref prefixes
say where a run's results, lessons, ingest records and notes live (ARCHITECTURE §4).
:mod:`got_core.bench.runner` re-exports every name here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from got_core.errors import ConfigError, GotRuntimeError
from got_core.names import encode_component

__all__ = [
    "CLOCK_START",
    "INGEST_PREFIX",
    "LESSON_PREFIX",
    "NOTES_PREFIX",
    "RESULT_PREFIX",
    "VOLATILE_KEYS",
    "BenchRunError",
    "ModelSpec",
    "Task",
    "load_config",
    "model_endpoint",
    "stable_record",
    "task_seed",
]

RESULT_PREFIX = "refs/got/results/"
LESSON_PREFIX = "refs/got/lessons/"
INGEST_PREFIX = "refs/got/ingest/"
NOTES_PREFIX = "refs/notes/runs/"
#: Every per-problem repository starts its commit clock here (bit-stable timestamps).
CLOCK_START = 1_700_000_000
#: Result fields that measure the machine rather than the reasoning; kept in git and in
#: ``timings.jsonl``, left out of ``results.jsonl`` so that file is reproducible.
VOLATILE_KEYS = ("elapsed_s", "winner_sha", "result_sha", "memory.tips")


class BenchRunError(GotRuntimeError):
    """A task of a benchmark run failed with an unexpected error (the message names it)."""


@dataclass(frozen=True)
class ModelSpec:
    """How workers reach the model: an OpenAI-compatible endpoint (vLLM, or the stand-in).

    Attributes:
        base_url: e.g. ``http://127.0.0.1:8765/v1``.
        model: the served model name.
        api_key: sent as bearer token; never written to the run directory.
        max_tokens: completion limit per call.
        timeout: seconds per HTTP attempt.
        parallel_nodes: run sibling nodes of a tree concurrently.
        standin: ``{"responder": name, "latency_ms": x}`` when the endpoint is the stand-in
            server, so an audit can start the same one again.
    """

    base_url: str
    model: str
    api_key: str = "EMPTY"
    max_tokens: int = 256
    timeout: float = 300.0
    parallel_nodes: bool = True
    standin: dict[str, Any] | None = None

    def public(self) -> dict[str, Any]:
        """The spec without the API key (what config.json records)."""
        data = asdict(self)
        data.pop("api_key")
        return data


@dataclass(frozen=True)
class Task:
    """One (arm, problem) pair of an experiment.

    Attributes:
        experiment: ``five_substrates``, ``copyability_sweep``, ``test_time_arms``, ``system_comparison``.
        phase: ``study`` or ``test``.
        arm: the experiment arm (a backend, a tier, a test-time arm); names a repository folder.
        problem: the :class:`~got_core.bench.datasets.Problem` as a dict.
        method: the solver arm (:data:`got_core.solver.arms.ARMS`).
        seed: the solver seed (the same for every arm on a problem: paired design).
        order: position of the problem in the experiment (deterministic output order).
        memory: ``None`` or ``{"mode": "study"|"shared"|"online"|"static"|"injected", "backend": name, ...}``
            (``store``: the ingested store a shared task reads, when not the backend's own).
        options: solve options: ``tools``, ``max_steps``, ``arm_options``, ``budget_s``, ``k_lessons``.
        extra: copied into the result (tier, cosine, ...).
    """

    experiment: str
    phase: str
    arm: str
    problem: dict[str, Any]
    method: str = "tot"
    seed: int = 0
    order: int = 0
    memory: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def problem_id(self) -> str:
        """The problem's id."""
        return str(self.problem["id"])

    @property
    def key(self) -> str:
        """``<arm>/<problem id>``: unique within a run."""
        return f"{self.arm}/{self.problem_id}"

    @property
    def ref_key(self) -> str:
        """``<arm>/<problem>``, each part encoded for use in a ref."""
        return f"{encode_component(self.arm, 'arm')}/{encode_component(self.problem_id, 'problem id')}"

    @property
    def result_ref(self) -> str:
        """Where the finished result lives (in the task's repository and in central.git)."""
        return RESULT_PREFIX + self.ref_key

    @property
    def lesson_ref(self) -> str:
        """The fresh memory branch of a study or injected-git task."""
        return LESSON_PREFIX + self.ref_key

    @property
    def notes_ref(self) -> str:
        """The task's own notes ref (a shared one could not be pushed without merging)."""
        return NOTES_PREFIX + self.ref_key

    def repo_path(self, root: Path) -> Path:
        """``<root>/repos/<arm>/<problem>.git``."""
        return (
            Path(root)
            / "repos"
            / encode_component(self.arm, "arm")
            / f"{encode_component(self.problem_id, 'problem id')}.git"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (:meth:`from_dict` reverses it)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        """Rebuild a task from :meth:`to_dict` output."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def stable_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without :data:`VOLATILE_KEYS` (dotted keys reach into nested dicts): the reproducible part."""
    out = json.loads(json.dumps(record))
    for key in VOLATILE_KEYS:
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return out


def task_seed(seed: int, problem_id: str) -> int:
    """The solver seed of a problem: a hash of the run seed and the problem id (same for every arm)."""
    digest = hashlib.sha256(f"{seed}\x1f{problem_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 1_000_000


def load_config(run_dir: str | Path) -> dict[str, Any]:
    """Read ``RUN_DIR/config.json``.

    Raises:
        ConfigError: there is none (not a run directory).
    """
    path = Path(run_dir) / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a benchmark run directory (no config.json)") from None


@contextlib.contextmanager
def model_endpoint(spec: ModelSpec, *, check: bool = True) -> Iterator[ModelSpec]:
    """Yield a usable :class:`ModelSpec`: start the stand-in when ``spec.standin`` asks for one.

    With ``spec.standin`` set, a :class:`~got_core.testing.server.StandInOpenAIServer` runs in
    this process for the duration (on a free port) and the yielded spec points at it.
    Otherwise the endpoint is checked (``/v1/models``) and used as given.

    Raises:
        ModelError: nothing answers at ``spec.base_url``.
        ConfigError: the server does not serve ``spec.model``.
    """
    if spec.standin:
        from got_core.bench.standin import StandInOpenAIServer

        with StandInOpenAIServer(
            responder=spec.standin.get("responder", "bench"),
            model=spec.model,
            latency_ms=float(spec.standin.get("latency_ms", 0.0)),
        ) as server:
            yield replace(spec, base_url=server.url)
        return
    if check:
        from got_core.solver.openai_compat import check_endpoint

        served = check_endpoint(spec.base_url, api_key=spec.api_key)
        if served and spec.model not in served:
            raise ConfigError(f"{spec.base_url} serves {', '.join(served)}, not {spec.model!r}; pass --model")
    yield spec
