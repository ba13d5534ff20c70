"""The bench runner's central repository given as a URL of a real git server (issue 18 §4).

Tasks push their results to ``git://127.0.0.1:PORT/central.git`` (``git daemon``, started by
the fixture, serving a directory outside the run directory); the driver follows it into
``RUN_DIR/central.git``. A cookbook run on Ray (``--ray local --central URL``) gets only the URL.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from gitserver import make_bare
from timeouts import TEST_TIMEOUT

from got_core.bench.datasets import load_gpqa, load_math500
from got_core.bench.runner import ModelSpec, Task, open_central, run_tasks, stable_record, task_seed
from got_core.bench.standin import StandInOpenAIServer
from got_core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server():
    with StandInOpenAIServer(responder="bench") as srv:
        yield srv


@pytest.fixture
def problems(data_dir):
    return load_math500(data_dir / "math500_sample.jsonl", limit=2) + load_gpqa(data_dir / "gpqa_sample.csv", limit=1)


def _spec(server):
    return ModelSpec(server.url, server.model, max_tokens=64, parallel_nodes=False)


def _tasks(problems):
    return [
        Task("test_time_arms", "test", "greedy", asdict(p), method="greedy", seed=task_seed(0, p.id), order=i)
        for i, p in enumerate(problems)
    ]


def _served_results(served):
    out = git(served, "for-each-ref", "--format=%(refname) %(objectname)", "refs/got/results/").split("\n")
    return dict(line.split() for line in out if line)


def test_results_go_to_the_url_and_a_rerun_reads_them_back_from_it(tmp_path, server, problems, git_daemon):
    served = make_bare(git_daemon.base)
    url = git_daemon.url("central.git")
    run_dir = tmp_path / "run"
    tasks = _tasks(problems)
    first = run_tasks(tasks, run_dir, _spec(server), workers=2, progress=False, central=url)
    assert _served_results(served) == {t.result_ref: r["result_sha"] for t, r in zip(tasks, first)}
    assert "refs/notes/" in git(served, "for-each-ref", "--format=%(refname)")  # scores travelled too
    assert fsck_clean(served)[0]
    with open_central(run_dir) as local:  # the driver's copy follows the URL
        assert {t.result_ref: local.tip(t.result_ref) for t in tasks} == _served_results(served)
    # Lose the local copy: a resumed run finds every result at the URL and solves nothing again.
    shutil.rmtree(run_dir / "central.git")
    calls = server.n_requests
    again = run_tasks(tasks, run_dir, _spec(server), workers=2, progress=False, central=url)
    assert server.n_requests == calls
    assert [stable_record(r) for r in again] == [stable_record(r) for r in first]
    with pytest.raises(ConfigError, match="URL"):
        run_tasks(tasks, run_dir, _spec(server), progress=False, central=str(served))


@pytest.mark.slow
def test_a_ray_run_of_a_cookbook_reaches_central_only_by_url(tmp_path, git_daemon):
    served = make_bare(git_daemon.base)
    url = git_daemon.url("central.git")
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "cookbooks" / "test_time_arms.py"),
            "--standin",
            "--m-test",
            "2",
            "--arms",
            "greedy,tot",
            "--ray",
            "local",
            "--workers",
            "2",
            "--central",
            url,
            "--bootstrap",
            "500",
            "--no-progress",
            "--no-rerun",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]  # the run and its audit pass
    config = json.loads((out / "config.json").read_text())
    assert config["runtime"]["central"] == url and config["runtime"]["ray"] == "local"
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    results = _served_results(served)
    assert len(results) == len(records) == 4  # 2 arms x 2 problems, every one pushed to the server
    with open_central(out) as local:  # the driver's copy, which the audit read, is what the server holds
        assert {ref: local.tip(ref) for ref in results} == results
    assert not served.is_relative_to(out)  # central is not in the run directory at all
    # Every task pushed through the daemon (one receive-pack service per push at least).
    assert git_daemon.log.read_text().count("receive-pack") >= len(records)
    assert fsck_clean(served)[0]
