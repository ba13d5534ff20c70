"""A stand-in OpenAI-compatible HTTP server that answers from a script (a test double, not a model).

CI and the cookbooks need "a model server" without weights: this one speaks the
subset of the OpenAI wire protocol the solver uses — ``GET /v1/models`` and
``POST /v1/chat/completions`` (plain and ``stream: true`` server-sent events) —
on 127.0.0.1, and answers deterministically from a script:

* **rules**: ``[(regex, reply), ...]``; the first regex that matches
  (``re.search``) the last user message answers;
* a **responder** callable ``f(request) -> str`` that sees the whole request
  (messages, seed, temperature, max_tokens);
* a **default** reply when nothing matched (else HTTP 500 with a message).

Every response names the server as a stand-in (model owner ``got-standin``,
header ``X-Got-Stand-In: 1``, ``system_fingerprint`` ``got-standin``), so no
log can mistake it for a real model. Token counts are whitespace words.

The built-in responder ``"bench"`` (:func:`bench_responder`) plays the solver's
prompts (§3.2 of arXiv 2606.14470) well enough for the benchmark cookbooks to run
end to end: it argues, judges, verifies, paraphrases and writes answer-free lessons, guesses
answers by a hash of the question (and the request seed, so self-consistency
samples differ), and *copies* the answer of a worked example in its system
prompt when that example's problem shares most of its words with the question —
a caricature of the copyability threshold (§5) that makes the sweep's plot
non-trivial without a model.

Use it in-process::

    with StandInOpenAIServer(responder="bench") as server:
        model = OpenAICompatibleModel(server.url, server.model)

or from the command line (CI)::

    python -m got_core.bench.standin --port 8765 --builtin bench
    python -m got_core.bench.standin --port 8765 --script rules.json

A script file is JSON: ``{"model": "...", "rules": [{"pattern": "...", "reply": "..."}],
"default": "...", "builtin": "bench", "latency_ms": 0}`` (every key optional).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from got_core.errors import ConfigError, InvalidInputError

__all__ = ["BUILTIN_RESPONDERS", "StandInOpenAIServer", "bench_responder", "load_script", "main"]

#: A responder sees the parsed request body and returns the assistant text.
Responder = Callable[[dict[str, Any]], str]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_WORD = re.compile(r"[a-z0-9]+")


# ----------------------------------------------------------------------------- the "bench" script


def _last(messages: Sequence[dict[str, Any]], role: str) -> str:
    for msg in reversed(messages):
        if msg.get("role") == role:
            content = msg.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _question(prompt: str) -> tuple[str, list[str]]:
    """The question text and the option texts of a solver prompt (see ``_prompts.question_block``)."""
    start = prompt.find("Question:\n")
    if start < 0:
        return prompt.strip(), []
    body = prompt[start + len("Question:\n") :]
    if "\n\nOptions:\n" in body:
        question, rest = body.split("\n\nOptions:\n", 1)
        block = rest.split("\n\n", 1)[0]
        return question.strip(), [o.strip() for o in re.findall(r"^[A-Z]\) (.*)$", block, re.MULTILINE)]
    return body.split("\n\n", 1)[0].strip(), []


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _copied(system: str, question: str) -> str | None:
    """The answer of a worked example in the system prompt whose problem resembles ``question``.

    Resemblance is word overlap (Jaccard ≥ 0.5 between the example's problem and the
    question): an identical or paraphrased example is copied, a different problem is not.
    """
    for m in re.finditer(r"Final answer:\s*(.+?)\.\s+Problem:\s*(.+?)(?:\s+Solution:|$)", system, re.DOTALL):
        answer, problem = m.group(1).strip(), m.group(2).strip()
        a, b = _words(problem), _words(question)
        if a and b and len(a & b) / len(a | b) >= 0.5:
            return answer
    return None


def _digest(*parts: object) -> int:
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8"))
    return int.from_bytes(h.digest()[:8], "big")


def _pick(request: dict[str, Any], question: str, options: list[str], system: str) -> str:
    """The stand-in's answer: a copied one, else a deterministic guess (a letter or an integer)."""
    copied = _copied(system, question)
    if copied is not None:
        if options:
            norm = copied.strip().lower()
            for i, opt in enumerate(options):
                if opt.strip().lower() == norm:
                    return _LETTERS[i]
        else:
            return copied
    temp = request.get("temperature") or 0.0
    # Greedy calls ignore the seed (temperature 0 is deterministic anyway); sampled calls use it,
    # so self-consistency samples disagree as a real model's would.
    salt = request.get("seed") if temp and temp > 0 else 0
    h = _digest(question, salt)
    if options:
        return _LETTERS[h % len(options)]
    return str(h % 40)


