"""What the saver itself does in a running graph's super-step, counted (issue 13: the step's
user-space CPU): calls through spies on the real functions, never time.

* readable renderings of plain JSON data take one call per container, not one per field,
  and stay what the general path renders (depth limit, subclasses, floats, sets, messages);
* a ``put_writes`` entry's exact value is not framed (copied) just to check its type tag;
* a step spells no path of an earlier saver's ``writes`` ref (none exists for its checkpoints);
* the ref names the saver spells from encoded ids are checked where they are moved, once;
* a long list's segments are compared by range: only the segment paths a step looks up are spelled;
* a commit message's summary of a long message reads the words it shows, not all of them;
* the namespace state of a thread is found without taking the saver-wide lock.
"""

from __future__ import annotations

import enum
import threading
import tracemalloc
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from lgconf import running_config as cfg

from got_core.errors import InvalidInputError
from got_core.storage import refnames
from got_integrations.langgraph import GitCheckpointSaver, _layout, _pending, _render
from got_integrations.langgraph._layout import encode_exact, jsonable, one_line, segment_ranges


@pytest.fixture(autouse=True)
def no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next checkpoint is put right after the writes: the 50 ms timer must not store them first."""
    monkeypatch.setattr(_pending, "HAND_OVER_S", 3600.0)


def spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """Count the calls of ``module.name`` (looked up as a global, so recursive calls count too)."""
    calls: list[Any] = []
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def put(saver: GitCheckpointSaver, n: int, parent: str | None, **values: Any) -> str:
    values = values or {"n": n}
    checkpoint = {
        **empty_checkpoint(),
        "id": f"1f0{n:05d}",
        "channel_values": values,
        "channel_versions": dict.fromkeys(values, str(n)),
    }
    versions = dict.fromkeys(values, str(n))
    stored = saver.put(cfg(parent), checkpoint, {"source": "loop", "step": n}, versions)  # type: ignore[arg-type]
    return str(stored["configurable"]["checkpoint_id"])


def step(saver: GitCheckpointSaver, n: int, parent: str) -> str:
    """A super-step: the task's regular writes for ``parent`` (queued), then the next checkpoint."""
    saver.put_writes(cfg(parent), [("n", n), ("log", f"step {n}")], f"task-{n}")
    return put(saver, n, parent)


