"""The file backends' process lock (filelock's descriptor lock) across real processes.

Two writer processes open a store that does not exist yet (both create it, racing) and
write distinct lessons: none may be lost. A second process sees the lock as taken
while :func:`locked` holds it, and free once it is released.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from timeouts import TEST_TIMEOUT, deadline

from got_core.errors import StorageError
from got_core.memory import get_backend
from got_core.memory._files import locked

WRITER = r"""
import os, sys, time
from got_core.memory import get_backend
backend, path, who, count, folder = sys.argv[1:6]
open(os.path.join(folder, "ready-" + who), "w").close()
while not os.path.exists(os.path.join(folder, "go")):  # open and write together
    time.sleep(0.002)
mem = get_backend(backend, path)  # the store does not exist yet: both processes create it
for i in range(int(count)):
    mem.add_insight(f"writer {who} stored lesson {i} about zq{who}x{i}", topic_key=f"w{who}-{i}")
mem.close()
"""

PROBE = r"""
import os, sys
from filelock import lock_descriptor, unlock_descriptor
fd = os.open(sys.argv[1], os.O_RDWR)
got = lock_descriptor(fd, blocking=False)  # never waits: answers whether the lock is free
if got:
    unlock_descriptor(fd)
print("free" if got else "held")
"""


def _start_together(folder, procs, names):
    until = deadline()
    while not all((folder / f"ready-{w}").exists() for w in names):
        assert all(p.poll() is None for p in procs), "a writer died before starting"
        assert time.monotonic() < until, "writers never got ready"
        time.sleep(0.01)
    (folder / "go").touch()


@pytest.mark.parametrize("backend", ["markdown", "graph"])
def test_two_processes_creating_the_same_store_lose_nothing(tmp_path, backend):
    path = tmp_path / "not" / "yet" / "there"
    n, names = 20, ("1", "2")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, backend, str(path), w, str(n), str(tmp_path)],
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for w in names
    ]
    _start_together(tmp_path, procs, names)
    for proc in procs:
        _, err = proc.communicate(timeout=TEST_TIMEOUT)
        assert proc.returncode == 0, err[-3000:]
    assert not path.parent.joinpath("there").is_file()
    texts = {lesson.text for lesson in get_backend(backend, path).all_lessons()}
    assert texts == {f"writer {w} stored lesson {i} about zq{w}x{i}" for w in names for i in range(n)}
    assert [p.name for p in path.iterdir() if p.name.endswith(".tmp")] == []


def _probe(lock_path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(lock_path)],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_the_lock_excludes_another_process_until_released(tmp_path):
    lock_path, thread_lock = tmp_path / ".memory.md.lock", threading.Lock()
    with locked(lock_path, thread_lock):
        assert thread_lock.locked()
        assert _probe(lock_path) == "held"
    assert not thread_lock.locked()
    assert _probe(lock_path) == "free"


def test_a_lock_file_that_cannot_be_created_is_a_storage_error(tmp_path):
    lock = locked(tmp_path / "missing" / ".lock", threading.Lock())
    with pytest.raises(StorageError, match="cannot create lock file"), lock:
        pass
    assert not (tmp_path / "missing").exists()