def _fmt(answer: str, options: list[str]) -> str:
    return answer if options else "\\boxed{" + answer + "}"


def bench_responder(request: dict[str, Any]) -> str:
    """The built-in script for the benchmark cookbooks (see the module docstring).

    Args:
        request: the chat-completion request body.

    Returns:
        Text in the solver's formats: ``Confidence: …`` / ``Final Answer: …`` tails,
        ``Candidate N: score`` lines, ``Verdict: …`` lines, ``Lesson: …``.
    """
    messages = request.get("messages") or []
    last = _last(messages, "user")
    system = _last(messages, "system")
    question, options = _question(last)
    if "Rewrite the following math problem in different words" in last:
        m = re.search(r"Problem: (.*?)\n\nReply with one line", last, re.DOTALL)
        original = " ".join((m.group(1) if m else question).split())
        return "Paraphrase: Put differently, the task is this. " + re.sub(
            r"^(What is|Find|Compute)\b", "Work out", original
        )
    if "Write ONE general lesson" in last:
        topic = sorted(w for w in _words(question) if len(w) >= 6 and not w.isdigit())[:3]
        about = ", ".join(topic) or "this kind of problem"
        return (
            f"Lesson: On problems about {about}, restate exactly what is asked, list the given "
            "quantities with their units, and re-check each computation before committing."
        )
    pick = _pick(request, question, options, system)
    if "Compare the candidate solutions" in last:
        lines = []
        for label, answer in re.findall(r"^Candidate (\w+) \(answer: (.*?)\):", last, re.MULTILINE):
            agrees = answer.strip().strip("$").replace("\\boxed{", "").rstrip("}") == pick
            lines.append(f"Candidate {label}: {0.9 if agrees else 0.3}")
        return "\n".join(lines) or "Candidate 1: 0.5"
    if "Check the proposed answer" in last:
        m = re.search(r"Proposed answer: (.*)", last)
        shown = (m.group(1) if m else "").strip()
        ok = shown.split(")")[0].strip() == pick if options else shown.replace("\\boxed{", "").rstrip("}") == pick
        return (
            f"Verdict: {'correct' if ok else 'incorrect'}\n"
            f"Reason: an independent check {'agrees' if ok else 'reaches a different result'}."
        )
    m = re.search(r"strongest honest case that option ([A-Z])", last)
    if m:
        argued = m.group(1)
        conf = 0.8 if argued == pick else 0.3
        return (
            f"Case for option {argued}: weighing it against the conditions of the question"
            f"{' it holds up' if argued == pick else f', option {pick} fits better'}.\n"
            f"Confidence: {conf}\nFinal Answer: {_fmt(pick, options)}"
        )
    if "Here is a draft solution" in last:
        return f"Reviewing the draft step by step; it stands.\nConfidence: 0.6\nFinal Answer: {_fmt(pick, options)}"
    return f"Working through the problem step by step.\nConfidence: 0.6\nFinal Answer: {_fmt(pick, options)}"


#: Responders selectable by name (``--builtin`` on the command line, ``responder="bench"``).
BUILTIN_RESPONDERS: dict[str, Responder] = {"bench": bench_responder}


# ----------------------------------------------------------------------------- the server


