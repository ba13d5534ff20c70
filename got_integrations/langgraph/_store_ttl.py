"""The store's background TTL sweeper (as ``SqliteStore`` runs one).

The sweep (:meth:`TTLSweeperMixin.sweep_ttl`) reads the expired items from the derived
index's expiry index and deletes their files in one commit, its trees built from the trees
the store's writer keeps (``_store_bulk``: a namespace directory the last batches wrote is
not read back; one left empty disappears, and nothing else in it is touched), in one pack.
The index then drops their rows in one statement. The sweeper runs it on a timer.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from got_core.repo import ReasoningRepo
from got_integrations.langgraph._store_doc import to_us, utc_now
from got_integrations.langgraph._store_index import ItemIndex, Row
from got_integrations.langgraph._store_write import redone

__all__ = ["TTLSweeperMixin"]

logger = logging.getLogger("got_integrations.langgraph.store")


class TTLSweeperMixin:
    """``start_ttl_sweeper`` / ``stop_ttl_sweeper`` around the host's ``sweep_ttl``."""

    ttl_config: Any
    _ttl_thread: threading.Thread | None
    _ttl_stop: threading.Event

    clock: Callable[[], datetime]
    index: ItemIndex
    _write_lock: threading.Lock

    repo: ReasoningRepo
    ref: str

    def _commit(  # pragma: no cover - the host defines it
        self,
        tip: str | None,
        changes: dict[str, bytes | None],
        message: str,
        upserts: list[Row],
        deleted: list[Row],
        swept_at: int | None = None,
        *,
        swept: Mapping[bytes, int] | None = None,
    ) -> str:
        raise NotImplementedError

    def sweep_ttl(self) -> int:
        """Delete every expired item in one commit (read from the expiry index); returns how many.

        Raises:
            ConcurrentUpdateError: other writers kept moving the ref (see :func:`redone`).
        """

        def attempt() -> int:
            tip = self.index.fresh()
            now_us = to_us(utc_now(self.clock))
            expired = self.index.expired_by_namespace(now_us)
            count = sum(len(paths) for paths in expired.values())
            if count:
                message = f"store: sweep {count} expired item(s)\n"
                changes: dict[str, bytes | None] = {}
                for paths in expired.values():
                    changes.update(dict.fromkeys(paths))
                swept = {ns: len(paths) for ns, paths in expired.items()}
                # the expired set is the one at ``tip``: on a tip where another writer put one of
                # them again, the sweep would delete a live item, so a moved ref means a new plan
                self._commit(tip, changes, message, [], [], swept_at=now_us, swept=swept)
            return count

        with self._write_lock:
            return redone(attempt, self.ref)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future:
        """Sweep expired items periodically in a daemon thread.

        Args:
            sweep_interval_minutes: the period (default: the TTL config's, else 5).

        Returns:
            A future that finishes when the sweeper stops (cancel it, or call :meth:`stop_ttl_sweeper`).
        """
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self._ttl_thread is not None and self._ttl_thread.is_alive():
            future.add_done_callback(lambda f: self._ttl_stop.set() if f.cancelled() else None)
            return future
        interval = float(sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5)
        self._ttl_stop.clear()

        def loop() -> None:
            try:
                while not self._ttl_stop.wait(interval * 60):
                    try:
                        removed = self.sweep_ttl()
                        if removed:
                            logger.info("GitStore swept %d expired items", removed)
                    except Exception:
                        logger.exception("GitStore TTL sweep failed")
                future.set_result(None)
            except Exception as exc:
                future.set_exception(exc)

        self._ttl_thread = threading.Thread(target=loop, daemon=True, name="got-store-ttl-sweeper")
        self._ttl_thread.start()
        future.add_done_callback(lambda f: self._ttl_stop.set() if f.cancelled() else None)
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True when it stopped (or was not running)."""
        if self._ttl_thread is None or not self._ttl_thread.is_alive():
            return True
        self._ttl_stop.set()
        self._ttl_thread.join(timeout)
        stopped = not self._ttl_thread.is_alive()
        if stopped:
            self._ttl_thread = None
        return stopped
