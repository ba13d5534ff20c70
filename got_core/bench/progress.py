"""Progress bars that still show progress when nobody is watching a terminal.

rich's live bar draws nothing on a console that is not a terminal (a CI log, ``| tee``, a file):
a long benchmark then prints nothing for an hour. :class:`LogProgress` is a rich
:class:`~rich.progress.Progress` that, on such a console, also prints one plain line per task when
it starts, at every tenth of its total, at most ``every_s`` seconds apart while it moves, and when
it finishes. On a terminal it is the ordinary live bar.
"""

from __future__ import annotations

import time
from typing import Any

from rich.progress import Progress, TaskID

__all__ = ["LogProgress"]


class LogProgress(Progress):
    """A rich ``Progress`` that logs plain lines on a console that is not a terminal."""

    def __init__(self, *columns: Any, every_s: float = 30.0, **kwargs: Any) -> None:
        super().__init__(*columns, **kwargs)
        self._every_s = every_s
        self._logged: dict[TaskID, tuple[int, float]] = {}  # task -> (tenth last logged, when)

    def _logging(self) -> bool:
        return not self.disable and not self.console.is_terminal

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> TaskID:
        task_id = super().add_task(description, *args, **kwargs)
        if self._logging():
            self._logged[task_id] = (-1, time.monotonic())
            self._log(task_id, force=True)
        return task_id

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._log(task_id)

    def update(self, task_id: TaskID, *args: Any, **kwargs: Any) -> None:
        super().update(task_id, *args, **kwargs)
        self._log(task_id)

    def _log(self, task_id: TaskID, *, force: bool = False) -> None:
        if not self._logging() or task_id not in self._logged:
            return
        with self._lock:
            task = self._tasks[task_id]
            completed, total, description = task.completed, task.total, task.description
        last_tenth, last_at = self._logged[task_id]
        now = time.monotonic()
        tenth = int(10 * completed / total) if total else 0
        finished = total is not None and completed >= total
        if finished and last_tenth == 10:
            return
        if not (force or finished or tenth > last_tenth or now - last_at >= self._every_s):
            return
        self._logged[task_id] = (10 if finished else tenth, now)
        count = f"{completed:,.0f}" if total is None else f"{completed:,.0f}/{total:,.0f}"
        self.console.print(f"{description}: {count}", markup=False, highlight=False)
