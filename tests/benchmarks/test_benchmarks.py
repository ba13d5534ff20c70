"""The benchmark scripts in a tiny mode: they write only under their output directory, never into
the repository, say what they measured with (a stand-in model is named as one), and never plot
a made-up value on a log axis."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from timeouts import TEST_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"

TINY = {
    "backends": ["--sizes", "3,6", "--backends", "none,markdown,git,graph", "--ops", "2"],
    "substrate": ["--levels", "0", "--ops", "3", "--reads", "3", "--refs", "500", "--ref-reads", "3"],
    "solver": ["--problems", "1", "--arms", "greedy", "--memories", "none", "--layouts", "shared"],
    "langgraph_saver": [
        *("--steps", "3", "--thread-budget", "6", "--reads", "2", "--cold", "1"),
        *("--scale", "20", "--fanout-rounds", "2"),
    ],
    "langgraph_store": ["--sizes", "200", "--ops", "3"],
}
OUTPUTS = {
    "backends": ["backends.json", "backends.png"],
    "substrate": ["substrate.json", "substrate.md", "substrate.png"],
    "solver": ["solver.json"],
    "langgraph_saver": ["langgraph_saver.json", "langgraph_saver_scale.png", "langgraph_saver_threads.png"],
    "langgraph_store": ["langgraph_store.json", "langgraph_store.png"],
}


def _status() -> str:
    """Everything git sees as changed or new in the checkout (empty on a clean clone)."""
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all", "--ignored=matching"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()}")
    # caches that running Python anywhere creates are not outputs
    return "\n".join(l for l in proc.stdout.splitlines() if "__pycache__" not in l and ".pyc" not in l)


def _run(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *TINY[name], *args],
        cwd=ROOT,  # as the README runs them: from the repository root
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TINY))
def test_a_benchmark_writes_only_under_out_and_changes_no_tracked_file(name, tmp_path):
    before = _status()
    out = tmp_path / "out" / name
    proc = _run(name, "--out", str(out))
    # the solver benchmark exits 1 when a row misses its target: a measurement, not a failure here
    assert proc.returncode in (0, 1) if name == "solver" else proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS[name])
    assert all((out / f).stat().st_size > 0 for f in OUTPUTS[name])
    assert _status() == before  # nothing new, changed or deleted in the checkout


def test_the_default_output_directory_is_the_system_temp_dir(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    before = _status()
    proc = _run("backends", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "got-bench" / "backends"
    assert sorted(p.name for p in out.iterdir()) == ["backends.json", "backends.png"]
    assert f"results: {out / 'backends.json'}" in proc.stdout.replace("\n", "")
    assert _status() == before
    assert not (BENCH / "results").exists()


def test_the_solver_benchmark_names_its_stand_in_model(tmp_path):
    proc = _run("solver", "--out", str(tmp_path))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    assert "stand-in model" in " ".join(proc.stdout.split())  # the table's title
    assert json.loads((tmp_path / "solver.json").read_text())["model"].startswith("stand-in model")


def _plot_module():
    spec = importlib.util.spec_from_file_location("got_bench_plot", BENCH / "_plot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_zero_values_are_left_out_of_log_plots_and_named():
    plot = _plot_module()
    rows = [
        {"backend": "none", "lessons": 40, "storage_bytes": 0},
        {"backend": "none", "lessons": 1000, "storage_bytes": 0},
        {"backend": "git", "lessons": 40, "storage_bytes": 90_000},
        {"backend": "git", "lessons": 1000, "storage_bytes": 400_000},
        {"backend": "graph", "lessons": 40, "storage_bytes": 0},
        {"backend": "graph", "lessons": 1000, "storage_bytes": 5_000},
    ]
    points, omitted = plot.log_points(rows, "storage_bytes", "lessons", "backend")
    assert points == {"git": [(40, 90_000), (1000, 400_000)], "graph": [(1000, 5_000)]}
    assert omitted == ["graph (1 of 2 points)", "none"]
    assert all(v > 0 for pts in points.values() for _, v in pts)  # no stand-in value like 1e-4


def test_the_plot_file_is_written_without_fake_points(tmp_path):
    pytest.importorskip("matplotlib")
    plot = _plot_module()
    rows = [{"backend": b, "lessons": n, "write_ms": v} for b, n, v in [("none", 1, 0.0), ("git", 1, 1.0)]]
    out = plot.log_lines(rows, ["write_ms", "write_ms"], "lessons", "backend", tmp_path / "p.png", xlabel="lessons")
    assert out.read_bytes()[:4] == b"\x89PNG"


def _fsprobe_module():
    spec = importlib.util.spec_from_file_location("got_bench_fsprobe", BENCH / "_fsprobe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_file_system_probe_names_the_mount_that_holds_the_directory(tmp_path):
    fsprobe = _fsprobe_module()
    found = fsprobe.probe(tmp_path, files=8)
    # the same mount point and type as the kernel reports for the directory (stat -f / findmnt)
    proc = subprocess.run(["df", "--output=target,fstype", str(tmp_path)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"df cannot say: {proc.stderr.strip()}")
    target, fstype = proc.stdout.splitlines()[-1].split()
    assert (found["mount"], found["fs"]) == (target, fstype)
    assert found["create_ms"] > 0
    assert list(tmp_path.iterdir()) == []  # its scratch files are gone
    if fstype == "ext4":
        assert isinstance(found["journal"], bool)
    line = fsprobe.describe(found, found)
    assert f"at {target};" in line and "after it" in line


def test_the_probe_can_time_a_repositorys_own_directory_and_leaves_it_as_it_was(tmp_path):
    fsprobe = _fsprobe_module()
    (tmp_path / "pack-a.idx").write_bytes(b"x")
    found = fsprobe.probe(tmp_path, files=4, inside=True)
    assert found["create_ms"] > 0
    assert [p.name for p in tmp_path.iterdir()] == ["pack-a.idx"]  # its own files only, all gone


def test_the_probe_says_when_ext4_has_no_journal():
    fsprobe = _fsprobe_module()
    base = {"device": "/dev/x", "mount": "/", "create_ms": 1.0}
    assert "without a journal" in fsprobe.describe({**base, "fs": "ext4", "journal": False})
    assert "with a journal" in fsprobe.describe({**base, "fs": "ext4", "journal": True})
    assert fsprobe._ext4_journal("/dev/no-such-device") is None


@pytest.mark.slow
@pytest.mark.parametrize("name", ["substrate", "langgraph_saver", "langgraph_store"])
def test_a_write_benchmark_reports_the_file_systems_creation_cost(name, tmp_path):
    out = tmp_path / "out"
    proc = _run(name, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "creating a file took" in " ".join(proc.stdout.split())
    data = json.loads((out / f"{name}.json").read_text())
    rows = data if isinstance(data, list) else [data]
    probes = [r["file_system"] for r in rows]
    assert probes and all(p["before"]["create_ms"] > 0 and p["after"]["create_ms"] > 0 for p in probes)
    if name == "substrate":  # and in the measured repository's own pack directory
        assert all(r["file_system_in_repo"]["after"]["create_ms"] > 0 for r in rows)
        assert "in the measured repository's objects/pack took" in " ".join(proc.stdout.split())
