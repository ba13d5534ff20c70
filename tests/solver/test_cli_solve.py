"""`got solve`: prints the answer, the tree and the repository; says how to start a server when none answers."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import typer
from gitcli import git
from typer.testing import CliRunner

from got_core import ReasoningRepo
from got_core.cli import main
from got_core.cli.solve import register
from got_core.errors import InvalidInputError

QUESTION = "Which gas makes up most of Earth's atmosphere by volume?"
OPTIONS = ["Oxygen", "Nitrogen", "Argon", "Carbon dioxide"]
SCRIPT = {
    "rules": [
        ["case that option B", "78% of air is nitrogen.\nConfidence: 0.9\nFinal Answer: B"],
        ["case that option [ACD]", "A minor component.\nConfidence: 0.1\nFinal Answer: B"],
        ["Solve the problem", "Air is mostly nitrogen.\nConfidence: 0.8\nFinal Answer: B"],
        ["Compare the candidate solutions", "Candidate 1: 0.1\nCandidate 2: 0.9\nCandidate 3: 0.1\nCandidate 4: 0.1"],
        ["Check the proposed answer", "Verdict: correct\nReason: composition tables agree"],
        ["Write ONE general lesson", "Lesson: Recall standard composition tables before reasoning about gases."],
    ],
}


@pytest.fixture
def app():
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A fresh app, so `solve` stays a sub-command as in `got`."""

    register(app)
    return app


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def invoke(app, *args):
    return CliRunner().invoke(app, ["solve", *args], catch_exceptions=True)


def options(*args):
    out = []
    for option in OPTIONS:
        out += ["--choice", option]
    return [*out, *args]


def test_scripted_solve_prints_answer_tree_and_repository(app, script, tmp_path):
    res = invoke(app, QUESTION, *options("--scripted", str(script), "--repo-root", str(tmp_path / "trees")))
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "answer: B) Nitrogen" in out and "outcome success" in out
    assert "arm tot" in out and "← winner" in out and "best" in out
    for label in ("A", "B", "C", "D"):
        assert f" {label} answer B" in out
    repos = list((tmp_path / "trees").glob("*.git"))
    assert len(repos) == 1 and str(repos[0]) in out.replace("\n", "")
    assert git(repos[0], "rev-parse", "best").strip() == git(repos[0], "rev-parse", "master").strip()


def test_memory_lesson_then_read_only_memory(app, script, tmp_path):
    mem = tmp_path / "mem.git"
    common = [
        "--scripted",
        str(script),
        "--repo-root",
        str(tmp_path / "trees"),
        "--memory",
        "git",
        "--memory-path",
        str(mem),
    ]
    res = invoke(app, QUESTION, *options(*common))
    assert res.exit_code == 0 and "lesson written (model)" in res.stdout
    tip = ReasoningRepo.open(mem).tip("memory")
    res = invoke(app, QUESTION + " Answer briefly.", *options(*common, "--read-only-memory"))
    assert res.exit_code == 0 and "lesson written" not in res.stdout
    assert ReasoningRepo.open(mem).tip("memory") == tip


