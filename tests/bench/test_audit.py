"""The fairness audit (got_core.bench.audit, `got audit`) on real stand-in runs, and planted faults.

Each run is built once per session with the stand-in model on the sample data and copied
per test; each planted fault must FAIL its check, and the clean copy passes every check
(``test_a_clean_run_passes_every_check``). Where a careful forger would also rewrite the
derived files, the tests do (``_forge_files``), so the check that catches the fault is the
one named.
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from gitcli import git
from typer.testing import CliRunner

from got_core.bench import protocols as P
from got_core.bench.audit import CHECKS, MIN_ANSWER_CHARS, answer_needles, audit_run
from got_core.bench.report import summarize, table_markdown, write_arms, write_results
from got_core.bench.runner import INGEST_PREFIX, LESSON_PREFIX, ModelSpec, Task
from got_core.cli.audit import register
from got_core.errors import ConfigError
from got_core.memory import get_backend
from got_core.memory.git import GitMemory
from got_core.repo import ReasoningRepo
from got_core.types import canonical_json

DATA = Path(__file__).resolve().parents[1] / "data"
STANDIN = ModelSpec(
    "http://127.0.0.1:0/v1", "got-standin", max_tokens=64, parallel_nodes=False, standin={"responder": "bench"}
)
BOOTSTRAP = 200


def _build(tmp_path_factory: Any, experiment: Callable[[P.ExperimentOptions], Any], **kw: Any) -> Path:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:  # the autouse isolation is per test; do the same here
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        opts = P.ExperimentOptions(
            out=tmp_path_factory.mktemp("audit") / "run",
            math_path=DATA / "math500_sample.jsonl",
            gpqa_path=DATA / "gpqa_sample.csv",
            workers=1,
            progress=False,
            bootstrap=BOOTSTRAP,
            spec=STANDIN,
            **kw,
        )
        experiment(opts)
    return opts.out


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory):
    """A five-substrate run over every backend (stand-in model); tests copy it."""
    return _build(
        tmp_path_factory,
        P.five_substrates,
        k_study=3,
        m_test=5,
        backends=("markdown", "vector", "graph", "git"),
        method="argue",
    )


@pytest.fixture(scope="session")
def sweep_run(tmp_path_factory):
    """A copyability sweep (its identical and paraphrase tiers inject the gold by design)."""
    return _build(tmp_path_factory, P.copyability_sweep, m_test=3, backends=("markdown",), method="greedy")


@pytest.fixture
def run(finished_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy, symlinks=True)
    return copy


@pytest.fixture
def sweep(sweep_run, tmp_path):
    copy = tmp_path / "sweep"
    shutil.copytree(sweep_run, copy, symlinks=True)
    return copy


# ----------------------------------------------------------------------------- helpers


def _audit(run: Path, **kw: Any) -> tuple[Any, dict[str, Any]]:
    report = audit_run(run, rerun=kw.pop("rerun", False), fsck=kw.pop("fsck", False), **kw)
    return report, {c.name: c for c in report.checks}


def _config(run: Path) -> dict[str, Any]:
    return json.loads((run / "config.json").read_text())


def _save_config(run: Path, config: dict[str, Any]) -> None:
    (run / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _task(run: Path, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    return next(t for t in _config(run)["tasks"] if pred(t))


def _problem(run: Path, pid: str) -> dict[str, Any]:
    return next(p for p in _config(run)["problems"] if p["id"] == pid)


def _records(run: Path) -> list[dict[str, Any]]:
    with ReasoningRepo(run / "central.git", create=False) as central:
        out = []
        for t in _config(run)["tasks"]:
            sha = central.tip(t["ref"])
            out.append({**json.loads(central.read_file(sha, "result.json")), "result_sha": sha})
        return out


def _forge_files(run: Path) -> None:
    """What a careful forger does after editing git: write every derived file again from it."""
    records = _records(run)
    config = _config(run)
    write_results(run, records)
    arms = [json.loads(x)["arm"] for x in (run / "arms.jsonl").read_text().splitlines() if x.strip()]
    rows = summarize(records, config["baseline"], arms=arms, seed=config["identity"]["seed"], n_resamples=BOOTSTRAP)
    write_arms(run, rows)
    (run / "table.md").write_text(table_markdown(rows, "forged"), encoding="utf-8")


def _rewrite_record(run: Path, ref: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Commit an edited result.json on ``ref`` (same parents: every node stays reachable)."""
    with ReasoningRepo(run / "central.git", create=False) as central:
        sha = central.tip(ref)
        record = json.loads(central.read_file(sha, "result.json"))
        change(record)
        parents = list(central.git.read_commit(sha).parents)
        central.commit_files(
            ref, {"result.json": canonical_json(record) + "\n"}, "tamper\n", parents=parents, force=True
        )


