"""Real git servers on 127.0.0.1 for the tests: ``git daemon``, ``git http-backend`` (HTTP and HTTPS) and SSH.

Both are stock git. :class:`GitDaemon` serves every bare repository under a base directory
over ``git://127.0.0.1:PORT/<name>.git`` with receive-pack enabled (pushes allowed, no
authentication: git's own protocol has none). :class:`HttpGit` serves the same layout
over ``http://127.0.0.1:PORT/<name>.git`` through ``git http-backend`` run as a CGI
program behind a small threaded HTTP server; with ``password`` set it answers 401 to
every request that does not carry HTTP basic credentials for it, like a hosted server.
With ``tls=True`` it serves ``https://127.0.0.1:PORT/<name>.git`` instead, with a server
certificate signed by a private CA made at start (``cryptography``, which asyncssh brings):
:meth:`HttpGit.trust` trusts that CA the way a deployment does (``SSL_CERT_FILE``).

:class:`SshGit` is an SSH server (asyncssh, in a thread of the test process) that runs stock
``git-upload-pack`` / ``git-receive-pack`` for the same layout at ``ssh://git@127.0.0.1:PORT/
<name>.git``; it takes only the client key it generated, and :meth:`SshGit.trust` gives a
process the key file and the ``known_hosts`` line a deployment would have.

Ports are picked free at run time; each server waits until it answers before the test
uses it and is stopped at the end (the fixtures in ``tests/conftest.py``).
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import os
import shlex
import shutil
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

from gitcli import git
from timeouts import TEST_TIMEOUT, deadline

__all__ = [
    "ALL_SERVERS",
    "SERVERS",
    "GitDaemon",
    "HttpGit",
    "SshGit",
    "free_port",
    "make_bare",
    "make_private_ca",
    "serve",
]


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


def make_private_ca(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path, Path]:
    """A private certificate authority and a server certificate it signed for ``host`` (an IP
    address, in the certificate's subjectAltName), written under ``directory``.

    Returns:
        ``(ca.pem, server.pem, server-key.pem)``: the CA certificate a client must trust, the
        server's certificate and its private key (PEM, no passphrase).
    """
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid = {"not_valid_before": now - datetime.timedelta(hours=1), "not_valid_after": now + datetime.timedelta(days=1)}
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "GitOfThoughts test CA")])
    ca = (
        x509.CertificateBuilder(issuer_name=ca_name, subject_name=ca_name, public_key=ca_key.public_key(), **valid)
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder(
            issuer_name=ca_name,
            subject_name=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]),
            public_key=key.public_key(),
            **valid,
        )
        .serial_number(x509.random_serial_number())
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = directory / "ca.pem", directory / "server.pem", directory / "server-key.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_file.chmod(0o600)
    return ca_file, cert_file, key_file


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

    def trust(self, monkeypatch: object, home: Path) -> None:
        """Nothing to configure: git's own protocol has no keys or certificates (every kind has ``trust``)."""

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

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):  # the TLS handshake runs here, in the request's thread
            self.request.settimeout(TEST_TIMEOUT)
            self.request.do_handshake()
        super().setup()

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

    def finish_request(self, request: object, client_address: object) -> None:
        try:
            super().finish_request(request, client_address)  # type: ignore[arg-type]
        except (ssl.SSLError, ConnectionError):
            pass  # an untrusting client hung up during the handshake: nothing to serve


