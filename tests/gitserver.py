"""Real git servers on 127.0.0.1 for the tests: ``git daemon`` and ``git http-backend``.

Both are stock git. :class:`GitDaemon` serves every bare repository under a base directory
over ``git://127.0.0.1:PORT/<name>.git`` with receive-pack enabled (pushes allowed, no
authentication: git's own protocol has none). :class:`HttpGit` serves the same layout
over ``http://127.0.0.1:PORT/<name>.git`` through ``git http-backend`` run as a CGI
program behind a small threaded HTTP server; with ``password`` set it answers 401 to
every request that does not carry HTTP basic credentials for it, like a hosted server.

Ports are picked free at run time; each server waits until it answers before the test
uses it and is stopped at the end (the fixtures in ``tests/conftest.py``).
"""

from __future__ import annotations

import base64
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

from gitcli import git
from timeouts import TEST_TIMEOUT, deadline

__all__ = ["SERVERS", "GitDaemon", "HttpGit", "free_port", "make_bare", "serve"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_bare(base: Path, name: str = "central.git") -> Path:
    """Create an empty bare repository ``base/name`` with stock git; returns its path."""
    path = base / name
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "--bare")
    return path


def _git_exe() -> str:
    exe = shutil.which("git")
    if exe is None:
        raise RuntimeError("the git binary is needed to serve repositories in the tests")
    return exe


def _wait_listening(port: int, proc: subprocess.Popen | None = None) -> None:
    end = deadline()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"git daemon exited ({proc.returncode}) before it answered") from None
            if time.monotonic() > end:
                raise RuntimeError(f"nothing answered on 127.0.0.1:{port} within {TEST_TIMEOUT:.0f} s") from None
            time.sleep(0.05)


def _server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"})
    return env


class GitDaemon:
    """``git daemon --export-all --enable=receive-pack`` on 127.0.0.1 and a free port.

    Attributes:
        base: the directory whose bare repositories are served.
        port: the port it listens on.
        log: the daemon's log file (``--verbose``: one line per connection and service).
    """

    def __init__(self, base: Path) -> None:
        self.base = Path(base).resolve()
        self.base.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.log = self.base.parent / f"{self.base.name}-daemon.log"
        self._proc: subprocess.Popen | None = None

    def url(self, name: str = "central.git") -> str:
        """The ``git://`` URL of the repository ``base/name``."""
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> GitDaemon:
        """Start the daemon and wait until it accepts connections."""
        self.port = free_port()
        cmd = [
            _git_exe(),
            "daemon",
            "--reuseaddr",
            "--verbose",
            "--export-all",
            "--enable=receive-pack",
            f"--base-path={self.base}",
            "--listen=127.0.0.1",
            f"--port={self.port}",
            str(self.base),
        ]
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=_server_env())
        _wait_listening(self.port, self._proc)
        return self

    def stop(self) -> None:
        """Stop the daemon (and wait for it)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=TEST_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=TEST_TIMEOUT)
        self._proc = None

    def receive_packs(self) -> int:
        """How many push services (``git-receive-pack``) the daemon ran so far."""
        return self.log.read_text(encoding="utf-8", errors="replace").count("receive-pack") if self.log.exists() else 0

    def __enter__(self) -> GitDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(http.server.BaseHTTPRequestHandler):
    """Runs ``git http-backend`` for each request (CGI), after an optional basic-auth check."""

    server: _HttpServer
    protocol_version = "HTTP/1.0"

    def _authorised(self) -> bool:
        expected = self.server.owner.password
        if expected is None:
            return True
        given = self.headers.get("Authorization", "")
        token = base64.b64encode(f"agent:{expected}".encode()).decode()
        return given == f"Basic {token}"

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":  # libgit2 streams its pushes
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        owner = self.server.owner
        with owner.lock:
            owner.requests.append(f"{self.command} {self.path}")
        if not self._authorised():
            with owner.lock:
                owner.refused += 1
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="central"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        body = self._body()
        env = _server_env()
        env.update(
            {
                "GIT_PROJECT_ROOT": str(owner.base),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": "agent",  # receive-pack over HTTP needs an authenticated user
                "REMOTE_ADDR": "127.0.0.1",
                "GATEWAY_INTERFACE": "CGI/1.1",
                "SERVER_PROTOCOL": "HTTP/1.0",
            }
        )
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        proc = subprocess.run(
            [_git_exe(), "http-backend"], input=body, capture_output=True, env=env, timeout=TEST_TIMEOUT
        )
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = proc.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _serve
    do_POST = _serve

    def log_message(self, *args: object) -> None:
        pass


class _HttpServer(http.server.ThreadingHTTPServer):
    owner: HttpGit
    daemon_threads = True


class HttpGit:
    """``git http-backend`` behind a local HTTP server on 127.0.0.1 and a free port.

    Args:
        base: the directory whose bare repositories are served.
        password: when set, every request without basic credentials ``agent:<password>``
            gets 401 (what a hosted server does), so a client must bring credentials.

    Attributes:
        requests: every request line seen; refused: how many got 401.
    """

    def __init__(self, base: Path, *, password: str | None = None) -> None:
        self.base = Path(base).resolve()
        self.base.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.requests: list[str] = []
        self.refused = 0
        self.lock = threading.Lock()
        self._server: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on."""
        assert self._server is not None
        return int(self._server.server_address[1])

    def url(self, name: str = "central.git") -> str:
        """The ``http://`` URL of the repository ``base/name``."""
        return f"http://127.0.0.1:{self.port}/{name}"

    def start(self) -> HttpGit:
        """Start serving and wait until it answers."""
        self._server = _HttpServer(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        _wait_listening(self.port)
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=TEST_TIMEOUT)
        self._server = self._thread = None

    def receive_packs(self) -> int:
        """How many push requests (``POST .../git-receive-pack``) it answered so far."""
        with self.lock:
            return sum(r.startswith("POST ") and "git-receive-pack" in r for r in self.requests)

    def __enter__(self) -> HttpGit:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: The kinds of server :func:`serve` starts: git's own protocol, and smart HTTP.
SERVERS = ("git-daemon", "http-backend")


def serve(kind: str, base: Path) -> GitDaemon | HttpGit:
    """A server of ``kind`` (one of :data:`SERVERS`) for the bare repositories under ``base``
    (not started: use it as a context manager). Both have ``base``, ``url(name)`` and
    ``receive_packs()``."""
    if kind == "git-daemon":
        return GitDaemon(base)
    if kind == "http-backend":
        return HttpGit(base)
    raise ValueError(f"no git server kind {kind!r}; one of {SERVERS}")
