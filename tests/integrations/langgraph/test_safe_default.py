"""Safe by default, and still a drop-in: what the default loader can and cannot build.

A graph whose state holds LangChain's ``AgentAction`` / ``AgentStep`` and a user's
pydantic model gets them back after a reload in a new process (LANGGRAPH_STRICT_MSGPACK
unset), while payloads planted in a repository cannot import a module, call a function,
unpickle, or use a type tag the saver never writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import ormsgpack
import pytest
from langchain_core.agents import AgentAction
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from got_core.errors import CorruptRepositoryError
from got_integrations.langgraph import GitCheckpointSaver, UnsafePayloadError
from got_integrations.langgraph._layout import frame

CFG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

GRAPH = textwrap.dedent("""
    import operator, sys
    from typing import Annotated, Any, Optional, TypedDict
    from langchain_core.agents import AgentAction, AgentFinish, AgentStep
    from langgraph.graph import END, START, StateGraph
    from pydantic import BaseModel
    from got_integrations.langgraph import GitCheckpointSaver

    class Point(BaseModel):
        x: int

    class State(TypedDict, total=False):
        outcome: Optional[AgentAction | AgentFinish]
        steps: Annotated[list[tuple[AgentAction, str]], operator.add]
        point: Point
        extra: Any

    def act(state):
        action = AgentAction(tool="search", tool_input="q", log="searching")
        return {"outcome": action, "steps": [(action, "found")], "point": Point(x=state["point"].x + 1),
                "extra": AgentStep(action=action, observation="seen")}

    def build(saver):
        b = StateGraph(State)
        b.add_node("act", act)
        b.add_edge(START, "act")
        b.add_edge("act", END)
        return b.compile(checkpointer=saver)

    cfg = {"configurable": {"thread_id": "t"}}
    path = sys.argv[2]
    if sys.argv[1] == "write":
        build(GitCheckpointSaver.from_path(path)).invoke({"point": Point(x=1), "steps": []}, cfg)
    else:
        values = build(GitCheckpointSaver.from_path(path)).get_state(cfg).values
        print(type(values["outcome"]).__name__, type(values["steps"][0][0]).__name__,
              type(values["point"]).__name__, values["point"].x, type(values["extra"]).__name__,
              type(values["extra"].action).__name__)
""")


def _python(tmp_path, *args: str) -> str:
    script = tmp_path / "graph.py"
    script.write_text(GRAPH)
    env = {k: v for k, v in os.environ.items() if k != "LANGGRAPH_STRICT_MSGPACK"}
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()


def test_langchain_and_schema_types_come_back_after_a_reload_in_a_new_process(tmp_path):
    path = str(tmp_path / "agent.git")
    _python(tmp_path, "write", path)
    assert _python(tmp_path, "read", path) == "AgentAction AgentAction Point 2 AgentStep AgentAction"


class Box(BaseModel):
    """A user's state type, known to the saver only through the graph's schema."""

    label: str


class BoxState(TypedDict):
    box: Box
    action: AgentAction


def test_the_graph_uses_the_saver_you_hold_and_both_read_the_same_types(tmp_path):
    builder = StateGraph(BoxState)
    builder.add_node("n", lambda s: {"box": Box(label=s["box"].label + "!")})
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    saver = GitCheckpointSaver.from_path(tmp_path / "held.git")
    graph = builder.compile(checkpointer=saver)
    assert graph.checkpointer is saver  # widened in place, not cloned
    graph.invoke({"box": Box(label="a"), "action": AgentAction(tool="t", tool_input="i", log="l")}, CFG)
    values = saver.get_tuple(CFG).checkpoint["channel_values"]
    assert values["box"] == Box(label="a!") and isinstance(values["action"], AgentAction)
    assert graph.get_state(CFG).values["box"] == Box(label="a!")


def _plant(tmp_path, data: bytes) -> Any:
    """A checkpoint whose value channel ``x`` is then replaced by ``data`` (a hostile writer's bytes)."""
    path = tmp_path / "hostile.git"
    saver = GitCheckpointSaver.from_path(path)
    checkpoint = {**empty_checkpoint(), "channel_values": {"x": "y" * 200}, "channel_versions": {"x": "1"}}
    saver.put(CFG, checkpoint, {"source": "input", "step": -1}, {"x": "1"})
    head = saver.repo.tip("refs/got/threads/t/root/head")
    assert "x/value.bin" in saver.repo.list_files(head)
    saver.repo.commit_files("refs/got/threads/t/root/head", {"x/value.bin": data}, "tamper\n", expected=head)
    return GitCheckpointSaver.from_path(path)  # a fresh saver: nothing cached


def _ext(code: int, *fields: Any) -> bytes:
    return frame(("msgpack", ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb(fields)))))


def test_a_planted_constructor_call_runs_nothing(tmp_path):
    sentinel = tmp_path / "pwned"
    reader = _plant(tmp_path, _ext(0, "os", "system", f"touch {sentinel}"))
    value = reader.get_tuple(CFG).checkpoint["channel_values"]["x"]
    assert not sentinel.exists()
    assert value == f"touch {sentinel}"  # the payload comes back as plain data, never called


def test_a_planted_type_from_an_unimported_module_is_not_imported(tmp_path):
    assert "this" not in sys.modules  # importing `this` prints the Zen of Python: nothing else imports it
    reader = _plant(tmp_path, _ext(5, "this", "Zen", {"a": 1}, "model_validate_json"))
    assert reader.get_tuple(CFG).checkpoint["channel_values"]["x"] == {"a": 1}
    assert "this" not in sys.modules


def test_a_planted_method_call_is_refused(tmp_path):
    sentinel = tmp_path / "pwned"
    reader = _plant(tmp_path, _ext(3, "os", "system", f"touch {sentinel}", "__call__"))
    reader.get_tuple(CFG)
    assert not sentinel.exists()


def test_planted_pickle_is_refused(tmp_path):
    import pickle

    reader = _plant(tmp_path, frame(("pickle", pickle.dumps({"a": 1}))))
    with pytest.raises(UnsafePayloadError, match="unpickle"):
        reader.get_tuple(CFG)


@pytest.mark.parametrize("tag", ["json", "msgpack+aes", "exec", "null+rot13"])
def test_a_type_tag_the_saver_never_writes_is_refused(tmp_path, tag):
    payload = b'{"lc": 2, "type": "constructor", "id": ["os", "system"], "args": ["true"]}'
    reader = _plant(tmp_path, frame((tag, payload)))
    with pytest.raises(CorruptRepositoryError, match="x/value.bin"):
        reader.get_tuple(CFG)
