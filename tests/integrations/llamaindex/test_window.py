"""The window cut never separates a tool call from its results (pure rule, then end to end)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from got_integrations.llamaindex._window import choose_window_start, first_safe_index, is_safe_start

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock

from got_integrations.llamaindex import GitMemory

# A turn: a user message, zero or more tool rounds (an assistant call, then 1-3 results), an answer.
turn = st.tuples(
    st.integers(1, 40),
    st.lists(st.tuples(st.integers(1, 40), st.lists(st.integers(1, 60), min_size=1, max_size=3)), max_size=3),
    st.integers(1, 40),
)


def _flatten(turns):
    roles, tokens = [], []
    for user, rounds, answer in turns:
        roles.append("user"), tokens.append(user)
        for call, results in rounds:
            roles.append("assistant"), tokens.append(call)
            for r in results:
                roles.append("tool"), tokens.append(r)
        roles.append("assistant"), tokens.append(answer)
    return roles, tokens


@given(st.lists(turn, min_size=1, max_size=8), st.integers(1, 400), st.integers(0, 100))
@settings(max_examples=400, deadline=None)
def test_cut_is_always_at_a_user_message_and_keeps_the_last_turn(turns, limit, flush):
    roles, tokens = _flatten(turns)
    cut = choose_window_start(roles, tokens, limit, flush)
    assert 0 <= cut < len(roles)
    if cut:
        assert roles[cut] == "user"
        assert is_safe_start(roles, cut)
        last_user = max(i for i, r in enumerate(roles) if r == "user")
        assert cut <= last_user  # the latest turn stays
    if sum(tokens) <= limit:
        assert cut == 0
    elif cut and sum(tokens[cut:]) > limit:
        # still over budget only when no later user message could be the start
        assert not any(roles[i] == "user" for i in range(cut + 1, len(roles)))


@given(st.lists(st.sampled_from(["assistant", "tool", "system"]), min_size=1, max_size=30), st.integers(1, 100))
@settings(max_examples=300, deadline=None)
def test_without_user_messages_the_cut_is_never_a_tool_result(roles, limit):
    tokens = [10] * len(roles)
    cut = choose_window_start(roles, tokens, limit, 0)
    assert cut == 0 or roles[cut] not in ("tool", "function")


def test_cut_flushes_at_least_the_flush_size_and_rejects_mismatched_lengths():
    roles = ["user", "assistant"] * 5
    tokens = [10] * 10
    assert choose_window_start(roles, tokens, 95, 0) == 2  # 5 over: drop one turn
    assert choose_window_start(roles, tokens, 95, 35) == 4  # flush >= 35 tokens: two turns
    assert choose_window_start(roles, tokens, 100, 35) == 0  # under budget: no cut
    with pytest.raises(ValueError):
        choose_window_start(roles, tokens[:-1], 10)
    assert first_safe_index(["tool", "tool", "user"]) == 2
    assert first_safe_index(["tool"]) == 1


def _messages_for(turns):
    out, call = [], 0
    for t, (user, rounds, answer) in enumerate(turns):
        out.append(ChatMessage(role="user", content=f"question {t} " + "x " * user))
        for call_tokens, results in rounds:
            ids = []
            blocks = []
            for _ in results:
                call += 1
                ids.append(f"call_{call}")
                blocks.append(ToolCallBlock(tool_call_id=f"call_{call}", tool_name="f", tool_kwargs={"n": call}))
            blocks.insert(0, TextBlock(text="thinking " * call_tokens))
            out.append(ChatMessage(role="assistant", blocks=blocks))
            for cid, r in zip(ids, results):
                out.append(ChatMessage(role="tool", content="result " * r, additional_kwargs={"tool_call_id": cid}))
        out.append(ChatMessage(role="assistant", content=f"answer {t} " + "y " * answer))
    return out


def _check_pairs(window):
    assert window, "the window is never emptied by a cut"
    assert window[0].role.value != "tool"
    seen_calls = set()
    pending = set()
    for m in window:
        if m.role.value == "assistant":
            assert not pending, "a new assistant message before all tool results arrived"
            calls = {b.tool_call_id for b in m.blocks if isinstance(b, ToolCallBlock)}
            seen_calls |= calls
            pending |= calls
        elif m.role.value == "tool":
            cid = m.additional_kwargs["tool_call_id"]
            assert cid in seen_calls, f"tool result {cid} without its call in the window"
            pending.discard(cid)


@given(st.lists(turn, min_size=2, max_size=6), st.integers(60, 600), st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_git_memory_window_never_splits_tool_calls(tmp_path_factory, turns, limit, data):
    path = tmp_path_factory.mktemp("win") / "w.git"
    memory = GitMemory.from_defaults(
        path=path,
        session_id="s",
        token_limit=limit,
        chat_history_token_ratio=1.0,
        token_flush_size=data.draw(st.integers(1, 80)),
    )
    messages = _messages_for(turns)
    i = 0
    while i < len(messages):  # random batch sizes, as agents write them
        n = data.draw(st.integers(1, 4))
        asyncio.run(memory.aput_messages(messages[i : i + n]))
        i += n
        _check_pairs(memory.get())
    # reloaded from git by a fresh object: same window, still safe
    again = GitMemory.from_defaults(path=path, session_id="s", token_limit=limit, chat_history_token_ratio=1.0)
    assert [m.model_dump() for m in again.get()] == [m.model_dump() for m in memory.get()]
    assert len(again.get_all()) == len(messages)
