"""A throwaway PostgreSQL server for the benchmarks: ``initdb`` into a temp dir, ``pg_ctl
start`` on a free port of 127.0.0.1, stopped (and its files removed) at the end.

Used only when PostgreSQL's binaries and ``langgraph-checkpoint-postgres`` (extra
``bench-postgres``) are installed; otherwise :func:`start` says why in one line. Run as
root, the server runs as the ``postgres`` user (``initdb`` refuses root).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name or 0))
    return Path(dirs[-1]) if dirs and (Path(dirs[-1]) / "pg_ctl").exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPostgres:
    """A PostgreSQL cluster in a temp dir; :attr:`uri` connects to its ``postgres`` database."""

    def __init__(self, bindir: Path, root: Path, prefix: list[str]) -> None:
        self.bindir, self.root, self.prefix = bindir, root, prefix
        self.data = root / "data"
        self.port = _free_port()
        self.uri = f"postgresql://bench@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self.prefix, str(self.bindir / tool), *args], check=True, capture_output=True, text=True, timeout=120
        )

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "bench", "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", opts, "-w", "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """A new database; returns its URI."""
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.uri.rsplit("/", 1)[0] + "/" + name

    def tables_bytes(self, uri: str) -> int:
        """Bytes of every table (with indexes and TOAST) of a database, after ``VACUUM FULL``."""
        import psycopg

        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("VACUUM FULL")
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'"
            ).fetchone()
        return int(row[0]) if row else 0


def start() -> tuple[LocalPostgres | None, str]:
    """A started server, or None and the one-line reason it is skipped."""
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError:
        return (
            None,
            "PostgreSQL skipped: langgraph-checkpoint-postgres is not installed (pip install -e '.[bench-postgres]')",
        )
    bindir = _bindir()
    if bindir is None:
        return None, "PostgreSQL skipped: no pg_ctl on PATH or under /usr/lib/postgresql/*/bin"
    prefix: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="got-bench-pg-"))
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        if shutil.which("runuser") is None:
            shutil.rmtree(root, ignore_errors=True)
            return None, "PostgreSQL skipped: running as root and runuser is missing"
        prefix = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres", "postgres")
    server = LocalPostgres(bindir, root, prefix)
    try:
        server.start()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, LookupError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        shutil.rmtree(root, ignore_errors=True)
        return None, f"PostgreSQL skipped: the server did not start ({' '.join(str(detail).split())[:160]})"
    version = subprocess.run([str(bindir / "pg_ctl"), "--version"], capture_output=True, text=True).stdout.strip()
    return server, f"{version or 'PostgreSQL'} on 127.0.0.1:{server.port} (started for this run, stopped at the end)"
