"""The executor seam (local | ray | dbos) and durable execution on a real DBOS engine (§6.4).

Covered: the solver's step seam replays recorded nodes without model calls and with the
same result and commits; a DBOS run equals a local run (records, node commits) with one
recorded step per node; a run SIGKILLed mid-task resumes from DBOS's record without
re-asking the model anything it had answered (and a local run, for contrast, does); a
DBOS system database with a pickled row is refused before DBOS reads it; bad choices of
executor are typed errors.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from got_core import ReasoningRepo
from got_core.bench.executors import (
    DBOSExecutor,
    Job,
    check_system_database,
    get_executor,
    recorded_steps,
    system_database_path,
)
from got_core.bench.standin import StandInOpenAIServer, bench_responder
from got_core.errors import ConfigError, UntrustedContentError
from got_core.solver import solve
from got_core.testing import ScriptedChatModel
from got_core.types import DeterministicClock

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "durable_execution.py"
TIMEOUT = float(os.environ.get("GOT_TEST_TIMEOUT", "600"))


def _bench_module():
    spec = importlib.util.spec_from_file_location("got_durable_execution_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- the solver's seam


class ListEngine:
    """The smallest durable engine: step results in a list, replayed in order (names checked)."""

    def __init__(self):
        self.records: list[tuple[str, object]] = []
        self.pos = 0

    def restart(self, keep: int | None = None):
        self.records = self.records[: len(self.records) if keep is None else keep]
        self.pos = 0

    def __call__(self, name, body):
        if self.pos < len(self.records):
            recorded, value = self.records[self.pos]
            assert recorded == name, f"step {self.pos} was {recorded!r}, now {name!r}"
        else:
            value = body()
            self.records.append((name, value))
        self.pos += 1
        return value


def _rules():
    # Option C takes three calls (two calculator steps, then the final answer): a multi-call node.
    return [
        (r"case that option A", "Thought: no.\nConfidence: 0.2\nFinal Answer: C"),
        (r"case that option B", "Thought: no.\nConfidence: 0.1\nFinal Answer: C"),
        (r"case that option C", "Thought: multiply.\nAction: calculator\nAction Input: 6*7"),
        (r"^Observation: 42$", "Thought: again.\nAction: calculator\nAction Input: 7*6"),
        (r"^Observation: ", "The product is 42.\nConfidence: 0.9\nFinal Answer: C"),
        (r"case that option D", "D is a sum.\nFinal Answer: C"),
        (r"Compare the candidate solutions", "Candidate 1: 0.3\nCandidate 2: 0.2\nCandidate 3: 0.95\nCandidate 4: 0.4"),
        (r"Check the proposed answer", "Verdict: correct\nReason: the product matches"),
    ]


def _solve(path, engine):
    model = ScriptedChatModel(rules=_rules(), default="Final Answer: C")
    repo = ReasoningRepo.open(path, clock=DeterministicClock(1_700_000_000))
    try:
        res = solve(
            "A crate holds 6 boxes with 7 lanterns in each. How many lanterns?",
            ["36", "48", "42", "13"],
            model=model,
            repo=repo,
            session_ref="master",
            problem_id="crate",
            tools=("calculator",),
            seed=3,
            parallel=True,  # steps force the siblings into order
            record_timings=False,
            steps=engine,
        )
        nodes = sorted(n.oid for n in res.nodes)
        return res, nodes, model.n_calls
    finally:
        repo.close()


def test_replayed_steps_make_no_calls_and_give_the_same_result_and_commits(tmp_path):
    engine = ListEngine()
    first, nodes, calls = _solve(tmp_path / "a.git", engine)
    names = [n for n, _ in engine.records]
    assert names[:4] == ["node A", "node B", "node C", "node D"] and names[4:] == ["ask 100", "ask 200"]
    per_step = [len(value["calls"]) for _, value in engine.records]
    assert first.letter == "C" and calls == first.n_calls == sum(per_step)
    assert per_step[2] > 1 and set(per_step[:2] + per_step[3:]) == {1}  # node C: a multi-call node
    plain, plain_nodes, _ = _solve(tmp_path / "plain.git", None)
    assert plain_nodes == nodes and plain.n_calls == first.n_calls  # the seam changes nothing by itself
    # Killed after three steps (A, B and every call of C): only D, judge and verifier run again.
    engine.restart(keep=3)
    resumed, resumed_nodes, resumed_calls = _solve(tmp_path / "b.git", engine)
    assert resumed_calls == sum(per_step[3:]) == 3
    assert resumed_nodes == nodes
    assert (resumed.letter, resumed.n_calls, resumed.usage, resumed.outcome) == (
        first.letter,
        first.n_calls,
        first.usage,
        first.outcome,
    )
    # Everything recorded: nothing is asked at all.
    engine.restart()
    replayed, replayed_nodes, replayed_calls = _solve(tmp_path / "c.git", engine)
    assert replayed_calls == 0 and replayed_nodes == nodes and replayed.n_calls == first.n_calls


# ----------------------------------------------------------------------------- real DBOS


@pytest.fixture
def standin_spec():
    """A live spec on the stand-in server's bench script (sibling nodes in order, as the scripts need)."""
    from got_core.bench.runner import ModelSpec

    with StandInOpenAIServer(responder="bench") as server:
        yield ModelSpec(server.url, server.model, parallel_nodes=False)