def _rebuild_leaf(run: Path, ref: str, change: Callable[[dict[str, bytes]], None], *, winner: bool = False) -> str:
    """Rewrite the files of one leaf node under ``ref`` and rebuild the result commit on it.

    The leaf is the winner (``winner=True``) or another child of the root; returns its label.
    """
    with ReasoningRepo(run / "central.git", create=False) as central:
        sha = central.tip(ref)
        record = json.loads(central.read_file(sha, "result.json"))
        parents = list(central.git.read_commit(sha).parents)
        for leaf in parents:
            if (leaf == record["winner_sha"]) == winner:
                break
        files = central.files(leaf)
        label = json.loads(files["metadata.json"])["label"]
        change(files)
        new = central.prepare_commit(list(central.git.read_commit(leaf).parents), files, "node (tampered)\n")
        if winner:
            record["winner_sha"] = new
        central.commit_files(
            ref,
            {"result.json": canonical_json(record) + "\n"},
            "tamper\n",
            parents=[new if p == leaf else p for p in parents],
            force=True,
        )
        return label


def _explode(gitdir: Path, tmp_path: Path) -> None:
    """Unpack every pack into loose objects, so one object can be deleted or altered."""
    packs = tmp_path / "packs"
    packs.mkdir()
    for f in (gitdir / "objects" / "pack").iterdir():
        shutil.move(str(f), packs / f.name)
    for pack in sorted(packs.glob("*.pack")):
        git(gitdir, "unpack-objects", "-q", input=pack.read_bytes())


def _loose(gitdir: Path, sha: str) -> Path:
    return gitdir / "objects" / sha[:2] / sha[2:]


# ----------------------------------------------------------------------------- the clean runs


def test_a_clean_run_passes_every_check(run):
    report, checks = _audit(run, rerun=True, fsck=True)
    assert report.ok, report.to_dict()
    assert [c.name for c in report.checks] == list(CHECKS)
    status = {n: c.status for n, c in checks.items()}
    skipped = {"gold in model inputs by design", "pre-registration precedes the run"}
    assert all(s == "PASS" for n, s in status.items() if n not in skipped), status
    assert all(status[n] == "SKIP" for n in skipped)
    assert "bit-identical (same SHAs)" in checks["seeded re-run identical"].detail
    assert "4 stores (git, graph, markdown, vector) re-read" in checks["memory stores match the ingest record"].detail
    # the short answers of the sample ('2', '30%', '4 A') are matched, not skipped
    assert "3 shorter ones as whole tokens" in checks["no expected answer in memory"].detail


def test_a_clean_sweep_counts_the_gold_it_injects_by_design(sweep):
    report, checks = _audit(sweep)
    assert report.ok, report.to_dict()
    assert checks["no gold in model inputs"].status == "PASS"
    design = checks["gold in model inputs by design"]
    assert design.status == "PASS"
    assert "identical 3/3" in design.detail and "paraphrase 3/3" in design.detail
    assert "unrelated 0/3" in design.detail
    assert checks["no expected answer in memory"].status == "SKIP"


# ----------------------------------------------------------------------------- the five that passed


@pytest.mark.parametrize("was", [False, True])
def test_a_flipped_verdict_fails(run, was):
    task = next(t for t in _config(run)["tasks"] if t["phase"] == "test" and _recorded(run, t["ref"])["correct"] is was)
    _rewrite_record(run, task["ref"], lambda r: r.update(correct=not was))
    _forge_files(run)
    report, checks = _audit(run)
    assert checks["verdicts re-derived"].status == "FAIL"
    assert task["key"] in checks["verdicts re-derived"].detail
    assert checks["result files match git"].status == "PASS"  # the forger rewrote them: the verdict check caught it
    assert not report.ok


