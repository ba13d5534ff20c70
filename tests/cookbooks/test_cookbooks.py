"""Every benchmark cookbook end to end as a subprocess, against the stand-in server (issue 7's CI).

Small K/M keep the file within a few minutes on 2 cores. Covered: each cookbook's
``--help``; a full run of each producing the table, result files, plots and a passing
audit; a run SIGKILLed halfway and resumed gives the same results file as an
uninterrupted one; the Ray path on a local instance; and ``got audit`` failing when an
answer is leaked into a memory commit.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from timeouts import TEST_TIMEOUT, deadline

ROOT = Path(__file__).resolve().parents[2]
COOKBOOKS = ROOT / "cookbooks"
NAMES = ("five_substrates", "copyability_sweep", "test_time_arms", "system_comparison")


def _run(name, *args):
    return subprocess.run(
        [sys.executable, str(COOKBOOKS / f"{name}.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
    )


@pytest.mark.parametrize("name", NAMES)
def test_cookbook_help_lists_the_options(name):
    out = _run(name, "--help")
    assert out.returncode == 0, out.stderr
    for option in (
        "--data-dir",
        "--math",
        "--gpqa",
        "--base-url",
        "--model",
        "--api-key",
        "--standin",
        "--backends",
        "--k-study",
        "--m-test",
        "--workers",
        "--ray",
        "--seed",
        "--out",
        "--max-tokens",
        "--resume",
    ):
        assert option in out.stdout, option


def test_no_endpoint_is_a_clear_user_error(tmp_path, monkeypatch):
    monkeypatch.delenv("GOT_BASE_URL", raising=False)
    out = _run("test_time_arms", "--out", tmp_path / "r")
    assert out.returncode == 2 and "--standin" in out.stdout


@pytest.fixture(scope="module")
def five_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("five") / "run"
    proc = _run(
        "five_substrates",
        "--standin",
        "--k-study",
        3,
        "--m-test",
        4,
        "--workers",
        2,
        "--bootstrap",
        1000,
        "--no-progress",
        "--out",
        out,
    )
    return out, proc


def _assert_outputs(out: Path, proc, pngs=("deltas.png",)):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "audit passed" in proc.stdout
    for name in (
        "config.json",
        "results.jsonl",
        "results.csv",
        "timings.jsonl",
        "arms.csv",
        "arms.jsonl",
        "table.md",
        *pngs,
    ):
        assert (out / name).stat().st_size > 0, name
    for png in pngs:
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
        assert "stand-in model" in _png_title(out / png), png  # every run here uses --standin
    assert (out / "table.md").read_text().startswith("## ")
    assert "stand-in model" in (out / "table.md").read_text().splitlines()[0]


def _png_title(path: Path) -> str:
    """The Title text chunk of a PNG (the plot's title, written beside the pixels)."""
    data, pos = path.read_bytes(), 8
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Title\x00"):
            return body[6:].decode("latin-1")
        if kind == b"iTXt" and body.startswith(b"Title\x00\x00"):  # uncompressed international text
            return body[8:].split(b"\x00", 2)[2].decode("utf-8")
        pos += 12 + length
    return ""


@pytest.mark.slow
def test_five_substrates_end_to_end(five_run):
    out, proc = five_run
    _assert_outputs(out, proc)
    table = (out / "table.md").read_text()
    for backend in ("none", "markdown", "vector", "graph", "git"):
        assert f"| {backend} | 4 |" in table
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3 + 5 * 4
    assert len(glob.glob(str(out / "repos" / "*" / "*.git"))) == len(records)


@pytest.mark.slow
def test_copyability_sweep_end_to_end(tmp_path):
    out = tmp_path / "sweep"
    proc = _run(
        "copyability_sweep",
        "--standin",
        "--m-test",
        4,
        "--workers",
        1,
        "--bootstrap",
        1000,
        "--no-progress",
        "--out",
        out,
    )
    _assert_outputs(out, proc, pngs=("deltas.png", "sweep.png"))
    table = (out / "table.md").read_text()
    assert "| identical | 4 |" in table and "cosine bin" in table
    bins = [json.loads(line) for line in (out / "bins.jsonl").read_text().splitlines()]
    assert sum(b["n"] for b in bins) == 5 * 4


@pytest.mark.slow
def test_test_time_arms_and_system_comparison_end_to_end(tmp_path):
    arms = _run(
        "test_time_arms",
        "--standin",
        "--m-test",
        3,
        "--workers",
        2,
        "--bootstrap",
        1000,
        "--no-progress",
        "--out",
        tmp_path / "arms",
    )
    _assert_outputs(tmp_path / "arms", arms)
    assert "| verifier_bon | 3 |" in (tmp_path / "arms" / "table.md").read_text()
    system = _run(
        "system_comparison",
        "--standin",
        "--m-test",
        3,
        "--workers",
        1,
        "--budget-s",
        90,
        "--bootstrap",
        1000,
        "--no-progress",
        "--out",
        tmp_path / "system",
    )
    _assert_outputs(tmp_path / "system", system)
    assert "| vanilla | 3 |" in (tmp_path / "system" / "table.md").read_text()


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_results(tmp_path):
    common = [
        "--standin",
        "--standin-latency-ms",
        30,
        "--m-test",
        5,
        "--arms",
        "greedy,self_consistency,tot",
        "--workers",
        2,
        "--bootstrap",
        500,
        "--no-progress",
        "--no-audit",
    ]
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, str(COOKBOOKS / "test_time_arms.py"), *map(str, common), "--out", str(killed)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pattern = str(killed / "central.git" / "refs" / "got" / "results" / "*" / "*")
    until = deadline()
    while len(glob.glob(pattern)) < 4 and proc.poll() is None and time.monotonic() < until:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the cookbook and its pool workers: its own process group
    proc.wait()
    finished = len(glob.glob(pattern))
    assert 4 <= finished < 15, f"the kill should land mid-run, it landed after {finished} of 15"
    assert not (killed / "results.jsonl").exists()
    resumed = _run("test_time_arms", *common, "--out", killed, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    clean = _run("test_time_arms", *common, "--out", tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert (killed / "results.jsonl").read_bytes() == (tmp_path / "clean" / "results.jsonl").read_bytes()
    assert json.loads((killed / "config.json").read_text())["resumed"] == 1


@pytest.mark.slow
def test_ray_local_runs_the_same_tasks(tmp_path):
    out = tmp_path / "ray"
    proc = _run(
        "test_time_arms",
        "--standin",
        "--m-test",
        2,
        "--arms",
        "greedy,tot",
        "--ray",
        "local",
        "--workers",
        2,
        "--bootstrap",
        500,
        "--no-progress",
        "--out",
        out,
        "--no-rerun",
    )
    _assert_outputs(out, proc)
    assert json.loads((out / "config.json").read_text())["runtime"]["ray"] == "local"
    inline = _run(
        "test_time_arms",
        "--standin",
        "--m-test",
        2,
        "--arms",
        "greedy,tot",
        "--workers",
        1,
        "--bootstrap",
        500,
        "--no-progress",
        "--no-audit",
        "--out",
        tmp_path / "inline",
    )
    assert inline.returncode == 0
    assert (out / "results.jsonl").read_bytes() == (tmp_path / "inline" / "results.jsonl").read_bytes()


@pytest.mark.slow
def test_audit_fails_when_an_answer_leaks_into_memory(five_run, tmp_path):
    out, proc = five_run
    assert proc.returncode == 0
    leaky = tmp_path / "leaky"
    shutil.copytree(out, leaky)
    config = json.loads((leaky / "config.json").read_text())
    by_id = {p["id"]: p for p in config["problems"]}
    answer = next(by_id[i]["answer"] for i in config["split"]["test"] if len(by_id[i]["answer"]) >= 4)
    script = (
        "import sys; from got_core.memory.git import GitMemory; from got_core.repo import ReasoningRepo; "
        "GitMemory(repo=ReasoningRepo.open(sys.argv[1])).add_insight('Remember: ' + sys.argv[2] + ' works.')"
    )
    subprocess.run([sys.executable, "-c", script, str(leaky / "memory" / "git"), answer], check=True)
    audit = subprocess.run(
        [sys.executable, "-m", "got_core.cli.audit", str(leaky), "--no-rerun"],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
    )
    assert audit.returncode == 1, audit.stdout
    assert "no expected answer in memory" in audit.stdout and "FAIL" in audit.stdout
    fine = subprocess.run(
        [sys.executable, "-m", "got_core.cli.audit", str(out), "--no-rerun"],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
    )
    assert fine.returncode == 0, fine.stdout