def test_a_dbos_run_equals_a_local_run_with_one_step_per_node(tmp_path):
    bench = _bench_module()
    summary = tmp_path / "summary.json"
    code = bench.main(
        ["--n-runs", "3", "--repeats", "1", "--out", str(tmp_path), "--no-progress", "--json", str(summary)]
    )
    result = json.loads(summary.read_text())
    assert code == 0 and result["identical"] and result["problems"] == []
    assert result["nodes"] == 15  # per task: the root and one child per option
    assert len(result["overhead_ms_per_node"]) == 1
    for t in bench.build_tasks(3, 4):
        steps = recorded_steps(tmp_path / "dbos-0", t.key)
        assert [s["name"] for s in steps][:4] == ["node A", "node B", "node C", "node D"]
        assert not any(s["error"] for s in steps)
        assert recorded_steps(tmp_path / "local-0", t.key) == []
    assert system_database_path(tmp_path / "dbos-0").is_file()
    assert not system_database_path(tmp_path / "local-0").exists()


def test_dbos_and_local_differ_when_the_runs_do(tmp_path, standin_spec):
    """The comparison can fail: another seed gives other records and commits, and it says so."""
    bench = _bench_module()
    a = bench.run_once(
        tmp_path / "a", "local", standin_spec, bench.build_tasks(2, 4), workers=1, resume=False, progress=False
    )
    b = bench.run_once(
        tmp_path / "b", "dbos", standin_spec, bench.build_tasks(2, 4, seed=1), workers=1, resume=False, progress=False
    )
    problems = bench.compare(a, b)
    assert any("result records differ" in p for p in problems) and any("node commits differ" in p for p in problems)


class GatedServer:
    """The stand-in's bench script over HTTP, logging each request; request ``gate`` blocks until released."""

    def __init__(self):
        self.log: list[str] = []
        self.gate: int | None = None
        self.reached = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.server = StandInOpenAIServer(responder=self._answer).start()

    def _answer(self, request):
        key = hashlib.sha256(
            json.dumps(
                [request.get("messages"), request.get("seed"), request.get("temperature")], sort_keys=True
            ).encode()
        ).hexdigest()
        with self.lock:
            self.log.append(key)
            n = len(self.log)
        if self.gate is not None and n == self.gate:
            self.reached.set()
            self.release.wait(TIMEOUT)
        return bench_responder(request)

    def take(self):
        with self.lock:
            out, self.log = self.log, []
        return out


