"""Readable at 80 columns: git-style abbreviated ids, listings that fit, one-sentence empty
states, a human `got show`, and `got init`. Each command runs as its own process with
COLUMNS=80, as in a terminal of that width."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from gitcli import git
from gotcli import got_env, run_got

EMPTY = re.compile(r"^No [^\n]+\.$")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = tmp_path_factory.mktemp("readable")
    env = got_env(tmp_path_factory.mktemp("home"), COLUMNS="80")
    setup = [
        ["demo", "-r", "demo.git"],
        ["threads", "demo", "-r", "threads.git"],
        ["init", "-r", "empty.git"],
        ["memory", "add", "Check the units of every quantity before dividing one by another.", "-p", "mem"],
        ["memory", "add", "Draw the figure first.", "-p", "mem"],
    ]
    for res, argv in zip(run_got([{"argv": a} for a in setup], env, w), setup, strict=True):
        assert res["code"] == 0, (argv, res["stderr"])
    return w, env


def run(world, *argvs):
    w, env = world
    return run_got([{"argv": list(a)} for a in argvs], env, w)


LISTINGS = [
    ("log", "--all", "-r", "demo.git"),
    ("grep", "km", "-r", "demo.git"),
    ("search", "average speed", "-r", "demo.git"),
    ("tags", "-r", "demo.git"),
    ("verify", "-r", "demo.git"),
    ("threads", "list", "-r", "threads.git"),
    ("threads", "history", "demo", "-r", "threads.git"),
    ("threads", "log", "demo", "-r", "threads.git"),
    ("threads", "log", "demo", "--graph", "-r", "threads.git"),
    ("memory", "list", "-p", "mem"),
    ("memory", "search", "units", "-p", "mem"),
]


def test_main_listings_fit_80_columns(world):
    for argv, res in zip(LISTINGS, run(world, *LISTINGS), strict=True):
        assert res["code"] in (0, 1), (argv, res["stderr"])  # verify: 1, nothing is signed
        lines = res["stdout"].splitlines()
        assert lines, argv
        too_wide = [line for line in lines if len(line) > 80]
        assert not too_wide, (argv, too_wide)


def test_ids_are_abbreviated_like_git_and_whole_with_full(world):
    w, _ = world
    log_json, log, log_full, tags = run(
        world,
        ("log", "--all", "--json", "-r", "demo.git"),
        ("log", "--all", "-r", "demo.git"),
        ("log", "--all", "--full", "-r", "demo.git"),
        ("tags", "-r", "demo.git"),
    )
    oids = [e["oid"] for e in json.loads(log_json["stdout"])]
    shown = [line.split()[0] for line in log["stdout"].splitlines()[3:] if line[:1].isalnum()]
    assert shown == [git(w / "demo.git", "rev-parse", "--short", oid).strip() for oid in oids]
    assert all(7 <= len(s) <= 12 for s in shown)
    assert [line.split()[0] for line in log_full["stdout"].splitlines()[2:]] == oids
    for line in tags["stdout"].splitlines():  # "<abbrev> <tag>"
        short, name = line.split()
        assert git(w / "demo.git", "rev-parse", f"{name}^{{commit}}").strip().startswith(short) and len(short) == 7

    hist_json, hist = run(
        world,
        ("threads", "history", "demo", "--json", "-r", "threads.git"),
        ("threads", "history", "demo", "-r", "threads.git"),
    )
    commits = [r["commit"] for r in json.loads(hist_json["stdout"])]
    assert all(c[:7] in hist["stdout"] for c in commits)
    assert not any(r["checkpoint_id"] in hist["stdout"] for r in json.loads(hist_json["stdout"]))  # only with --full


def test_empty_results_are_one_sentence_and_exit_0(world):
    cases = [
        ("log", "-r", "empty.git"),
        ("log", "--all", "-r", "empty.git"),
        ("tags", "-r", "empty.git"),
        ("tags", "nothing_", "-r", "demo.git"),
        ("grep", "no such words anywhere", "-r", "demo.git"),
        ("search", "zebra quantum", "-r", "empty.git"),
        ("verify", "-r", "empty.git"),
        ("diff", "best", "best", "-r", "demo.git"),
        ("merge", "--status", "-r", "empty.git"),
        ("threads", "list", "-r", "empty.git"),
        ("session", "list", "-r", "empty.git"),
        ("threads", "diff", "demo", "latest", "latest", "-r", "threads.git"),
    ]
    for argv, res in zip(cases, run(world, *cases), strict=True):
        assert res["code"] == 0 and res["stderr"] == "", (argv, res)
        assert EMPTY.match(res["stdout"].strip()), (argv, res["stdout"])


def test_show_is_human_readable(world):
    (res,) = run(world, ("show", "best", "-r", "demo.git"))
    out = res["stdout"]
    assert res["code"] == 0
    assert "{'" not in out and "':" not in out  # no Python dicts
    assert re.search(r"^date: +\d{4}-\d\d-\d\d", out, re.M) and re.search(r"^score: +0\.892$", out, re.M)
    assert re.search(r"^s_comb +0\.892", out, re.M) and re.search(r"^s_local +0\.92\b", out, re.M)  # a scores table
    assert re.search(r"^ 1\. action: calculator  input: 120 / 1\.5 = 80 km/h\.", out, re.M)  # trace steps listed
    assert "Speed is distance over time" in out


def test_init_creates_a_bare_repository_and_says_so(world):
    w, _ = world
    (w / "papers").mkdir()
    (w / "papers" / "draft.txt").write_text("mine\n")
    first, again, nonempty = run(world, ("init", "-r", "new.git"), ("init", "-r", "new.git"), ("init", "-r", "papers"))
    assert first["code"] == 0 and first["stdout"].startswith("Created an empty bare repository at ")
    assert git(w / "new.git", "rev-parse", "--is-bare-repository").strip() == "true"
    assert again["code"] == 0 and "already a git repository; nothing changed" in again["stdout"]
    assert nonempty["code"] == 2 and len(nonempty["stderr"].splitlines()) == 1
    assert sorted(p.name for p in (w / "papers").iterdir()) == ["draft.txt"]  # nothing created over it
    (w / "cwd").mkdir()
    (default,) = run_got([{"argv": ["init"], "cwd": str(w / "cwd")}], world[1], w)
    assert default["code"] == 0 and (w / "cwd" / "got.git" / "HEAD").is_file()


def test_gcc_branches_show_their_status(world):
    w, env = world
    argvs = [["gcc", "init", "plan", "-r", "g.git"], ["gcc", "branch", "side", "try it", "-r", "g.git"]]
    argvs += [["gcc", "branches", "-r", "g.git"]]
    *_, res = run_got([{"argv": a} for a in argvs], env, w)
    assert res["code"] == 0 and res["stdout"].splitlines() == [
        "  main [active] Primary reasoning trajectory",
        "* side [active] try it",
    ]


def test_reads_never_create_a_repository(world):
    w, _ = world
    reads = [("log",), ("gcc", "log", "-o", "x"), ("gcc", "context"), ("threads", "list"), ("session", "list")]
    (w / "bare-cwd").mkdir()
    results = run_got([{"argv": list(a), "cwd": str(w / "bare-cwd")} for a in reads], world[1], w)
    for argv, res in zip(reads, results, strict=True):
        assert res["code"] == 2 and "got init" in res["stderr"], (argv, res)
    assert list(Path(w / "bare-cwd").iterdir()) == []


def test_demos_fit_80_columns_and_never_cut_a_score(world):
    # short paths: the hints at the end print commands to copy, which hold the repository path
    demo, threads_demo = run(world, ("demo", "-r", "d80.git"), ("threads", "demo", "-r", "t80.git"))
    for res in (demo, threads_demo):
        assert res["code"] == 0, res["stderr"]
        too_wide = [line for line in res["stdout"].splitlines() if len(line) > 80]
        assert not too_wide, too_wide
    rows = [line.split() for line in demo["stdout"].splitlines() if re.match(r"^[0-9a-f]{7} ", line)]
    assert rows and all(re.fullmatch(r"\d\.\d{3}", row[2]) for row in rows), rows  # the score column whole
    assert any(row[1] == "train-speed/child3" and row[2] == "0.280" for row in rows)


def test_a_listing_shrinks_its_folding_columns_before_the_fixed_ones():
    from rich.console import Console

    from got_core.cli.render import listing

    table = listing("commit", "branch", "score", "tags", "thought", wrap=("tags",))
    table.add_row("5d84b2e", "train-speed/child0", "0.892", "best, success_29169fd3626501dd", "node " + "x" * 60)
    console = Console(width=80, record=True, color_system=None)
    console.print(table)
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert "0.892" in lines[2] and "5d84b2e" in lines[2] and "train-speed/child0" in lines[2]
    assert "xxxxxxxx" in lines[2]  # the flex column keeps room to show something


def test_solve_output_fits_80_columns(world):
    script = Path(__file__).resolve().parents[2] / "cookbooks" / "data" / "scripted_replies.json"
    (res,) = run(world, ("solve", "What is 17 * 23?", "--scripted", str(script), "--repo-root", "trees"))
    assert res["code"] == 0 and "answer: 391" in res["stdout"], res["stderr"]
    too_wide = [line for line in res["stdout"].splitlines() if len(line) > 80]
    assert not too_wide, too_wide
