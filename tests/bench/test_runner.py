"""Run machinery (got_core.bench.runner) and the stand-in server it is tested against."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import asdict, replace

import pytest
from timeouts import TEST_TIMEOUT

from got_core.bench.datasets import load_gpqa, load_math500
from got_core.bench.runner import (
    ModelSpec,
    Task,
    execute_task,
    memory_fingerprint,
    model_endpoint,
    open_central,
    open_memory,
    prepare_run_dir,
    read_result,
    run_tasks,
    stable_record,
    task_seed,
)
from got_core.bench.standin import StandInOpenAIServer, bench_responder, load_script
from got_core.errors import ConfigError, InvalidInputError, ModelError
from got_core.repo import ReasoningRepo
from got_core.solver.openai_compat import OpenAICompatibleModel, check_endpoint


@pytest.fixture
def server():
    with StandInOpenAIServer(responder="bench") as srv:
        yield srv


@pytest.fixture
def problems(data_dir):
    return load_math500(data_dir / "math500_sample.jsonl", limit=2) + load_gpqa(data_dir / "gpqa_sample.csv", limit=2)


def _spec(server, **kw):
    return ModelSpec(server.url, server.model, max_tokens=64, parallel_nodes=False, **kw)


def _tasks(problems, arm="greedy", method="greedy", **kw):
    return [
        Task("test_time_arms", "test", arm, asdict(p), method=method, seed=task_seed(0, p.id), order=i, **kw)
        for i, p in enumerate(problems)
    ]


# ----------------------------------------------------------------------------- the stand-in server


def test_standin_serves_models_and_scripted_completions():
    rules = [(r"capital of France", "Paris.")]
    with StandInOpenAIServer(rules, default="no idea", model="demo") as srv:
        assert check_endpoint(srv.url) == ["demo"]
        model = OpenAICompatibleModel(srv.url, "demo")
        assert model.complete([{"role": "user", "content": "What is the capital of France?"}]).text == "Paris."
        other = model.complete([{"role": "user", "content": "Anything else"}])
        assert other.text == "no idea" and other.usage.completion_tokens == 2 and not other.usage.estimated
        cut = model.complete([{"role": "user", "content": "x"}], max_tokens=1)
        assert cut.text == "no" and cut.finish_reason == "length"
        streamed = OpenAICompatibleModel(srv.url, "demo", stream=True).complete(
            [{"role": "user", "content": "capital of France"}]
        )
        assert streamed.text == "Paris." and streamed.finish_reason == "stop"
        with urllib.request.urlopen(srv.url + "/models") as resp:
            assert resp.headers["X-Got-Stand-In"] == "1"
        assert srv.n_requests == 4


def test_standin_without_a_reply_answers_an_error():
    with StandInOpenAIServer([("only this", "ok")]) as srv:
        model = OpenAICompatibleModel(srv.url, srv.model, max_retries=0)
        with pytest.raises(ModelError, match="500"):
            model.complete([{"role": "user", "content": "something else"}])
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(srv.url.replace("/v1", "/nowhere"))
        assert info.value.code == 404


def test_standin_rejects_bad_configuration(tmp_path):
    with pytest.raises(ConfigError, match="unknown built-in"):
        StandInOpenAIServer(responder="nope")
    with pytest.raises(InvalidInputError):
        StandInOpenAIServer([("(unclosed", "x")])
    bad = tmp_path / "bad.json"
    bad.write_text('{"rules": [{"pattern": 1}]}')
    with pytest.raises(InvalidInputError, match="rule 0"):
        load_script(bad)


def test_bench_responder_copies_similar_worked_examples_and_guesses_otherwise():
    question = "Question:\nWhat is the remainder when $2^{10}$ is divided by $7$?\n\nSolve the problem."
    example = (
        "Lessons from earlier problems (general advice; they may not apply here):\n- Worked example. "
        "Final answer: 2. Problem: What is the remainder when $2^{10}$ is divided by $7$? Solution: x"
    )
    unrelated = example.replace("What is the remainder when $2^{10}$ is divided by $7$?", "Name a colour.")

    def ask(system, **kw):
        return bench_responder(
            {"messages": [{"role": "system", "content": system}, {"role": "user", "content": question}], **kw}
        )

    assert ask(example).endswith("Final Answer: \\boxed{2}")
    guess = ask(unrelated)
    assert guess == ask(unrelated) and "Final Answer: \\boxed{" in guess  # deterministic
    samples = {ask("", temperature=0.7, seed=s) for s in range(8)}
    assert len(samples) > 1  # sampled calls differ by seed, as self-consistency needs
    mcq = (
        "Question:\nWhich gas?\n\nOptions:\nA) Neon\nB) Argon\nC) Xenon\nD) Radon\n\n"
        "Make the strongest honest case that option B is correct."
    )
    text = bench_responder({"messages": [{"role": "user", "content": mcq}]})
    assert text.startswith("Case for option B") and text.splitlines()[-1][-1] in "ABCD"
    lesson = bench_responder({"messages": [{"role": "user", "content": question + " Write ONE general lesson"}]})
    assert lesson.startswith("Lesson:") and "2" not in lesson


def test_standin_command_line_serves_until_terminated(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"pattern": "ping", "reply": "pong"}], "model": "cli-demo"}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "got_core.bench.standin", "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "stand-in" in line and "no model" in line
        url = line.split(" at ")[1].split(",")[0]
        reply = OpenAICompatibleModel(url, "cli-demo").complete([{"role": "user", "content": "ping"}])
        assert reply.text == "pong"
    finally:
        proc.terminate()
        assert proc.wait(timeout=TEST_TIMEOUT) == 0


# ----------------------------------------------------------------------------- tasks and results


def test_execute_task_commits_every_node_and_pushes_to_central(tmp_path, server, problems):
    task = _tasks(problems[:1], arm="tot", method="tot")[0]
    record = execute_task(task, _spec(server), tmp_path)
    assert record["problem_id"] == problems[0].id and record["method"] == "tot"
    assert isinstance(record["correct"], bool) and record["n_nodes"] == len(record["node_labels"]) >= 5
    with ReasoningRepo(tmp_path / "central.git", create=False) as central:
        stored = read_result(central, task)
        assert stable_record(stored) == stable_record(record)
        labels = [
            json.loads(central.read_file(c.oid, "metadata.json"))["label"]
            for c in central.log(stored["result_sha"])[1:]
        ]
        assert sorted(labels) == sorted(record["node_labels"])
        assert central.refs("refs/notes/runs/")  # the scores travel too
    with ReasoningRepo(task.repo_path(tmp_path), create=False) as own:
        assert own.read_node("master").metadata["label"] == record["winner_label"]


def test_a_finished_task_is_read_back_not_solved_again(tmp_path, server, problems):
    task = _tasks(problems[:1])[0]
    first = execute_task(task, _spec(server), tmp_path)
    calls = server.n_requests
    again = execute_task(task, _spec(server), tmp_path)
    assert server.n_requests == calls and again["result_sha"] == first["result_sha"]


def test_a_half_written_repository_is_solved_from_scratch(tmp_path, server, problems):
    task = _tasks(problems[:1])[0]
    clean = execute_task(task, _spec(server), tmp_path / "a")
    path = task.repo_path(tmp_path / "b")
    with ReasoningRepo.open(path) as partial:  # a killed worker left a node but no result
        partial.commit_files("master", {"thought.md": "half"}, "half-written\n")
    redone = execute_task(task, _spec(server), tmp_path / "b")
    assert stable_record(redone) == stable_record(clean)
    with ReasoningRepo(path, create=False) as repo:
        assert all("half" not in c.message for c in repo.log("master"))


def test_pool_and_inline_runs_agree_and_resume_skips_done_tasks(tmp_path, server, problems):
    tasks = _tasks(problems) + _tasks(problems, arm="sc", method="self_consistency")
    inline = run_tasks(tasks, tmp_path / "inline", _spec(server), workers=1, progress=False)
    pooled = run_tasks(tasks, tmp_path / "pool", _spec(server), workers=2, progress=False)
    assert [stable_record(r) for r in inline] == [stable_record(r) for r in pooled]
    assert [r["arm"] for r in inline] == ["greedy"] * 4 + ["sc"] * 4
    calls = server.n_requests
    again = run_tasks(tasks, tmp_path / "pool", _spec(server), workers=2, progress=False)
    assert server.n_requests == calls
    assert [r["result_sha"] for r in again] == [r["result_sha"] for r in pooled]


def test_duplicate_task_keys_are_refused(tmp_path, server, problems):
    with pytest.raises(ConfigError, match="unique"):
        run_tasks(_tasks(problems[:1]) * 2, tmp_path, _spec(server), progress=False)


def test_task_round_trips_and_seeds_are_stable(problems):
    task = _tasks(problems[:1], memory={"mode": "shared", "backend": "git", "path": "memory/git"})[0]
    assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task
    assert task.result_ref == "refs/got/results/greedy/sample%2Falgebra%2F001.json"
    assert task_seed(0, "a") == task_seed(0, "a") != task_seed(0, "b")
    assert task_seed(1, "a") != task_seed(0, "a")


# ----------------------------------------------------------------------------- memory and run dirs


def test_injected_memory_holds_exactly_the_injected_lessons(tmp_path, problems):
    lesson = {
        "text": "Worked example. Final answer: 5. Problem: p Solution: s",
        "topic_key": "worked-example",
        "outcome": "success",
        "score": 1.0,
    }
    for backend in ("git", "markdown"):
        task = _tasks(problems[:1], memory={"mode": "injected", "backend": backend, "lessons": [lesson]})[0]
        with ReasoningRepo.open(tmp_path / backend / "r.git") as repo:
            mem = open_memory(task.memory, tmp_path, tmp_path / backend, repo, task)
            fp = memory_fingerprint(mem)
            assert fp["n"] == 1 and mem.read_only
            assert mem.add_insight("a new lesson that must not be stored") is None
            assert memory_fingerprint(mem)["n"] == 1
    study = _tasks(problems[:1], memory={"mode": "study", "backend": "git"})[0]
    with ReasoningRepo.open(tmp_path / "study.git") as repo:
        mem = open_memory(study.memory, tmp_path, tmp_path, repo, study)
        fp = memory_fingerprint(mem)
        assert fp["n"] == 0 and fp["tip"] is None and not mem.read_only
    assert memory_fingerprint(None) is None
    with pytest.raises(ConfigError, match="memory mode"):
        open_memory({"mode": "odd"}, tmp_path, tmp_path, None, study)


def test_run_dir_refuses_to_mix_runs(tmp_path):
    config = {"identity": {"seed": 0, "tasks": ["a"]}, "runtime": {"workers": 1}}
    prepare_run_dir(tmp_path / "r", config, resume=False)
    with pytest.raises(ConfigError, match="--resume"):
        prepare_run_dir(tmp_path / "r", config, resume=False)
    resumed = prepare_run_dir(tmp_path / "r", {**config, "runtime": {"workers": 4}}, resume=True)
    assert resumed["resumed"] == 1
    with pytest.raises(ConfigError, match="seed"):
        prepare_run_dir(tmp_path / "r", {**config, "identity": {"seed": 1, "tasks": ["a"]}}, resume=True)
    open_central(tmp_path / "r").close()
    assert (tmp_path / "r" / "central.git").exists()


def test_model_endpoint_starts_the_standin_or_checks_the_server(server):
    spec = ModelSpec("http://127.0.0.1:0/v1", "got-standin", standin={"responder": "bench"})
    with model_endpoint(spec) as live:
        assert live.base_url != spec.base_url and check_endpoint(live.base_url) == ["got-standin"]
    with pytest.raises(ConfigError, match="serves"), model_endpoint(replace(_spec(server), model="other")):
        pass
    with model_endpoint(_spec(server)) as same:
        assert same == _spec(server)


def test_a_server_that_stops_answering_leaves_no_result(tmp_path, problems):
    from got_core.bench.runner import BenchRunError

    srv = StandInOpenAIServer(responder="bench").start()
    spec = _spec(srv)
    srv.stop()
    task = _tasks(problems[:1])[0]
    with pytest.raises(BenchRunError, match="--resume"):
        execute_task(task, spec, tmp_path)
    assert not (tmp_path / "central.git").exists() or open_central(tmp_path).tip(task.result_ref) is None


@pytest.mark.parametrize("leftover", ["empty dir", "objects only", "garbage HEAD"])
def test_a_repository_killed_while_being_created_is_started_over(tmp_path, server, problems, leftover):
    task = _tasks(problems[:1])[0]
    clean = execute_task(task, _spec(server), tmp_path / "a")
    path = task.repo_path(tmp_path / "b")
    path.mkdir(parents=True)
    if leftover != "empty dir":
        (path / "objects").mkdir()
    if leftover == "garbage HEAD":
        (path / "HEAD").write_text("not a ref\n")
    redone = execute_task(task, _spec(server), tmp_path / "b")
    assert stable_record(redone) == stable_record(clean)