def _bench_cmd(server, out, executor, *more):
    return [
        sys.executable,
        str(BENCH),
        "--executor",
        executor,
        "--base-url",
        server.server.url,
        "--model",
        server.server.model,
        "--n-runs",
        "3",
        "--out",
        str(out),
        "--no-progress",
        *more,
    ]


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _killed_then_resumed(server, out, executor, gate):
    """Run, SIGKILL the process while request ``gate`` waits, run again with --resume; return the logs."""
    server.gate, server.reached, server.release = gate, threading.Event(), threading.Event()
    proc = subprocess.Popen(
        _bench_cmd(server, out, executor), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.reached.wait(TIMEOUT), proc.communicate(timeout=TIMEOUT)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=TIMEOUT)
    finally:
        server.release.set()
    assert proc.returncode == -signal.SIGKILL
    server.gate = None
    first = server.take()
    answered = first[: gate - 1]  # request `gate` was never answered
    done = subprocess.run(
        _bench_cmd(server, out, executor, "--resume", "--json", str(out / "summary.json")),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return answered, server.take(), json.loads((out / "summary.json").read_text())


def test_a_killed_dbos_run_resumes_without_rerunning_finished_nodes(tmp_path):
    server = GatedServer()
    try:
        # The uninterrupted reference: every call once.
        ref = subprocess.run(
            _bench_cmd(server, tmp_path / "ref", "local", "--json", str(tmp_path / "ref.json")),
            env=_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert ref.returncode == 0, ref.stderr
        reference = server.take()
        ref_summary = json.loads((tmp_path / "ref.json").read_text())
        gate = 9  # task 1 makes 6 calls (or 12 after a re-expansion): the kill lands inside a task
        answered, second, summary = _killed_then_resumed(server, tmp_path / "dbos", "dbos", gate)
        # Nothing the model had answered was asked again: every finished node came from DBOS's record.
        assert not set(answered) & set(second)
        assert len(answered) + len(second) == len(reference)
        assert sorted(answered + second) == sorted(reference)
        # ... and the resumed run is the uninterrupted one: node commits and node count.
        assert summary["node_commits"] == ref_summary["node_commits"]
        assert summary["nodes"] == ref_summary["nodes"] and summary["model_calls"] == ref_summary["model_calls"]
        bench = _bench_module()
        for t in bench.build_tasks(3, 4):
            steps = recorded_steps(tmp_path / "dbos", t.key)
            assert len(steps) == len({s["function_id"] for s in steps}) > 0  # each step recorded once
        # The control: the same kill under the local executor re-asks what the killed task had answered.
        answered, second, summary = _killed_then_resumed(server, tmp_path / "local", "local", gate)
        assert set(answered) & set(second)
        assert summary["node_commits"] == ref_summary["node_commits"]
    finally:
        server.server.stop()


# ----------------------------------------------------------------------------- hostile records and bad options


def test_a_system_database_with_a_pickled_row_is_refused_before_dbos_reads_it(tmp_path, standin_spec):
    bench = _bench_module()
    run_dir = tmp_path / "run"
    bench.run_once(run_dir, "dbos", standin_spec, bench.build_tasks(1, 4), workers=1, resume=False, progress=False)
    db_path = system_database_path(run_dir)
    check_system_database(db_path)  # what DBOS wrote is all JSON
    marker = tmp_path / "pwned"

    class Boom:
        def __reduce__(self):
            return (Path.touch, (marker,))

    with sqlite3.connect(db_path) as db:
        db.execute(
            "UPDATE operation_outputs SET output = ?, serialization = 'py_pickle' WHERE function_id = 1",
            (base64.b64encode(pickle.dumps(Boom())).decode(),),
        )
    with pytest.raises(UntrustedContentError, match="not JSON"):
        check_system_database(db_path)
    job = Job("tot/x", {}, {}, str(run_dir))
    with pytest.raises(UntrustedContentError, match="operation_outputs"):
        DBOSExecutor().run([job], lambda *a, **k: {}, lambda: None)
    assert not marker.exists()
    (tmp_path / "junk.sqlite3").write_bytes(b"not a database at all" * 100)
    with pytest.raises(UntrustedContentError, match="not a readable"):
        check_system_database(tmp_path / "junk.sqlite3")


def test_executor_choices_are_checked():
    assert get_executor().name == "local" and get_executor(ray_address="local").name == "ray"
    assert get_executor("dbos", workers=3).workers == 3
    with pytest.raises(ConfigError, match="unknown executor"):
        get_executor("hatchet")
    with pytest.raises(ConfigError, match="Ray address"):
        get_executor("dbos", ray_address="local")
