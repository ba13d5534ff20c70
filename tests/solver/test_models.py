"""The chat-model seam: recording base, scripted model, and the OpenAI-compatible client.

The client is tested against a stand-in HTTP server on 127.0.0.1 (started here),
which answers /v1/chat/completions from a per-test script of behaviours.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from timeouts import TEST_TIMEOUT

from got_core.errors import ConfigError, InvalidInputError, ModelError, ModelResponseError, ModelTimeoutError
from got_core.solver.models import BaseChatModel, ChatModel, ChatResponse, ToolCall, Usage
from got_core.solver.openai_compat import OpenAICompatibleModel, check_endpoint, from_env
from got_core.testing import ScriptedChatModel

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is two plus two"}]


# ----------------------------------------------------------------------------- stand-in server


def completion(text="hello", prompt=7, completion_tokens=3, tool_calls=None, finish="stop"):
    message = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "stand-in-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        },
    }


def chunk(content=None, finish=None, usage=None):
    choices = [] if usage else [{"index": 0, "delta": {"content": content} if content else {}, "finish_reason": finish}]
    data = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "stand-in-model", "choices": choices}
    if usage:
        data["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return data


class StandIn:
    """Script of behaviours, one per POST; records requests and peak concurrency."""

    def __init__(self):
        self.script = deque()
        self.requests = []
        self.inflight = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    # behaviours: each takes the request handler and writes a response
    def ok(self, **kw):
        self.script.append(lambda h: h.send_json(200, completion(**kw)))

    def status(self, code, headers=None):
        self.script.append(lambda h: h.send_json(code, {"error": {"message": f"stand-in {code}"}}, headers))

    def slow(self, seconds, **kw):
        def act(h):
            self.release.wait(seconds)
            h.send_json(200, completion(**kw))

        self.script.append(act)

    def raw(self, body: bytes):
        self.script.append(lambda h: h.send_raw(200, body, "application/json"))

    def sse(self, events, done=True):
        def act(h):
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Connection", "close")
            h.end_headers()
            for e in events:
                h.wfile.write(f"data: {json.dumps(e)}\n\n".encode())
                h.wfile.flush()
            if done:
                h.wfile.write(b"data: [DONE]\n\n")

        self.script.append(act)

    def sse_broken(self, events):
        """Chunked transfer cut off in the middle of a chunk (a dropped connection)."""

        def act(h):
            h.protocol_version = "HTTP/1.1"
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for e in events:
                data = f"data: {json.dumps(e)}\n\n".encode()
                h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            h.wfile.write(b'400\r\ndata: {"trunc')
            h.wfile.flush()
            h.close_connection = True

        self.script.append(act)


class _QuietServer(ThreadingHTTPServer):
    """A client that timed out closes its socket; the handler's write then fails: not worth a traceback."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def server():
    state = StandIn()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_json(self, code, obj, headers=None):
            self.send_raw(code, json.dumps(obj).encode(), "application/json", headers)

        def send_raw(self, code, body, ctype, headers=None):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.endswith("/models"):
                self.send_json(200, {"object": "list", "data": [{"id": "stand-in-model", "object": "model"}]})
            else:
                self.send_json(404, {"error": "no"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.requests.append((self.path, body))
                state.inflight += 1
                state.peak = max(state.peak, state.inflight)
                act = state.script.popleft() if state.script else (lambda h: h.send_json(200, completion()))
            try:
                act(self)
            finally:
                with state.lock:
                    state.inflight -= 1

    httpd = _QuietServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


def client(server, **kw):
    kw.setdefault("backoff", 0.01)
    return OpenAICompatibleModel(server.url, "stand-in-model", **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- OpenAI-compatible client


def test_answer_and_usage_recorded(server):
    server.ok(text="four", prompt=11, completion_tokens=2)
    m = client(server, seed=7, max_tokens=64)
    r = m.complete(MSGS, stop=["\nObservation:"])
    assert r.text == "four" and r.finish_reason == "stop" and r.model == "stand-in-model"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.estimated) == (11, 2, False)
    assert isinstance(m, ChatModel)
    rec = m.calls[-1]
    assert (rec.prompt_tokens, rec.completion_tokens, rec.retries, rec.error) == (11, 2, 0, None)
    assert rec.latency_ms == r.latency_ms and r.latency_ms >= 0
    assert m.usage.total_tokens == 13 and m.n_calls == 1
    path, body = server.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "stand-in-model" and body["messages"] == MSGS
    assert body["seed"] == 7 and body["max_tokens"] == 64 and body["temperature"] == 0.0
    assert body["stop"] == ["\nObservation:"]


def test_per_call_options_override_defaults(server):
    m = client(server, temperature=0.0, max_tokens=512)
    m.complete(MSGS, temperature=0.7, max_tokens=9, tools=[{"type": "function", "function": {"name": "t"}}])
    body = server.requests[0][1]
    assert body["temperature"] == 0.7 and body["max_tokens"] == 9 and "seed" not in body
    assert body["tools"][0]["function"]["name"] == "t"


def test_native_tool_calls_parsed(server):
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": '{"input": "2+2"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "sympy", "arguments": "not json"}},
    ]
    server.ok(text=None, tool_calls=calls, finish="tool_calls")
    r = client(server).complete(MSGS)
    assert r.text == "" and r.finish_reason == "tool_calls"
    assert r.tool_calls == [ToolCall("call_1", "calculator", {"input": "2+2"}), ToolCall("call_2", "sympy", "not json")]


def test_retries_a_500_then_succeeds(server):
    server.status(500)
    server.ok(text="fine")
    m = client(server)
    assert m.complete(MSGS).text == "fine"
    assert len(server.requests) == 2
    assert m.calls[-1].retries == 1 and m.n_calls == 1


def test_429_backs_off_and_retries(server):
    server.status(429, {"Retry-After": "0"})
    server.status(429)
    server.ok(text="after the rate limit")
    m = client(server, max_retries=3)
    r = m.complete(MSGS)
    assert r.text == "after the rate limit" and r.retries == 2
    assert len(server.requests) == 3


def test_429_gives_up_after_max_retries(server):
    for _ in range(3):
        server.status(429)
    m = client(server, max_retries=1)
    with pytest.raises(ModelError) as info:
        m.complete(MSGS)
    assert type(info.value) is ModelError and "429" in str(info.value)
    assert len(server.requests) == 2
    assert m.calls[-1].error.startswith("ModelError") and m.calls[-1].retries == 1


def test_client_errors_are_not_retried(server):
    server.status(404)
    with pytest.raises(ModelError, match="404.*/v1"):
        client(server).complete(MSGS)
    assert len(server.requests) == 1


def test_backoff_grows_exponentially_and_honours_retry_after(server):
    m = client(server, backoff=0.5)
    assert 0.25 <= m.backoff_delay(0) <= 0.5
    assert 2.0 <= m.backoff_delay(3) <= 4.0
    assert m.backoff_delay(0, retry_after=5.0) == 5.0
    assert m.backoff_delay(30) == 60.0


def test_slow_reply_times_out(server):
    server.slow(TEST_TIMEOUT)  # answers only when the test ends
    m = client(server, timeout=0.3, max_retries=0)
    with pytest.raises(ModelTimeoutError, match="within 0.3 s"):
        m.complete(MSGS)
    assert m.calls[-1].error.startswith("ModelTimeoutError")


def test_timeout_is_retried(server):
    server.slow(TEST_TIMEOUT)  # answers only when the test ends
    server.ok(text="second try")
    # the retry must not time out: 2 s leaves a loaded machine room for a local reply
    assert client(server, timeout=2, max_retries=1).complete(MSGS).text == "second try"


@pytest.mark.parametrize("body", [b"{this is not json", b'{"id": "x", "choices": []}', b"[]"])
def test_malformed_answers_are_response_errors(server, body):
    server.raw(body)
    with pytest.raises(ModelResponseError):
        client(server).complete(MSGS)
    assert len(server.requests) == 1


def test_stream_assembles_text_and_usage(server):
    server.sse([chunk("Final "), chunk("Answer: 4"), chunk(finish="stop"), chunk(usage=(5, 3))])
    r = client(server, stream=True).complete(MSGS)
    assert r.text == "Final Answer: 4" and r.finish_reason == "stop"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (5, 3)
    assert server.requests[0][1]["stream"] is True


def test_stream_without_finish_reason_is_truncated(server):
    server.sse([chunk("partial "), chunk("answer")], done=False)
    with pytest.raises(ModelResponseError, match="truncated"):
        client(server, stream=True).complete(MSGS)


def test_stream_cut_mid_chunk_is_a_response_error(server):
    server.sse_broken([chunk("partial ")])
    with pytest.raises(ModelResponseError):
        client(server, stream=True).complete(MSGS)


def test_concurrency_limit_bounds_requests_in_flight(server):
    for _ in range(6):
        server.slow(0.2, text="x")
    m = client(server, concurrency=2, timeout=30)
    with ThreadPoolExecutor(6) as pool:
        texts = list(pool.map(lambda _: m.complete(MSGS).text, range(6)))
    assert texts == ["x"] * 6
    assert server.peak <= 2 and len(server.requests) == 6 and m.n_calls == 6


async def test_acomplete_matches_complete(server):
    server.ok(text="sync")
    server.ok(text="async")
    m = client(server)
    assert m.complete(MSGS).text == "sync"
    r = await m.acomplete(MSGS)
    assert r.text == "async" and m.n_calls == 2 and m.usage.prompt_tokens == 14


def test_a_server_that_cannot_be_reached_says_how_to_start_one():
    m = OpenAICompatibleModel(f"http://127.0.0.1:{free_port()}/v1", "m", max_retries=1, backoff=0.0, timeout=2)
    with pytest.raises(ModelError, match="vllm serve"):
        m.complete(MSGS)
    assert m.calls[-1].retries == 1


def test_check_endpoint(server):
    assert check_endpoint(server.url) == ["stand-in-model"]
    with pytest.raises(ModelError, match="vllm serve <model>"):
        check_endpoint(f"http://127.0.0.1:{free_port()}/v1", timeout=2)


def test_from_env(monkeypatch, server):
    monkeypatch.setenv("GOT_BASE_URL", server.url)
    monkeypatch.setenv("GOT_MODEL", "stand-in-model")
    monkeypatch.setenv("GOT_API_KEY", "secret")
    m = from_env(max_retries=0)
    assert (m.base_url, m.model_name, m.max_retries) == (server.url, "stand-in-model", 0)
    assert m.complete(MSGS).text == "hello"
    assert OpenAICompatibleModel.from_env({"GOT_BASE_URL": "http://h/v1", "GOT_MODEL": "q"}).model_name == "q"
    monkeypatch.delenv("GOT_BASE_URL")
    with pytest.raises(ConfigError, match="GOT_BASE_URL"):
        from_env()


def test_bad_configuration_is_refused():
    with pytest.raises(ConfigError):
        OpenAICompatibleModel("http://127.0.0.1:1/v1", "m", concurrency=0)
    with pytest.raises(ConfigError):
        OpenAICompatibleModel("", "m")


# ----------------------------------------------------------------------------- base class and scripted model


class Echo(BaseChatModel):
    def _complete(self, messages, **kwargs):
        if messages[-1]["content"] == "fail":
            raise ModelError("boom")
        return ChatResponse(text=str(sorted(kwargs)), usage=Usage(2, 1))


def test_base_records_successes_failures_and_bounds_history():
    m = Echo("echo", history=3)
    assert m.complete(MSGS, temperature=0.1, seed=1).text == "['seed', 'temperature']"
    with pytest.raises(ModelError):
        m.complete([{"role": "user", "content": "fail"}])
    for _ in range(3):
        m.complete(MSGS)
    assert len(m.calls) == 3 and m.n_calls == 5
    assert m.usage == Usage(8, 4)
    assert all(c.model == "echo" and c.error is None for c in m.calls)
    with pytest.raises(InvalidInputError):
        m.complete([])
    with pytest.raises(InvalidInputError):
        m.complete([{"content": "no role"}])


def test_scripted_replies_rules_default_and_exhaustion():
    m = ScriptedChatModel(
        [
            "first",
            lambda msgs: f"saw {len(msgs)} messages",
            ChatResponse(text="", tool_calls=[ToolCall("1", "calculator", {"input": "1+1"})]),
        ],
        rules=[(r"(?i)capital of france", "Paris")],
    )
    assert m.complete([{"role": "user", "content": "What is the capital of France?"}]).text == "Paris"
    assert m.complete(MSGS).text == "first"
    assert m.complete(MSGS).text == "saw 2 messages"
    r = m.complete(MSGS)
    assert r.tool_calls[0].name == "calculator" and r.finish_reason == "tool_calls"
    assert m.remaining == 0
    with pytest.raises(ModelError, match="no reply left"):
        m.complete(MSGS)
    assert m.calls[-1].error.startswith("ModelError")
    m.default = "fallback"
    assert m.complete(MSGS).text == "fallback"
    assert len(m.received) == 6 and m.received[0][0]["content"].startswith("What is")


def test_scripted_counts_tokens_and_honours_stop():
    m = ScriptedChatModel(["Action: calculator\nAction Input: 2+2\nObservation: 4"])
    r = m.complete(MSGS, stop=["\nObservation:"])
    assert r.text == "Action: calculator\nAction Input: 2+2"
    assert r.usage == Usage(7, 5, estimated=True) and r.latency_ms == 0.0
    assert m.usage.total_tokens == 12


async def test_scripted_async():
    m = ScriptedChatModel(default="same")
    assert (await m.acomplete(MSGS)).text == m.complete(MSGS).text == "same"
    assert m.n_calls == 2


def test_solver_modules_import_no_heavy_dependency():
    code = (
        "import sys, got_core.solver.models, got_core.solver.tools, got_core.solver.react, "
        "got_core.solver.scripted; heavy = [m for m in ('openai', 'sympy', 'pulp', 'httpx', 'langchain_core', "
        "'llama_index') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
