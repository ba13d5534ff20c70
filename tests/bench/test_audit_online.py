"""Online memory mode (issue 16 §3): the memory question i saw is exactly the memory after
question i-1. Records are built from a real git memory accumulating one lesson per question,
with the runner's own fingerprints, as an online run would record them."""

from __future__ import annotations

import copy
from typing import Any

from got_core.bench.audit.memory import online_chain
from got_core.bench.runner import memory_fingerprint
from got_core.memory.git import GitMemory
from got_core.repo import ReasoningRepo


def _fingerprint(memory: GitMemory) -> tuple[dict[str, Any], str | None]:
    fp = memory_fingerprint(memory) or {}
    return fp, fp.pop("tip", None)


def _stream(tmp_path, n: int = 4) -> list[dict[str, Any]]:
    records = []
    with GitMemory(repo=ReasoningRepo.open(tmp_path / "online.git")) as memory:
        for i in range(n):
            before, tip_before = _fingerprint(memory)
            memory.add_success(
                f"Lesson {i}: restate the question, then check every unit twice.", source_problem=f"p{i}"
            )
            after, tip_after = _fingerprint(memory)
            records.append(
                {
                    "arm": "git",
                    "problem_id": f"p{i}",
                    "order": i,
                    "memory_state": tip_before,
                    "memory": {
                        "mode": "online",
                        "backend": "git",
                        "before": before,
                        "after": after,
                        "tips": {"before": tip_before, "after": tip_after},
                    },
                }
            )
    return records


def test_an_honest_online_stream_chains(tmp_path):
    records = _stream(tmp_path)
    assert online_chain(records, {}) == []
    assert online_chain(list(reversed(records)), {}) == []  # order comes from the records, not the list


def test_a_question_that_saw_an_older_memory_fails(tmp_path):
    records = _stream(tmp_path)
    forged = copy.deepcopy(records)
    forged[2]["memory"]["before"] = forged[1]["memory"]["before"]  # question 2 saw the memory before question 1
    forged[2]["memory_state"] = forged[2]["memory"]["tips"]["before"] = forged[1]["memory"]["tips"]["before"]
    found = online_chain(forged, {})
    assert found and "git/p2: the memory it saw is not the memory after p1" in found[0]


def test_a_memory_state_that_is_not_the_tip_read_fails(tmp_path):
    records = _stream(tmp_path)
    records[3]["memory_state"] = records[0]["memory"]["tips"]["after"]
    assert any("git/p3: memory_state" in line for line in online_chain(records, {}))


def test_an_online_memory_must_start_empty_or_from_its_ingest(tmp_path):
    records = _stream(tmp_path)[1:]  # the stream now starts at a memory holding one lesson
    assert any("did not start empty" in line for line in online_chain(records, {}))
    assert online_chain(records, {"git": records[0]["memory"]["before"]}) == []
