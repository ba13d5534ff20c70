"""LessonMemoryBlock: lessons from every memory backend, by name, into the agent's prompt."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from timeouts import TEST_TIMEOUT

from got_core.errors import ConfigError, UnknownBackendError
from got_core.memory import get_backend
from got_integrations.llamaindex import GitMemory, LessonMemoryBlock
from got_integrations.llamaindex.testing import ScriptedFunctionCallingLLM

LESSON = "Check the discriminant before solving a quadratic for real roots."
OTHER = "When dividing by a variable, first make sure it cannot be zero."
QUESTION = "How many real roots does the quadratic x^2 + 1 have?"


def _seed(name: str, path, **options):
    memory = get_backend(name, path=path, **options)
    memory.add_insight(LESSON, topic_key="quadratic-roots", score=0.9)
    memory.add_failure(OTHER, topic_key="division", score=0.6)
    return memory


@pytest.mark.parametrize("backend", ["markdown", "graph", "git"])
async def test_lessons_from_a_named_backend_reach_the_llm(tmp_path, repo_path, backend):
    # the git backend shares the agent's repository: lessons on `memory`, chats on session refs
    path = repo_path if backend == "git" else tmp_path / backend
    _seed(backend, path)
    block = LessonMemoryBlock(backend=backend, path=str(path), k=1)
    memory = GitMemory.from_defaults(path=repo_path, session_id="s", memory_blocks=[block])
    llm = ScriptedFunctionCallingLLM(["None: the discriminant is negative."])
    await FunctionAgent(tools=[], llm=llm, system_prompt="Solve it.").run(QUESTION, memory=memory)
    seen = llm.calls[0]
    # as with llama-index's Memory: the agent's prompt, then the memory's system message
    assert [m.role.value for m in seen] == ["system", "system", "user"]
    assert seen[0].content == "Solve it."
    assert "<lessons>" in seen[1].content and LESSON in seen[1].content
    assert OTHER not in seen[1].content  # k=1: only the best match
    assert all(LESSON not in m.content for m in memory.get_all())  # lessons are prompt, not history


async def test_vector_backend_through_an_open_instance(tmp_path, repo_path):
    from got_core.memory.vector import VectorMemory
    from got_core.testing import HashEmbedder

    backend = VectorMemory(tmp_path / "vec", embedder=HashEmbedder())
    backend.add_insight(LESSON, topic_key="quadratic-roots")
    block = LessonMemoryBlock.from_backend(backend, k=1)
    assert (block.backend, block.path) == ("vector", str(tmp_path / "vec"))
    memory = GitMemory.from_defaults(path=repo_path, session_id="v", memory_blocks=[block])
    memory.put(ChatMessage(role="user", content=QUESTION))
    assert LESSON in (await memory.aget())[0].content


def test_none_backend_adds_nothing_and_flushed_chat_is_not_a_lesson(tmp_path, repo_path):
    block = LessonMemoryBlock(backend="none")
    memory = GitMemory.from_defaults(
        path=repo_path,
        session_id="n",
        token_limit=30,
        token_flush_size=5,
        chat_history_token_ratio=1.0,
        memory_blocks=[block],
    )
    for i in range(6):
        memory.put(ChatMessage(role="user", content=f"question {i} about quadratics and roots"))
    assert memory.get_all(status=None) and all(m.role.value == "user" for m in memory.get())  # no block text
    lessons = _seed("markdown", tmp_path / "md")
    block2 = LessonMemoryBlock.from_backend(lessons)
    before = len(lessons.all_lessons())
    asyncio.run(block2.aput([ChatMessage(role="user", content="flushed")], from_short_term_memory=True))
    assert len(lessons.all_lessons()) == before


def test_query_render_truncate_and_bad_options(tmp_path):
    _seed("markdown", tmp_path / "md")
    block = LessonMemoryBlock(backend="markdown", path=str(tmp_path / "md"), k=2)
    msgs = [
        ChatMessage(role="user", content="old question"),
        ChatMessage(role="assistant", content="x"),
        ChatMessage(role="user", content=QUESTION),
    ]
    assert block.query_for(msgs) == QUESTION
    assert block.query_for([ChatMessage(role="assistant", content="x")]) == ""
    assert asyncio.run(block.aget([])) == ""
    text = asyncio.run(block.aget(msgs))
    assert text.splitlines()[0] == f"- [quadratic-roots] {LESSON}"
    two = f"- [a] {LESSON}\n- [b] {OTHER}"
    assert asyncio.run(block.atruncate(two, 1)) == f"- [a] {LESSON}"  # least relevant (last) goes first
    assert asyncio.run(block.atruncate(two, 10_000)) is None
    with pytest.raises(ConfigError):
        LessonMemoryBlock(backend="markdown", path=str(tmp_path), k=0)
    with pytest.raises(UnknownBackendError):
        LessonMemoryBlock(backend="nope").render("anything")


def test_block_survives_the_memory_handle(tmp_path, repo_path):
    _seed("markdown", tmp_path / "md")
    memory = GitMemory.from_defaults(
        path=repo_path, session_id="h", memory_blocks=[LessonMemoryBlock(backend="markdown", path=str(tmp_path / "md"))]
    )
    memory.put(ChatMessage(role="user", content=QUESTION))
    data = memory.to_dict()
    data["instance"] = "another process"  # no live object to borrow from: rebuilt from its config
    again = GitMemory.from_dict(data)
    assert again.memory_blocks[0] is not memory.memory_blocks[0]
    assert LESSON in again.get()[0].content


def test_block_is_rebuilt_in_a_process_that_never_imported_it(tmp_path, repo_path):
    import json
    import subprocess
    import sys

    _seed("markdown", tmp_path / "md")
    memory = GitMemory.from_defaults(
        path=repo_path, session_id="p", memory_blocks=[LessonMemoryBlock(backend="markdown", path=str(tmp_path / "md"))]
    )
    memory.put(ChatMessage(role="user", content=QUESTION))
    code = (
        "import json, sys; from got_integrations.llamaindex.memory import GitMemory; "
        "assert 'got_integrations.llamaindex.blocks' not in sys.modules; "
        "m = GitMemory.from_dict(json.loads(sys.argv[1])); print(m.get()[0].content)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(memory.to_dict())], capture_output=True, text=True, timeout=TEST_TIMEOUT
    )
    assert out.returncode == 0, out.stderr
    assert LESSON in out.stdout