def _recorded(run: Path, ref: str) -> dict[str, Any]:
    with ReasoningRepo(run / "central.git", create=False) as central:
        return json.loads(central.read_file(central.tip(ref), "result.json"))


def _mcq_test_task(run: Path) -> dict[str, Any]:
    return _task(run, lambda t: t["phase"] == "test" and t["arm"] == "git" and t["problem_id"].startswith("rec"))


def _add_trace_step(step: dict[str, Any]) -> Callable[[dict[str, bytes]], None]:
    def change(files: dict[str, bytes]) -> None:
        files["trace.jsonl"] = files["trace.jsonl"] + (json.dumps(step) + "\n").encode()

    return change


def test_gold_written_into_a_trace_fails(run):
    task = _mcq_test_task(run)
    p = _problem(run, task["problem_id"])
    step = {"type": "hint", "expected_answer": p["answer"], "gold_letter": p["gold_letter"]}
    label = _rebuild_leaf(run, task["ref"], _add_trace_step(step))
    _forge_files(run)
    _, checks = _audit(run)
    row = checks["no gold in model inputs"]
    assert row.status == "FAIL", row.detail
    assert "expected_answer" in row.detail and "gold_letter" in row.detail and f"({label})" in row.detail
    assert checks["objects intact"].status == "PASS" and checks["every node a commit"].status == "PASS"


def test_gold_in_a_tool_observation_fails(run):
    task = _mcq_test_task(run)
    letter = _problem(run, task["problem_id"])["gold_letter"]
    step = {"type": "action", "action": "calculator", "observation": f"The expected answer is ({letter})."}
    _rebuild_leaf(run, task["ref"], _add_trace_step(step))
    _, checks = _audit(run)
    assert checks["no gold in model inputs"].status == "FAIL"
    assert "observation" in checks["no gold in model inputs"].detail


