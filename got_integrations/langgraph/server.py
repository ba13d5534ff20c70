"""Factories for the LangGraph Agent Server (``langgraph dev`` / ``langgraph-api``).

The Agent Server takes a custom checkpointer and store from ``langgraph.json``; point
both at this module and every checkpoint the server writes becomes a git commit::

    {
      "dependencies": ["."],
      "graphs": {"agent": "./agent.py:graph"},
      "checkpointer": {"path": "got_integrations.langgraph.server.checkpointer"},
      "store": {"path": "got_integrations.langgraph.server.store"}
    }

(The server splits a module path at its last dot, so write ``module.function``; the
``module:function`` form works only for file paths such as ``./my_saver.py:make``.)

Both factories are async context managers, called without arguments and configured by
environment variables (set them in the shell, or in the ``env`` file ``langgraph.json``
names):

``GOT_REPO``
    the repository of the checkpoints (a bare repository is created when missing).
    Default: ``agent-server.git`` in the per-user data directory
    (:func:`default_repo_path`), never the current directory.
``GOT_STORE_REPO`` / ``GOT_STORE_REF``
    the store's repository (default: ``GOT_REPO``) and ref (default ``refs/got/store``).
``GOT_AES_KEY``
    when set, an AES key (16, 24 or 32 bytes of text) that encrypts every checkpoint,
    pending write and store value at rest (LangGraph's ``EncryptedSerializer``, kept
    strict); nothing readable is written of them.
``GOT_ALLOW_REPO_IN_WATCHED_DIR``
    ``1`` to allow a repository inside the current directory (a warning, not an error).

``langgraph dev`` watches its current directory and reloads on every change there: a
repository written inside it would make the server reload in a loop. So a repository
inside the current directory is refused (:class:`~got_core.errors.ConfigError`) unless
``GOT_ALLOW_REPO_IN_WATCHED_DIR=1`` says it is not watched (e.g. ``--no-reload``).

The server probes the saver's optional methods at start-up; :class:`GitCheckpointSaver`
implements all of them (``adelete_thread``, ``adelete_for_runs``, ``acopy_thread``,
``aprune``), so thread deletion, thread copies, rollback of cancelled runs and thread
pruning all act on the git refs. Pruning with ``strategy="keep_latest"`` never reaches the
saver under ``langgraph dev``: its in-memory runtime answers HTTP 422 itself
(``Threads.prune`` in ``langgraph_runtime_inmem/ops.py``); run
``GitCheckpointSaver(repo).aprune(ids, strategy="keep_latest")`` on the same repository
instead (safe while the server runs). The in-memory server runs no TTL sweeper for a custom
store; :func:`store` starts the store's own when ``GOT_STORE_TTL_MINUTES`` is set.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from got_core.errors import ConfigError, MissingExtraError

__all__ = ["checkpointer", "default_repo_path", "repo_path", "store", "store_repo_path"]

logger = logging.getLogger(__name__)

#: Environment variables read by the factories.
REPO_ENV = "GOT_REPO"
STORE_REPO_ENV = "GOT_STORE_REPO"
STORE_REF_ENV = "GOT_STORE_REF"
AES_KEY_ENV = "GOT_AES_KEY"
STORE_TTL_ENV = "GOT_STORE_TTL_MINUTES"
ALLOW_WATCHED_ENV = "GOT_ALLOW_REPO_IN_WATCHED_DIR"


def default_repo_path() -> Path:
    """The default repository: ``agent-server.git`` in the per-user data directory.

    Returns:
        ``platformdirs.user_data_path("gitofthoughts") / "agent-server.git"`` (on Linux
        ``~/.local/share/gitofthoughts/agent-server.git``, or under ``$XDG_DATA_HOME``).

    Raises:
        MissingExtraError: ``platformdirs`` is not installed (extra ``server``).
    """
    try:
        import platformdirs
    except ImportError as exc:  # pragma: no cover - platformdirs ships with the extra
        raise MissingExtraError("the Agent Server factories", "server", exc) from exc
    return platformdirs.user_data_path("gitofthoughts") / "agent-server.git"


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _checked(path: Path, variable: str) -> Path:
    """``path`` made absolute, refused when it sits inside the watched current directory."""
    path = path.expanduser()
    cwd = Path.cwd().resolve()
    path = (cwd / path).resolve() if not path.is_absolute() else path.resolve()
    if _inside(path, cwd):
        message = (
            f"{variable}={path} is inside the current directory {cwd}, which `langgraph dev` "
            "watches: every commit would reload the server, in a loop. Put the repository "
            f"outside it (e.g. unset {variable} for the default {default_repo_path()}), or set "
            f"{ALLOW_WATCHED_ENV}=1 if the directory is not watched (langgraph dev --no-reload)"
        )
        if os.environ.get(ALLOW_WATCHED_ENV, "").strip().lower() not in ("1", "true", "yes"):
            raise ConfigError(message)
        logger.warning("%s", message)
    return path


def repo_path() -> Path:
    """The checkpoint repository the factories use: ``$GOT_REPO`` or :func:`default_repo_path`.

    Raises:
        ConfigError: the path is inside the current (watched) directory, see the module docs.
    """
    raw = os.environ.get(REPO_ENV, "").strip()
    return _checked(Path(raw) if raw else default_repo_path(), REPO_ENV)


def store_repo_path() -> Path:
    """The store's repository: ``$GOT_STORE_REPO``, else :func:`repo_path`.

    Raises:
        ConfigError: the path is inside the current (watched) directory.
    """
    raw = os.environ.get(STORE_REPO_ENV, "").strip()
    return _checked(Path(raw), STORE_REPO_ENV) if raw else repo_path()


def _aes_key() -> bytes | None:
    raw = os.environ.get(AES_KEY_ENV)
    if not raw:
        return None
    key = raw.encode()
    if len(key) not in (16, 24, 32):
        raise ConfigError(f"{AES_KEY_ENV} must be 16, 24 or 32 bytes long (it is {len(key)}); set a key of that length")
    return key


def _encrypting(key: bytes, inner: Any) -> Any:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    return EncryptedSerializer.from_pycryptodome_aes(inner, key=key)


def _ttl_minutes() -> float | None:
    raw = os.environ.get(STORE_TTL_ENV, "").strip()
    if not raw:
        return None
    try:
        minutes = float(raw)
    except ValueError:
        minutes = -1.0
    if not minutes > 0:
        raise ConfigError(f"{STORE_TTL_ENV} must be a positive number of minutes, got {raw!r}")
    return minutes


def _open_saver() -> Any:
    from got_integrations.langgraph import GitCheckpointSaver, default_serde

    key = _aes_key()
    serde = _encrypting(key, default_serde()) if key else None
    return GitCheckpointSaver(str(repo_path()), serde=serde)


def _open_store() -> Any:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from got_integrations.langgraph import GitStore

    key = _aes_key()
    serde = _encrypting(key, JsonPlusSerializer()) if key else None
    ttl = _ttl_minutes()
    options: dict[str, Any] = {"serde": serde}
    if ttl is not None:
        options["ttl"] = {"default_ttl": ttl, "refresh_on_read": True, "sweep_interval_minutes": ttl}
    ref = os.environ.get(STORE_REF_ENV, "").strip()
    if ref:
        options["ref"] = ref
    return GitStore(str(store_repo_path()), **options)


@asynccontextmanager
async def checkpointer() -> AsyncIterator[Any]:
    """Yield a :class:`~got_integrations.langgraph.GitCheckpointSaver` for the Agent Server.

    Configured by ``GOT_REPO`` and ``GOT_AES_KEY`` (module docs). The repository is
    opened in a worker thread (the dev server refuses blocking calls on its event loop)
    and closed on exit. The server may enter this once per worker thread; each gets its
    own saver on the same repository (every ref move is a compare-and-swap).

    Yields:
        the saver.

    Raises:
        ConfigError: a repository inside the watched directory, or a bad key length.
    """
    saver = await asyncio.to_thread(_open_saver)
    try:
        yield saver
    finally:
        await asyncio.to_thread(saver.close)


@asynccontextmanager
async def store() -> AsyncIterator[Any]:
    """Yield a :class:`~got_integrations.langgraph.GitStore` for the Agent Server.

    Configured by ``GOT_STORE_REPO`` (default ``GOT_REPO``), ``GOT_STORE_REF``,
    ``GOT_AES_KEY`` and ``GOT_STORE_TTL_MINUTES`` (a default TTL, refreshed on read, and
    a sweeper that runs at that interval while the server runs).

    Yields:
        the store.

    Raises:
        ConfigError: a repository inside the watched directory, a bad key length or TTL.
    """
    git_store = await asyncio.to_thread(_open_store)
    sweeping = git_store.ttl_config is not None
    if sweeping:
        git_store.start_ttl_sweeper()
    try:
        yield git_store
    finally:
        if sweeping:
            await asyncio.to_thread(git_store.stop_ttl_sweeper)
        await asyncio.to_thread(git_store.close)