def test_json_output_and_other_arms(app, script, tmp_path):
    res = invoke(
        app,
        QUESTION,
        *options(
            "--scripted",
            str(script),
            "--repo-root",
            str(tmp_path),
            "--json",
            "--arm",
            "self_consistency",
            "--n",
            "3",
            "--seed",
            "4",
        ),
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["answer"] == "B" and data["arm"] == "self_consistency" and len(data["tree"]) == 4
    assert data["tree"][0]["depth"] == 0 and all(e["depth"] == 1 for e in data["tree"][1:])


def test_no_answer_exits_1_and_a_bad_script_is_a_user_error(app, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(["I am not sure."] * 20))
    res = invoke(
        app, "What is 17 * 23?", "--scripted", str(path), "--repo-root", str(tmp_path), "--tools", "", "--arm", "greedy"
    )
    assert res.exit_code == 1 and "(no answer)" in res.stdout
    assert "failed: no answer" in res.stderr and "no answer extracted" in res.stderr
    path.write_text("{not json")
    res = invoke(app, "What is 17 * 23?", "--scripted", str(path), "--repo-root", str(tmp_path))
    assert isinstance(res.exception, InvalidInputError) and "are not JSON" in str(res.exception)
    assert str(path) in str(res.exception)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_endpoint_says_how_to_start_one(tmp_path, capsys):
    code = main(["solve", QUESTION, "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--repo-root", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1  # a failure of the environment, said in one line
    assert "no model server" in err and "vllm serve" in err
    assert not list(tmp_path.iterdir())  # nothing was recorded


def test_a_live_endpoint_with_the_served_model_as_default(app, tmp_path):
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "served-model", "object": "model"}]})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(req["model"])
            self._send(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "created": 0,
                    "model": req["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "Confidence: 0.9\nFinal Answer: B"},
                        }
                    ],
                    "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
                }
            )

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        res = invoke(
            app, QUESTION, *options("--base-url", url, "--repo-root", str(tmp_path), "--arm", "greedy", "--tools", "")
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert res.exit_code == 0, res.output
    assert "answer: B) Nitrogen" in res.stdout and "55 tokens" in res.stdout
    assert seen == ["served-model"]


EXAMPLE = Path(__file__).resolve().parents[2] / "cookbooks" / "data" / "scripted_replies.json"


def test_the_shipped_scripted_replies_answer_a_question(tmp_path, capsys):
    from got_core.solver.scripted import ScriptedChatModel

    model = ScriptedChatModel.from_file(EXAMPLE)  # the documented format, loaded as users will
    assert model.remaining == 0 and model.default
    code = main(["solve", "What is 17 * 23?", "--scripted", str(EXAMPLE), "--repo-root", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "answer: 391" in out and "outcome success" in out


@pytest.mark.parametrize(
    "data, says",
    [
        ({"replies": ["x"], "rule": []}, "unknown keys 'rule'"),
        ({"rules": [["(", "x"]]}, "rule must be (regex, reply)"),
        ({"rules": [["a", 1]]}, '"rules" must be a list of [regex, reply] pairs'),
        ({"default": 3}, '"default" must be a string'),
        ({}, "holds no reply at all"),
        (7, "must hold a JSON list of reply strings"),
    ],
)
def test_a_bad_script_names_the_file_and_the_problem(tmp_path, capsys, data, says):
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(data))
    code = main(["solve", "What is 2 + 2?", "--scripted", str(path), "--repo-root", str(tmp_path / "trees")])
    err = capsys.readouterr().err
    assert code == 2 and says in err and str(path) in err and len(err.splitlines()) == 1
    assert not (tmp_path / "trees").exists()


def test_a_failed_run_says_why_on_stderr(tmp_path, capsys):
    few = tmp_path / "few.json"
    few.write_text(json.dumps(["Let me think about it."]))  # no answer, and then no reply left
    root = str(tmp_path / "trees")
    code = main(["solve", "What is 2 + 2?", "--scripted", str(few), "--repo-root", root, "--sequential"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith("failed: no answer") and "the scripted model had no reply left" in err
    code = main(["solve", "What is 2 + 2?", "--scripted", str(EXAMPLE), "--repo-root", root, "--token-cap", "20"])
    err = capsys.readouterr().err
    assert code == 1 and "the token budget ran out (raise --token-cap)" in err


def test_an_endpoint_that_refuses_the_calls_is_named(tmp_path, capsys):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"error": {"message": "forbidden", "type": "invalid_request_error"}}).encode()
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        code = main(["solve", "What is 2 + 2?", "--base-url", url, "--repo-root", str(tmp_path), "--arm", "greedy"])
    finally:
        httpd.shutdown()
        httpd.server_close()
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1
    assert "the endpoint refused the call" in err and "HTTP 403" in err