def load_script(path: str | Path) -> dict[str, Any]:
    """Read a JSON script file into keyword arguments for :class:`StandInOpenAIServer`.

    Raises:
        InvalidInputError: the file is missing, not JSON, or has a malformed rule.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"{p}: no such script file") from None
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{p}: not a readable JSON script ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{p}: a script is a JSON object with rules/default/builtin/model")
    rules = []
    for i, rule in enumerate(data.get("rules") or []):
        if (
            not isinstance(rule, dict)
            or not isinstance(rule.get("pattern"), str)
            or not isinstance(rule.get("reply"), str)
        ):
            raise InvalidInputError(f'{p}: rule {i} must be {{"pattern": str, "reply": str}}')
        rules.append((rule["pattern"], rule["reply"]))
    out: dict[str, Any] = {"rules": rules}
    for key in ("default", "model"):
        if isinstance(data.get(key), str):
            out[key] = data[key]
    if data.get("builtin"):
        out["responder"] = data["builtin"]
    if isinstance(data.get("latency_ms"), (int, float)):
        out["latency_ms"] = float(data["latency_ms"])
    return out


class StandInOpenAIServer:
    """A deterministic OpenAI-compatible stand-in on 127.0.0.1 (threaded ``http.server``).

    Args:
        rules: ``[(regex, reply), ...]`` matched against the last user message, first match wins.
        responder: a callable ``f(request) -> str`` or a :data:`BUILTIN_RESPONDERS` name;
            consulted after the rules.
        default: the reply when neither answered; without one such a request gets HTTP 500.
        host: the address to bind (loopback by default).
        port: the port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        model: the model id served at ``/v1/models``.
        latency_ms: sleep this long before each answer (to exercise concurrency and kills).

    Attributes:
        url: ``http://host:port/v1`` once started.
        n_requests: chat completions answered so far.

    Raises:
        ConfigError: an unknown built-in responder name.
        InvalidInputError: a rule that is not ``(regex, str)`` or does not compile.
    """

    def __init__(
        self,
        rules: Iterable[tuple[str | re.Pattern[str], str]] | None = None,
        *,
        responder: Responder | str | None = None,
        default: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "got-standin",
        latency_ms: float = 0.0,
    ) -> None:
        self._rules: list[tuple[re.Pattern[str], str]] = []
        for rule in rules or []:
            try:
                pattern, reply = rule
                compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
            except (TypeError, ValueError, re.error) as exc:
                raise InvalidInputError(f"a rule must be (regex, reply); got {rule!r:.80} ({exc})") from None
            if not isinstance(reply, str):
                raise InvalidInputError(f"a rule's reply must be a string, not {type(reply).__name__}")
            self._rules.append((compiled, reply))
        if isinstance(responder, str):
            if responder not in BUILTIN_RESPONDERS:
                raise ConfigError(
                    f"unknown built-in responder {responder!r}; choose one of {', '.join(BUILTIN_RESPONDERS)}"
                )
            self.responder_name: str | None = responder
            responder = BUILTIN_RESPONDERS[responder]
        else:
            self.responder_name = None
        self._responder = responder
        self.default = default
        self.host, self._port, self.model = host, int(port), model
        self.latency_ms = float(latency_ms)
        self.n_requests = 0
        self._count_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        """The bound port (the requested one until :meth:`start`)."""
        return self._httpd.server_address[1] if self._httpd else self._port

    @property
    def url(self) -> str:
        """The OpenAI base URL, ``http://host:port/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> StandInOpenAIServer:
        """Bind and serve in a daemon thread; returns ``self``.

        Raises:
            ConfigError: the port is taken.
        """
        if self._httpd is not None:
            return self
        handler = type("_Handler", (_Handler,), {"stand_in": self})
        try:
            self._httpd = _Server((self.host, self._port), handler)
        except OSError as exc:
            raise ConfigError(
                f"the stand-in server cannot listen on {self.host}:{self._port} ({exc}); choose another --port or 0"
            ) from None
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="got-standin-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> StandInOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ answering
    def reply_for(self, request: dict[str, Any]) -> str:
        """The scripted reply to a chat-completion request (rules, responder, default).

        Raises:
            LookupError: nothing in the script answers (the handler turns it into HTTP 500).
        """
        last = _last(request.get("messages") or [], "user")
        for pattern, reply in self._rules:
            if pattern.search(last):
                return reply
        if self._responder is not None:
            return str(self._responder(request))
        if self.default is not None:
            return self.default
        raise LookupError(f"the stand-in script has no reply for {last[:80]!r}; add a rule or a default")

    def _count(self) -> None:
        with self._count_lock:
            self.n_requests += 1


def _tokens(text: str) -> int:
    return len(text.split())


def _apply_limits(text: str, request: dict[str, Any]) -> tuple[str, str]:
    finish = "stop"
    for stop in request.get("stop") or []:
        cut = text.find(stop) if isinstance(stop, str) and stop else -1
        if cut >= 0:
            text = text[:cut]
    limit = request.get("max_tokens") or request.get("max_completion_tokens")
    if isinstance(limit, int) and limit > 0 and _tokens(text) > limit:
        # Cut at the limit-th word, keeping the original spacing before it.
        spans = [m.end() for m in re.finditer(r"\S+", text)]
        text, finish = text[: spans[limit - 1]], "length"
    return text, finish


