"""The viewer's HTTP server: the standard library's threading server, a JSON API and shipped assets.

Security (ARCHITECTURE §5, invariant 6): it binds 127.0.0.1 by default, answers only requests
whose ``Host`` is the address it serves (no DNS rebinding), sends a strict Content-Security-Policy
(no inline script, nothing from elsewhere), and accepts a write only when started with
``allow_write`` and the request carries the per-launch token in ``X-Got-Token``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from got_core.errors import GotError, GotUserError, InvalidInputError, UnknownRefError
from got_core.repo import ReasoningRepo
from got_core.ui import review, threads, trees

__all__ = ["UIConfig", "make_server"]

ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
MAX_BODY = 1 << 20


@dataclass
class UIConfig:
    """What one launch serves.

    Attributes:
        repo: the reasoning repository (a git directory); for a run, its ``central.git``.
        run_dir: an experiment run directory, or None.
        allow_write: accept merge resolutions.
        token: the per-launch token every write must carry (random by default).
    """

    repo: Path
    run_dir: Path | None = None
    allow_write: bool = False
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))


class _App:
    """Routes and the repositories they read; one lock keeps libgit2 handles single-threaded."""

    def __init__(self, config: UIConfig) -> None:
        self.config = config
        self.lock = threading.Lock()
        self.repos: dict[str, ReasoningRepo] = {"repo": ReasoningRepo.open(config.repo)}
        central = config.run_dir / "central.git" if config.run_dir else None
        if central and central.is_dir():
            same = central.resolve() == config.repo.resolve()
            self.repos["central"] = self.repos["repo"] if same else ReasoningRepo.open(central)

        # Walk the default tree once in the background, so the first page a person opens is warm.
        threading.Thread(target=self._warm, daemon=True).start()

    def _warm(self) -> None:
        try:
            self.get("/api/tree", {})
        except Exception:  # a damaged repository shows its error on the page instead
            pass

    def repo(self, q: dict[str, str]) -> ReasoningRepo:
        name = q.get("repo", "repo")
        if name not in self.repos:
            raise UnknownRefError(f"no repository {name!r} is served here")
        return self.repos[name]

    def version(self) -> str:
        h = hashlib.sha256()
        for name, r in sorted(self.repos.items()):  # an alias of the same repository hashes twice: harmless
            for ref, oid in sorted(r.refs("refs/").items()):
                h.update(f"{name} {ref} {oid}\n".encode())
        return h.hexdigest()[:16]

    def get(self, path: str, q: dict[str, str]) -> Any:
        def page(name: str, default: int) -> int:
            try:
                return int(q.get(name, default))
            except ValueError:
                raise InvalidInputError(f"{name} must be a whole number") from None

        run = self.config.run_dir
        routes = {
            "/api/info": lambda: {
                "repos": sorted(self.repos),
                "run": run is not None,
                "allow_write": self.config.allow_write,
                "version": self.version(),
            },
            "/api/version": lambda: {"version": self.version()},
            "/api/tree": lambda: trees.tree_view(
                self.repo(q), q.get("ref") or None, page("offset", 0), page("limit", trees.PAGE), q.get("win", "")
            ),
            "/api/node": lambda: trees.node_view(self.repo(q), _need(q, "rev")),
            "/api/diff": lambda: trees.diff_view(self.repo(q), _need(q, "a"), _need(q, "b")),
            "/api/threads": lambda: threads.threads_view(self.repo(q)),
            "/api/thread": lambda: threads.thread_view(self.repo(q), _need(q, "id")),
            "/api/checkpoint": lambda: threads.checkpoint_view(self.repo(q), _need(q, "thread"), _need(q, "rev")),
            "/api/sessions": lambda: threads.sessions_view(self.repo(q)),
            "/api/session": lambda: threads.session_view(self.repo(q), _need(q, "id")),
            "/api/memory": lambda: review.memory_view(self.repo(q), q.get("branch", "memory")),
            "/api/merges": lambda: review.merges_view(self.repo(q)),
            "/api/run": lambda: review.run_view(_need_run(run)),
            "/api/run/audit": lambda: review.run_audit(_need_run(run)),
        }
        if path not in routes:
            raise UnknownRefError(f"no page {path!r}")
        with self.lock:
            return routes[path]()

    def post(self, path: str, q: dict[str, str], body: dict[str, Any]) -> Any:
        if path != "/api/merges/resolve":
            raise UnknownRefError(f"no action {path!r}")
        with self.lock:
            return review.resolve_merge(self.repo(q), body)


def _need(q: dict[str, str], key: str) -> str:
    value = q.get(key, "")
    if not value:
        raise InvalidInputError(f"missing parameter {key!r}")
    return value


def _need_run(run: Path | None) -> Path:
    if run is None:
        raise UnknownRefError("no run directory is served; start with `got ui --run RUN_DIR`")
    return run


def _handler(app: _App) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "got-ui"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # quiet: a viewer, not a web server log
            pass

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, value: Any) -> None:
            self._send(status, json.dumps(value, default=str).encode(), "application/json; charset=utf-8")

        def _host_ok(self) -> bool:
            address: Any = self.server.server_address
            host, port = address[0], address[1]
            allowed = {f"{host}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"}
            return self.headers.get("Host", "") in allowed

        def _guard(self, fn: Any) -> None:
            if not self._host_ok():
                return self._json(421, {"error": "unexpected Host header"})
            try:
                return fn()
            except UnknownRefError as e:
                return self._json(404, {"error": str(e).strip("'\"")})
            except GotUserError as e:
                return self._json(400, {"error": str(e)})
            except GotError as e:
                return self._json(500, {"error": str(e)})
            except Exception as e:  # a page must answer; the message names the type only
                return self._json(500, {"error": f"internal error ({type(e).__name__})"})

        def do_GET(self) -> None:
            self._guard(self._get)

        def do_POST(self) -> None:
            self._guard(self._post)

        def _get(self) -> None:
            url = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path in ("/", "/index.html"):
                html = resources.files("got_core.ui").joinpath("static/index.html").read_text(encoding="utf-8")
                # The token is URL-safe base64; only same-origin script can read the page it sits in.
                html = html.replace("{{TOKEN}}", app.config.token if app.config.allow_write else "")
                return self._send(200, html.encode(), "text/html; charset=utf-8")
            if url.path.startswith("/static/") and url.path[8:] in ASSETS:
                data = resources.files("got_core.ui").joinpath("static/" + url.path[8:]).read_bytes()
                return self._send(200, data, ASSETS[url.path[8:]] + "; charset=utf-8")
            if url.path == "/api/run/plot":
                return self._send(200, review.run_plot(_need_run(app.config.run_dir), _need(q, "name")), "image/png")
            return self._json(200, app.get(url.path, q))

        def _post(self) -> None:
            if not app.config.allow_write:
                return self._json(403, {"error": "writes are off; restart with `got ui --allow-write`"})
            if not hmac.compare_digest(self.headers.get("X-Got-Token", ""), app.config.token):
                return self._json(403, {"error": "missing or wrong write token (reload the page)"})
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                return self._json(413, {"error": "request body missing or too large"})
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                return self._json(400, {"error": "the body is not JSON"})
            if not isinstance(body, dict):
                return self._json(400, {"error": "the body must be a JSON object"})
            url = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            return self._json(200, app.post(url.path, q, body))

    return Handler


def make_server(config: UIConfig, host: str = "127.0.0.1", port: int = 8777) -> ThreadingHTTPServer:
    """A server for ``config`` bound to ``host:port`` (port 0 picks a free one); call ``serve_forever``.

    The write token is written into the page itself when writes are on (another site's script
    cannot read a page of this origin, and the ``Host`` check stops DNS rebinding).

    Raises:
        RepositoryNotFoundError: ``config.repo`` is not a repository.
    """
    app = _App(config)
    server = ThreadingHTTPServer((host, port), _handler(app))
    server.daemon_threads = True
    return server