# ---------------------------------------------------------------------------- renderings
def test_plain_json_is_rendered_with_one_call_per_container(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = spy(monkeypatch, _layout, "jsonable")
    value = {"a": 1, "b": "x", "c": [1, 2.5, True, None, {"d": "e", "f": [3]}], "g": {}}
    assert _layout.jsonable(value) == value
    # the top dict, c's list, the float (checked for NaN), the dict in the list, its list, g:
    # strings, integers, booleans and None cost no call (the general path made 13)
    assert len(calls) == 6


def test_a_message_rendering_calls_per_container_not_per_field(monkeypatch: pytest.MonkeyPatch) -> None:
    message = AIMessage(
        content="hello",
        id="m1",
        tool_calls=[{"name": "lookup", "args": {"step": 1, "q": "x"}, "id": "c1"}],
    )
    expected = _layout.jsonable(message)
    calls = spy(monkeypatch, _layout, "jsonable")
    assert _layout.jsonable(message) == expected
    assert expected["content"] == "hello" and expected["tool_calls"][0]["args"] == {"step": 1, "q": "x"}
    # the message, its dumped fields, the tool call list, the call, its args (the general path made 13)
    assert len(calls) <= 6


class _Str(str):
    def __str__(self) -> str:
        return "sub:" + self[:]


class _Color(enum.Enum):
    RED = 1


class _Int(enum.IntEnum):
    ONE = 1


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_the_fast_path_renders_what_the_general_one_does(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = spy(monkeypatch, _layout, "jsonable")
    # keys that are not exact strings are rendered by str() (a subclass by its own __str__)
    assert jsonable({1: "a", _Str("k"): "b", None: 2}) == {"1": "a", "sub:k": "b", "None": 2}
    assert calls == []  # below the call itself (not counted: the test calls the real one) the general path made three
    # non-finite floats, tuples, sets, bytes, enums, dict subclasses: as the general path renders them
    assert jsonable([float("nan"), float("inf"), 1.5]) == ["nan", "inf", 1.5]
    assert jsonable({"t": (1, (2, 3)), "s": {3, 1}}) == {"t": [1, [2, 3]], "s": [1, 3]}
    assert jsonable([b"ab"]) == [{"bytes": 2, "sha1": "da23614e02469a0d7c7bd1bdab5c9c474b1904dc"}]
    assert jsonable([_Color.RED, _Int.ONE]) == [1, _Int.ONE]
    assert jsonable(OrderedDict(a=[1])) == {"a": [1]}
    assert jsonable([HumanMessage(content="hi", id="h")]) == [{"content": "hi", "id": "h", "type": "human"}]


def test_the_depth_limit_cuts_where_it_did(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = spy(monkeypatch, _layout, "jsonable")
    for depth in (38, 39, 40, 41, 42, 45):
        # 40 levels of lists are rendered; what sits below the 41st is its repr (cut to 200 characters)
        calls.clear()
        rendered = jsonable(_nested(depth))
        # a call per list level below the first (the leaf string costs none; the general path
        # made one more), and one for the level the limit cuts
        assert len(calls) == (depth - 1 if depth <= 40 else 41)
        level = 0
        while isinstance(rendered, list):
            assert len(rendered) == 1
            rendered, level = rendered[0], level + 1
        if depth <= 40:
            assert (level, rendered) == (depth, "leaf")
        else:
            assert level == 41 and rendered == repr(_nested(depth - 41))[:200]
        as_dicts: Any = "leaf"
        for _ in range(depth):
            as_dicts = {"k": as_dicts}
        out, level = jsonable(as_dicts), 0
        while isinstance(out, dict):
            out, level = out["k"], level + 1
        assert level == min(depth, 41)


def test_a_long_summary_line_reads_only_the_words_it_shows() -> None:
    text = "word\x00 " * 200_000 + "end"  # a message of 1.4 MB
    tracemalloc.start()
    try:
        line = one_line(text, 60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert line == " ".join(text.replace("\x00", " ").split())[:59] + "…"
    assert peak < 64 * 1024  # the old line split all of it: a list of 400,000 words, tens of MB
    # short texts, texts whose first words do not fill the line, whitespace runs and NULs
    for sample, limit in [
        ("a  b\n c", 72),
        (" " * 5000 + "tail", 20),
        ("x" * 300 + " " * 4000 + "y", 10),
        ("\x00" * 1000 + "ab " * 500, 8),
        ("é " * 400, 5),
    ]:
        assert one_line(sample, limit) == _one_line_reference(sample, limit)


def _one_line_reference(text: str, limit: int) -> str:
    text = " ".join(text.replace("\x00", " ").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------- put_writes
def test_a_write_entry_is_not_framed_to_check_its_tag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    parent = put(saver, 1, None)
    framed = spy(monkeypatch, _layout, "frame")
    saver.put_writes(cfg(parent), [("a", "x" * 1000), ("b", 2), ("c", [1, 2])], "task")
    assert framed == []  # the old check framed (copied) every entry's bytes: three calls
    child = put(saver, 2, parent)
    tup = saver.get_tuple(cfg(parent, running=False))
    assert tup is not None and sorted(tup.pending_writes or []) == [
        ("task", "a", "x" * 1000),
        ("task", "b", 2),
        ("task", "c", [1, 2]),
    ]
    assert child == "1f000002"
    for tag in ["two\nlines", "ümlaut", 7]:  # the tag is still checked
        with pytest.raises(InvalidInputError, match="type tag"):
            encode_exact((tag, b"data"))
    assert framed == []
    saver.close()


def test_a_step_spells_no_path_of_an_earlier_savers_writes_ref(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    parent = put(saver, 1, None)
    spelled = spy(monkeypatch, _pending, "writes_path")
    for n in range(2, 7):
        parent = step(saver, n, parent)
    assert spelled == []  # the old code spelled it once a step, for a ref that does not exist
    saver.close()


# ---------------------------------------------------------------------------- ref names
def test_a_super_step_checks_its_ref_name_where_it_moves_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    parent = step(saver, 2, put(saver, 1, None))
    checked = spy(monkeypatch, refnames, "check_ref_name")
    for n in range(3, 8):
        parent = step(saver, n, parent)
    # head, in the ref transaction (its name and its hint); the old step also checked head and
    # the parent's pending/ ref name before it (four a step)
    assert len(checked) <= 2 * 5
    tup = saver.get_tuple(cfg(running=False))
    assert tup is not None and tup.checkpoint["id"] == parent
    saver.close()


# ---------------------------------------------------------------------------- segments
def test_a_long_list_step_spells_only_the_segment_paths_it_looks_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    items = [f"m{i}" for i in range(995)]
    parent = put(saver, 1, None, m=list(items))
    spelled = spy(monkeypatch, _render, "segment_path")
    for n in range(2, 8):
        items.append(f"m{len(items)}")
        parent = put(saver, n, parent, m=list(items))
        # one path per segment the list has (to look it up), one per segment that goes; the old
        # code spelled every old and new segment's path again to compare them (three times as many)
        assert len(spelled) <= len(segment_ranges(len(items))) + len(segment_ranges(len(items) - 1)) // 2
        spelled.clear()
    fresh = GitCheckpointSaver.from_path(tmp_path / "r.git")
    tup = fresh.get_tuple(cfg(running=False))
    assert tup is not None and tup.checkpoint["channel_values"]["m"] == items
    fresh.close()
    saver.close()


# ---------------------------------------------------------------------------- namespace state
class _CountingLock:
    def __init__(self) -> None:
        self.taken = 0
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self.taken += 1
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_a_known_namespace_is_found_without_the_saver_wide_lock(tmp_path: Path) -> None:
    saver = GitCheckpointSaver.from_path(tmp_path / "r.git")
    parent = put(saver, 1, None)
    lock = _CountingLock()
    saver._states_lock = lock  # type: ignore[assignment]
    for n in range(2, 6):
        parent = step(saver, n, parent)
    assert lock.taken == 0  # the old lookup took it on every put and put_writes
    saver.put_writes({"configurable": {"thread_id": "other", "checkpoint_ns": "", "checkpoint_id": parent}}, [], "x")
    assert lock.taken == 1  # a new namespace is added under it
    saver.close()
