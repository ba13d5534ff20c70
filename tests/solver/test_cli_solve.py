"""`got solve`: prints the answer, the tree and the repository; says how to start a server when none answers."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