def test_gold_in_a_prompt_fails(run):
    task = _task(run, lambda t: t["phase"] == "test" and t["arm"] == "none" and t["problem_id"].startswith("sample"))
    answer = _problem(run, task["problem_id"])["answer"]

    def change(files: dict[str, bytes]) -> None:
        meta = json.loads(files["metadata.json"])
        meta["prompt"] += f"\n\nHint: the answer is {answer}."
        files["metadata.json"] = (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()

    _rebuild_leaf(run, task["ref"], change)
    _, checks = _audit(run)
    assert checks["no gold in model inputs"].status == "FAIL"
    assert "prompt" in checks["no gold in model inputs"].detail


def test_gold_in_a_prompt_fails_even_in_an_arm_that_injects_it_by_design(sweep):
    task = _task(sweep, lambda t: t["arm"] == "identical")
    letter = _problem(sweep, task["problem_id"])["gold_letter"]

    def change(files: dict[str, bytes]) -> None:
        meta = json.loads(files["metadata.json"])
        meta["prompt"] += f"\n\n(The correct answer is {letter}.)"
        files["metadata.json"] = (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()

    _rebuild_leaf(sweep, task["ref"], change, winner=True)
    _, checks = _audit(sweep)
    assert checks["no gold in model inputs"].status == "FAIL"
    assert task["key"] in checks["no gold in model inputs"].detail


@pytest.mark.parametrize("text", ["For the charge question the answer is {a}.", "Remember: x = {a}."])
def test_a_short_answer_in_memory_fails(run, text):
    config = _config(run)
    pid = next(i for i in config["split"]["test"] if len(_problem(run, i)["answer"]) < MIN_ANSWER_CHARS)
    answer = _problem(run, pid)["answer"]
    with ReasoningRepo(run / "central.git", create=False) as central:
        study_ref = next(iter(central.refs(LESSON_PREFIX)))
        central.commit_files(study_ref, {"lessons/zz/hint.md": text.format(a=answer) + "\n"}, "a lesson\n")
    _, checks = _audit(run)
    row = checks["no expected answer in memory"]
    assert row.status == "FAIL", row.detail
    assert f"{answer!r} of {pid}" in row.detail
    assert checks["memory stores match the ingest record"].status == "PASS"  # a study ref, not a store


def test_a_short_answer_by_chance_is_listed_not_failed(run):
    pid = next(i for i in _config(run)["split"]["test"] if _problem(run, i)["answer"] == "2")
    with ReasoningRepo(run / "central.git", create=False) as central:
        study_ref = next(iter(central.refs(LESSON_PREFIX)))
        central.commit_files(study_ref, {"lessons/zz/hint.md": "Check both cases: at most 2 roots.\n"}, "lesson\n")
    _, checks = _audit(run)
    row = checks["no expected answer in memory"]
    assert row.status == "PASS", row.detail
    assert "1 whole-token occurrences by chance" in row.detail and pid in row.detail


@pytest.mark.parametrize("backend", ["markdown", "graph", "vector"])
def test_a_store_changed_after_the_run_fails(run, backend):
    with get_backend(backend, path=run / "memory" / backend) as store:
        store.add_insight("Always restate the problem in your own words before any algebra.")
    _, checks = _audit(run)
    row = checks["memory stores match the ingest record"]
    assert row.status == "FAIL", row.detail
    assert f"memory/{backend} holds 4 lessons now, its ingest record 3" in row.detail
    assert checks["fresh memory per question"].status == "PASS"  # what the records say did not change


def test_a_store_file_edited_by_hand_fails(run):
    md = run / "memory" / "markdown" / "memory.md"
    text = md.read_text()
    md.write_text(text.replace("re-check each computation", "trust the first computation", 1))
    _, checks = _audit(run)
    assert checks["memory stores match the ingest record"].status == "FAIL"


def test_an_answer_leaked_into_the_git_memory_fails(run):
    config = _config(run)
    leak = next(
        _problem(run, i)["answer"]
        for i in config["split"]["test"]
        if len(_problem(run, i)["answer"]) >= MIN_ANSWER_CHARS
    )
    with GitMemory(repo=ReasoningRepo.open(run / "memory" / "git")) as mem:
        mem.add_insight(f"When in doubt the answer is {leak}, remember it.")
    report, checks = _audit(run)
    assert (
        checks["no expected answer in memory"].status == "FAIL"
        and repr(leak) in checks["no expected answer in memory"].detail
    )
    assert checks["memory stores match the ingest record"].status == "FAIL"  # the git memory moved after ingest
    assert not report.ok


def test_a_deleted_node_object_is_a_fail_row_naming_it(run, tmp_path):
    gitdir = run / "central.git"
    _explode(gitdir, tmp_path)
    task = _mcq_test_task(run)
    with ReasoningRepo(gitdir, create=False) as central:
        node = central.git.read_commit(central.tip(task["ref"])).parents[1]
    _loose(gitdir, node).unlink()
    report, checks = _audit(run, fsck=True)  # must not raise "history walk failed"
    row = checks["objects intact"]
    assert row.status == "FAIL" and f"commit {node} is missing" in row.detail and task["problem_id"] in row.detail
    assert checks["every node a commit"].status == "FAIL" and node in checks["every node a commit"].detail
    assert checks["git fsck central.git"].status == "FAIL"
    assert checks["split disjoint"].status == "PASS"  # the checks that do not need the object still ran
    assert not report.ok


def test_a_deleted_or_altered_blob_is_named(run, tmp_path):
    gitdir = run / "central.git"
    _explode(gitdir, tmp_path)
    task = _mcq_test_task(run)
    with ReasoningRepo(gitdir, create=False) as central:
        node = central.git.read_commit(central.tip(task["ref"])).parents[1]
        trace = central.list_files(node)["trace.jsonl"]
        thought = central.list_files(node)["thought.md"]
    _loose(gitdir, trace).unlink()
    _loose(gitdir, thought).chmod(0o644)
    _loose(gitdir, thought).write_bytes(zlib.compress(b"blob 5\x00hello"))
    _, checks = _audit(run)
    row = checks["objects intact"]
    assert row.status == "FAIL"
    assert f"object {trace} at trace.jsonl of commit {node} is missing" in row.detail
    assert f"object {thought} at thought.md" in row.detail and "altered" in row.detail


# ----------------------------------------------------------------------------- more a reviewer would try


def test_a_record_whose_answer_differs_from_its_node_fails(run):
    task = _mcq_test_task(run)
    gold = _problem(run, task["problem_id"])["gold_letter"]
    other = next(x for x in "ABCD" if x not in (gold, _recorded(run, task["ref"])["letter"]))
    _rewrite_record(run, task["ref"], lambda r: r.update(answer=other, letter=other))
    _forge_files(run)
    _, checks = _audit(run)
    row = checks["answers match the winning nodes"]
    assert row.status == "FAIL" and f"record answer {other!r}" in row.detail


def test_records_swapped_between_tasks_fail(run):
    a = _task(run, lambda t: t["phase"] == "test" and t["arm"] == "git")
    b = _task(run, lambda t: t["phase"] == "test" and t["arm"] == "markdown" and t["problem_id"] != a["problem_id"])
    with ReasoningRepo(run / "central.git", create=False) as central:
        sa, sb = central.tip(a["ref"]), central.tip(b["ref"])
        central.set_ref(a["ref"], sb)
        central.set_ref(b["ref"], sa)
    _, checks = _audit(run)
    assert checks["answers match the winning nodes"].status == "FAIL"
    assert f"the record is of markdown/{b['problem_id']}" in checks["answers match the winning nodes"].detail


def test_a_tampered_table_fails(run):
    table = run / "table.md"
    row = next(line for line in table.read_text().splitlines() if line.startswith("| git |"))
    cells = row.split(" | ")
    cells[2] = "100.0% [100.0, 100.0]"
    table.write_text(table.read_text().replace(row, " | ".join(cells)))
    _, checks = _audit(run)
    assert checks["result files match git"].status == "FAIL"
    assert "table.md git" in checks["result files match git"].detail


def test_a_tampered_arms_file_fails(run):
    path = run / "arms.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[1].update(correct=rows[1]["n"], accuracy=1.0, accuracy_cell="100.0% [100.0, 100.0]")
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    _, checks = _audit(run)
    assert checks["result files match git"].status == "FAIL"
    assert f"arms.jsonl {rows[1]['arm']}: correct" in checks["result files match git"].detail


def test_a_reordered_or_edited_results_file_fails(run):
    path = run / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(reversed(lines)))
    _, checks = _audit(run)
    assert "results.jsonl holds git's lines in another order" in checks["result files match git"].detail
    first = json.loads(lines[-1])
    first["correct"] = not first["correct"]
    path.write_text("".join([*lines[:-1], json.dumps(first, sort_keys=True, ensure_ascii=False) + "\n"]))
    _, checks = _audit(run)
    assert f"results.jsonl line {len(lines)} differs" in checks["result files match git"].detail


def test_a_swapped_split_fails(run):
    config = _config(run)
    split = config["split"]
    split["study"][0], split["test"][0] = split["test"][0], split["study"][0]
    _save_config(run, config)
    _, checks = _audit(run)
    assert checks["split disjoint"].status == "PASS"  # still disjoint: only re-deriving it shows the swap
    row = checks["problems match the data files"]
    assert row.status == "FAIL" and "the recorded split is not the one" in row.detail


def test_a_changed_data_file_fails(run, tmp_path):
    config = _config(run)
    copy = tmp_path / "gpqa.csv"
    copy.write_bytes(Path(config["data"]["gpqa"]["path"]).read_bytes().replace(b"Methionine", b"Valine"))
    config["data"]["gpqa"]["path"] = str(copy)
    _save_config(run, config)
    _, checks = _audit(run)
    row = checks["problems match the data files"]
    assert row.status == "FAIL" and "gpqa.csv changed since the run" in row.detail


def test_a_task_dropped_from_the_config_fails(run):
    """Dropping an arm's bad question from config.json (and its identity) breaks the paired design."""
    config = _config(run)
    task = _mcq_test_task(run)
    config["tasks"] = [t for t in config["tasks"] if t["key"] != task["key"]]
    _save_config(run, config)
    _, checks = _audit(run)
    assert "config.json lists" in checks["results complete"].detail
    config["identity"]["tasks"] = [k for k in config["identity"]["tasks"] if k != task["key"]]
    _save_config(run, config)
    _, checks = _audit(run)
    row = checks["results complete"]
    assert (
        row.status == "FAIL" and f"arm git has no task for 1 test problems (first: {task['problem_id']})" in row.detail
    )


def test_a_gold_answer_edited_in_the_config_fails(run):
    config = _config(run)
    entry = next(p for p in config["problems"] if p["kind"] == "math")
    entry["answer"] = "42"
    _save_config(run, config)
    _, checks = _audit(run)
    row = checks["problems match the data files"]
    assert row.status == "FAIL" and f"{entry['id']}: answer differ" in row.detail


def test_backends_given_different_lessons_fail(run):
    with ReasoningRepo(run / "central.git", create=False) as central:
        ref = INGEST_PREFIX + "vector"
        sha = central.tip(ref)
        given = central.read_file(sha, "lessons.jsonl").decode().splitlines()
        central.commit_files(ref, {"lessons.jsonl": "\n".join(given[:-1]) + "\n"}, "tamper\n")
    _, checks = _audit(run)
    row = checks["memory stores match the ingest record"]
    assert row.status == "FAIL" and "the backends were given different lessons" in row.detail


def test_a_result_record_that_is_not_json_fails_without_crashing(run):
    task = _mcq_test_task(run)
    with ReasoningRepo(run / "central.git", create=False) as central:
        sha = central.tip(task["ref"])
        parents = list(central.git.read_commit(sha).parents)
        central.commit_files(task["ref"], {"result.json": "{not json"}, "tamper\n", parents=parents, force=True)
    report, checks = _audit(run)
    assert checks["results complete"].status == "FAIL" and task["key"] in checks["results complete"].detail
    assert not report.ok


def test_a_missing_result_and_a_changed_record_fail(run):
    config = _config(run)
    ref = Task.from_dict(config["audit"]["rerun_task"]).result_ref
    other = next(t["ref"] for t in config["tasks"] if t["ref"] != ref)
    _rewrite_record(run, ref, lambda r: r.update(answer="a different answer"))
    with ReasoningRepo(run / "central.git", create=False) as central:
        central.delete_ref(other)
    _, checks = _audit(run, rerun=True)
    assert checks["results complete"].status == "FAIL"
    assert checks["seeded re-run identical"].status == "FAIL"


def test_a_gold_letter_that_differs_between_arms_fails(run):
    task = _mcq_test_task(run)
    _rewrite_record(run, task["ref"], lambda r: r.update(gold_letter="D" if r["gold_letter"] != "D" else "A"))
    _, checks = _audit(run)
    assert checks["same gold letters across arms"].status == "FAIL"


# ----------------------------------------------------------------------------- surface


def test_answer_needles_split_long_from_short():
    assert answer_needles("\\frac{7}{12}") == (["\\frac{7}{12}"], [])
    assert answer_needles(" 24 ") == ([], ["24"])
    assert answer_needles("9 E1", 4) == (["9 E1"], [])
    assert answer_needles("") == ([], [])


def test_not_a_run_directory_is_a_user_error(tmp_path):
    with pytest.raises(ConfigError, match="not a benchmark run"):
        audit_run(tmp_path)


def test_a_config_that_does_not_describe_a_run_is_a_user_error(run):
    config = _config(run)
    for t in config["tasks"]:
        del t["ref"]
    _save_config(run, config)
    with pytest.raises(ConfigError, match="does not describe a run"):
        audit_run(run, rerun=False)


def _cli() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command("noop")  # a second command keeps typer from collapsing the app into `audit`
    def noop() -> None:
        """Nothing."""

    return app


def test_got_audit_command_exits_nonzero_on_fail(run):
    runner = CliRunner()
    ok = runner.invoke(_cli(), ["audit", str(run), "--no-rerun", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    shutil.rmtree(run / "central.git" / "refs" / "got" / "results" / "git")
    bad = runner.invoke(_cli(), ["audit", str(run), "--no-rerun"])
    assert bad.exit_code == 1 and "FAIL" in bad.output


def test_got_audit_reports_a_deleted_object_instead_of_crashing(run, tmp_path):
    gitdir = run / "central.git"
    _explode(gitdir, tmp_path)
    with ReasoningRepo(gitdir, create=False) as central:
        node = central.git.read_commit(central.tip(_mcq_test_task(run)["ref"])).parents[1]
    _loose(gitdir, node).unlink()
    out = CliRunner().invoke(_cli(), ["audit", str(run), "--no-rerun", "--json"])
    assert out.exit_code == 1, out.output
    rows = {c["name"]: c for c in json.loads(out.output)["checks"]}
    assert rows["objects intact"]["status"] == "FAIL" and node in rows["objects intact"]["detail"]