class _Server(ThreadingHTTPServer):
    """The HTTP server, quiet about clients that went away (a client that timed out closes its socket)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            return  # the client gave up on this request: nothing went wrong here
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    stand_in: StandInOpenAIServer
    protocol_version = "HTTP/1.1"
    server_version = "GotStandIn/1"

    def log_message(self, format: str, *args: Any) -> None:
        return  # one line per request would drown test output

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("X-Got-Stand-In", "1")
        self.end_headers()
        self.wfile.write(raw)

    def _error(self, status: int, message: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": "stand_in_error", "code": status}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": self.stand_in.model, "object": "model", "created": 0, "owned_by": "got-standin"}],
                },
            )
        elif self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send_json(200, {"status": "ok", "stand_in": True})
        else:
            self._error(404, f"no route {self.path}; the stand-in serves /v1/models and /v1/chat/completions")

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise ValueError("the body needs a 'messages' list")
        except ValueError as exc:
            self._error(400, f"bad request: {exc}")
            return
        try:
            text = self.stand_in.reply_for(request)
        except LookupError as exc:
            self._error(500, str(exc))
            return
        if self.stand_in.latency_ms > 0:
            time.sleep(self.stand_in.latency_ms / 1000.0)
        self.stand_in._count()
        text, finish = _apply_limits(text, request)
        prompt = sum(_tokens(m.get("content")) for m in request["messages"] if isinstance(m.get("content"), str))
        usage = {
            "prompt_tokens": max(prompt, 1),
            "completion_tokens": _tokens(text),
            "total_tokens": max(prompt, 1) + _tokens(text),
        }
        ident = "chatcmpl-standin-" + hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:16]
        model = request.get("model") or self.stand_in.model
        if request.get("stream"):
            self._stream(
                ident, model, text, finish, usage, bool((request.get("stream_options") or {}).get("include_usage"))
            )
            return
        self._send_json(
            200,
            {
                "id": ident,
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "system_fingerprint": "got-standin",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": finish,
                        "logprobs": None,
                    }
                ],
                "usage": usage,
            },
        )

    def _stream(
        self, ident: str, model: str, text: str, finish: str, usage: dict[str, int], include_usage: bool
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("X-Got-Stand-In", "1")
        self.end_headers()

        def chunk(delta: dict[str, Any] | None, reason: str | None, extra: dict[str, Any] | None = None) -> None:
            body = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "system_fingerprint": "got-standin",
                "choices": [{"index": 0, "delta": delta, "finish_reason": reason}] if delta is not None else [],
                **(extra or {}),
            }
            self.wfile.write(b"data: " + json.dumps(body).encode("utf-8") + b"\n\n")

        chunk({"role": "assistant", "content": ""}, None)
        for piece in re.findall(r"\S+\s*|\s+", text):
            chunk({"content": piece}, None)
        chunk({}, finish)
        if include_usage:
            chunk(None, None, {"usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


# ----------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """``python -m got_core.bench.standin``: serve a script until SIGINT/SIGTERM.

    Returns:
        The exit status (0 after a clean stop, 2 for bad arguments or script).
    """
    parser = argparse.ArgumentParser(
        prog="python -m got_core.bench.standin",
        description="A STAND-IN OpenAI-compatible server (no model): answers /v1/chat/completions "
        "from a script, deterministically. For CI and cookbooks without a model server.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind [127.0.0.1]")
    parser.add_argument("--port", type=int, default=8765, help="port (0 picks a free one) [8765]")
    parser.add_argument("--script", type=Path, help="JSON script: rules, default, builtin, model, latency_ms")
    parser.add_argument(
        "--builtin", choices=sorted(BUILTIN_RESPONDERS), help="a built-in responder (bench: plays the solver's prompts)"
    )
    parser.add_argument("--default", help="reply when nothing else answers")
    parser.add_argument("--model", default=None, help="model id to serve [got-standin]")
    parser.add_argument("--latency-ms", type=float, default=None, help="sleep before each answer")
    args = parser.parse_args(argv)
    try:
        options: dict[str, Any] = load_script(args.script) if args.script else {}
        if args.builtin:
            options["responder"] = args.builtin
        if args.default is not None:
            options["default"] = args.default
        if args.model:
            options["model"] = args.model
        if args.latency_ms is not None:
            options["latency_ms"] = args.latency_ms
        if not any(options.get(k) for k in ("rules", "responder", "default")):
            options["responder"] = "bench"
        server = StandInOpenAIServer(host=args.host, port=args.port, **options).start()
    except (InvalidInputError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"stand-in OpenAI-compatible server (no model) at {server.url}, model {server.model!r}", flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