class HttpGit:
    """``git http-backend`` behind a local HTTP server on 127.0.0.1 and a free port.

    Args:
        base: the directory whose bare repositories are served.
        password: when set, every request without basic credentials ``agent:<password>``
            gets 401 (what a hosted server does), so a client must bring credentials.
        tls: serve HTTPS with a certificate from a private CA made at start (``ca_file``).

    Attributes:
        requests: every request line seen; refused: how many got 401.
        ca_file: with ``tls``, the private CA's certificate a client must trust (else ``None``).
    """

    def __init__(self, base: Path, *, password: str | None = None, tls: bool = False) -> None:
        self.base = Path(base).resolve()
        self.base.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.tls = tls
        self.ca_file: Path | None = None
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
        """The ``http://`` (``https://`` with ``tls``) URL of the repository ``base/name``."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/{name}"

    def trust(self, monkeypatch: object, home: Path) -> None:
        """Trust the private CA in this process and its children, as a deployment would
        (nothing to do for plain HTTP).

        A child process (the ``got`` CLI, a worker) trusts it through ``SSL_CERT_FILE``:
        pygit2 hands Python's default verify paths, which read that variable, to libgit2
        when it is imported. This process imported pygit2 already, so the CA is added to
        libgit2's (process-wide, additive) locations with ``set_ssl_cert_locations`` too.
        """
        import pygit2

        if not self.tls:
            return  # plain HTTP: nothing to trust
        assert self.ca_file is not None, "trust() is called once the server is started"
        pygit2.settings.set_ssl_cert_locations(str(self.ca_file), ssl.get_default_verify_paths().capath)
        monkeypatch.setenv("SSL_CERT_FILE", str(self.ca_file))  # type: ignore[attr-defined]

    def start(self) -> HttpGit:
        """Start serving and wait until it answers."""
        self._server = _HttpServer(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        if self.tls:
            self.ca_file, cert, key = make_private_ca(self.base.parent / f"{self.base.name}-tls")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
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


class SshGit:
    """An SSH server on 127.0.0.1 and a free port that serves git's two services, nothing else.

    Each connection may run ``git-upload-pack '<name>.git'`` or ``git-receive-pack
    '<name>.git'`` for a bare repository directly under ``base``; any other command is
    refused. Only the client key generated here is accepted (public-key authentication).

    Attributes:
        base: the directory whose bare repositories are served.
        key_file: the client's private key (OpenSSH format, no passphrase), ``.pub`` beside it.
        host_line: this server's ``known_hosts`` line (``[127.0.0.1]:PORT ssh-ed25519 ...``).
        commands: every command a client asked to run.
    """

    def __init__(self, base: Path) -> None:
        import asyncssh

        self.base = Path(base).resolve()
        self.base.mkdir(parents=True, exist_ok=True)
        self._host_key = asyncssh.generate_private_key("ssh-ed25519")
        client = asyncssh.generate_private_key("ssh-ed25519")
        self.key_file = self.base.parent / f"{self.base.name}-client-key"
        self.key_file.write_bytes(client.export_private_key("openssh"))
        self.key_file.chmod(0o600)
        self.key_file.with_name(self.key_file.name + ".pub").write_bytes(client.export_public_key("openssh"))
        self._authorized = asyncssh.import_authorized_keys(client.export_public_key("openssh").decode())
        self.commands: list[str] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: object | None = None
        self._thread: threading.Thread | None = None

    @property
    def host_line(self) -> str:
        """The ``known_hosts`` line of this server's host key."""
        return f"[127.0.0.1]:{self.port} " + self._host_key.export_public_key("openssh").decode().strip() + "\n"

    def url(self, name: str = "central.git") -> str:
        """The ``ssh://`` URL of the repository ``base/name``."""
        return f"ssh://git@127.0.0.1:{self.port}/{name}"

    def trust(self, monkeypatch: object, home: Path) -> None:
        """Configure this process (and its children) as a deployment would: the key in
        ``GOT_SSH_KEY``, the host in ``GOT_REMOTE_HOSTS``, the host key in ``home/.ssh/known_hosts``."""
        import pygit2

        ssh = Path(home) / ".ssh"
        ssh.mkdir(parents=True, exist_ok=True)
        (ssh / "known_hosts").write_text(self.host_line, encoding="utf-8")
        # libgit2 read HOME when it started; children started from here read the new HOME themselves
        monkeypatch.setattr(pygit2.settings, "homedir", str(home))  # type: ignore[attr-defined]
        monkeypatch.setenv("GOT_SSH_KEY", str(self.key_file))  # type: ignore[attr-defined]
        monkeypatch.setenv("GOT_REMOTE_HOSTS", "127.0.0.1")  # type: ignore[attr-defined]

    def receive_packs(self) -> int:
        """How many push services (``git-receive-pack``) clients ran so far."""
        return sum(c.startswith("git-receive-pack") for c in list(self.commands))

    async def _session(self, process: object) -> None:
        command = getattr(process, "command", None) or ""
        self.commands.append(command)
        try:
            service, path = shlex.split(command)
        except ValueError:
            service, path = "", ""
        repo = self.base / path.lstrip("/")
        if service not in ("git-upload-pack", "git-receive-pack") or repo.parent != self.base or not repo.is_dir():
            process.stderr.write(b"only git-upload-pack / git-receive-pack of a served repository\n")  # type: ignore[attr-defined]
            process.exit(1)  # type: ignore[attr-defined]
            return
        child = await asyncio.create_subprocess_exec(
            _git_exe(),
            service.removeprefix("git-"),
            str(repo),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_server_env(),
        )
        assert child.stdin is not None and child.stdout is not None and child.stderr is not None
        channel_in, channel_out, channel_err = process.stdin, process.stdout, process.stderr  # type: ignore[attr-defined]

        async def feed() -> None:  # client -> git, until the client closes or git is done
            try:
                while data := await channel_in.read(65536):
                    child.stdin.write(data)
                    await child.stdin.drain()
            except (ConnectionError, BrokenPipeError):
                pass
            finally:
                child.stdin.close()

        async def drain(source: asyncio.StreamReader, sink: object) -> None:  # git -> client
            while data := await source.read(65536):
                sink.write(data)  # type: ignore[attr-defined]

        feeding = asyncio.ensure_future(feed())
        await asyncio.gather(drain(child.stdout, channel_out), drain(child.stderr, channel_err))
        code = await child.wait()
        feeding.cancel()
        process.exit(code)  # type: ignore[attr-defined]

    def start(self) -> SshGit:
        """Start serving (an event loop in a thread) and wait until it answers."""
        import asyncssh

        ready = threading.Event()
        failed: list[BaseException] = []
        loop = asyncio.new_event_loop()

        async def listen() -> None:
            self._server = await asyncssh.create_server(
                asyncssh.SSHServer,
                "127.0.0.1",
                0,
                server_host_keys=[self._host_key],
                authorized_client_keys=self._authorized,
                process_factory=self._session,
                encoding=None,
            )
            self.port = int(self._server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(listen())
            except BaseException as exc:  # reported to start()
                failed.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(TEST_TIMEOUT)
        if failed:
            raise RuntimeError(f"the SSH server did not start: {failed[0]}")
        _wait_listening(self.port)
        return self

    def stop(self) -> None:
        """Stop serving and end the event loop's thread."""
        loop, server = self._loop, self._server
        if loop is not None and server is not None:

            async def close() -> None:
                server.close()  # type: ignore[attr-defined]
                await server.wait_closed()  # type: ignore[attr-defined]

            asyncio.run_coroutine_threadsafe(close(), loop).result(TEST_TIMEOUT)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=TEST_TIMEOUT)
        if loop is not None and not loop.is_running():
            loop.close()
        self._loop = self._server = self._thread = None

    def __enter__(self) -> SshGit:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: Kinds of server :func:`serve` starts that a test may use without configuring anything but
#: an SSH server's ``trust``: git's own protocol, smart HTTP, and SSH.
SERVERS = ("git-daemon", "http-backend", "ssh")
#: Every kind :func:`serve` starts: :data:`SERVERS` and smart HTTP over TLS (``https-backend``),
#: whose private CA the test must trust (:meth:`HttpGit.trust`) once it is started.
ALL_SERVERS = (*SERVERS, "https-backend")


def serve(kind: str, base: Path) -> GitDaemon | HttpGit | SshGit:
    """A server of ``kind`` (one of :data:`ALL_SERVERS`) for the bare repositories under ``base``
    (not started: use it as a context manager). All have ``base``, ``url(name)``,
    ``receive_packs()`` and ``trust(monkeypatch, home)``, which configures what a deployment
    would (an SSH key and ``known_hosts``, a private CA; nothing for git:// and http://):
    call it once the server is started."""
    if kind == "git-daemon":
        return GitDaemon(base)
    if kind == "http-backend":
        return HttpGit(base)
    if kind == "https-backend":
        return HttpGit(base, tls=True)
    if kind == "ssh":
        return SshGit(base)
    raise ValueError(f"no git server kind {kind!r}; one of {ALL_SERVERS}")
