"""What ``commit_node`` itself costs, counted (issue 13: the repository layer's share of a write).

Counted through spies on our own functions and on libgit2's ref lookups, never timed;
each test fails when the write does again what this work took out of it:

* a write after this handle's own write reads its outcome tag once, under the lock (the
  tag of a new node is expected absent; one that exists costs one more attempt, which
  reads it, and is refused as before);
* each ref name a write moves is judged valid once per handle, not once per use;
* the stored bytes stay those of the code before (commit, tree and notes ids under a
  deterministic clock are pinned), and stock ``git fsck`` accepts the result.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from hypothesis import given, settings
from hypothesis import strategies as st

from got_core import Node, ReasoningRepo
from got_core.errors import InvalidInputError, InvalidNameError
from got_core.names import encode_component
from got_core.repo import nodes
from got_core.storage import refnames
from got_core.storage.git import GitRepo
from got_core.types import DeterministicClock, canonical_json


def node(thought: str, outcome: str = "success") -> Node:
    return Node(thought, scores={"s_comb": 0.5}, problem_id="p", outcome=outcome, trace=[{"step": 1}])


def count_ref_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every ref read through the handle from now on."""
    read: list[str] = []
    real = GitRepo.ref_target

    def counting(self: GitRepo, name: str) -> str | None:
        read.append(name)
        return real(self, name)

    monkeypatch.setattr(GitRepo, "ref_target", counting)
    return read


def test_a_write_after_our_own_reads_its_outcome_tag_only_under_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(node("the first write: the next one builds on its hints"))
    read = count_ref_reads(monkeypatch)
    written = repo.commit_node(node("the measured write"))
    tag = f"refs/tags/success_{written.node_id}"
    assert read.count(tag) == 1, f"the new tag was read {read.count(tag)} times: {read}"
    assert written.tags == [f"success_{written.node_id}"]
    assert repo.git.ref_target(tag) == written.oid
    assert fsck_clean(repo.gitdir)[0]


def test_a_tag_that_exists_is_still_refused_after_the_node_and_its_note(tmp_path: Path) -> None:
    """The tag expected absent exists (stock git made it): the node and its note are
    published on the next attempt, the tag is refused, nothing else moves."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    first = repo.commit_node(node("before"))
    planned = Node("the same thought", scores={"s_comb": 0.5}, problem_id="p", outcome="success")
    node_id = planned.derive_id([first.oid])
    git(repo.gitdir, "tag", f"success_{node_id}", first.oid)  # where the next node's tag would go
    with pytest.raises(InvalidInputError, match="tags do not move"):
        repo.commit_node(planned)
    tip = repo.tip("master")
    assert tip is not None and tip != first.oid
    assert repo.read_node(tip).node_id == node_id
    assert repo.note_json(tip) == {"s_comb": 0.5}
    assert repo.git.ref_target(f"refs/tags/success_{node_id}") == first.oid
    again = repo.commit_node(node("and the handle goes on writing"))
    assert again.parents == (tip,)
    # with explicit parents the tag's name is known before the first attempt too
    side = Node("on explicit parents", scores={"s_comb": 0.5}, problem_id="p", outcome="failed")
    side_id = side.derive_id([first.oid])
    git(repo.gitdir, "tag", f"failed_{side_id}", first.oid)
    with pytest.raises(InvalidInputError, match="tags do not move"):
        repo.commit_node(side, ref="side", parents=[first.oid])
    side_tip = repo.tip("side")
    assert side_tip is not None and repo.read_node(side_tip).parents == (first.oid,)
    assert repo.git.ref_target(f"refs/tags/failed_{side_id}") == first.oid
    assert fsck_clean(repo.gitdir)[0]


def test_each_ref_name_a_write_moves_is_judged_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """libgit2's name rule runs for the one new name of a write (its tag), not again for the
    branch and the notes ref each write, nor twice for the tag."""
    judged: list[str] = []
    real = refnames.is_valid_ref_name

    def counting(name: str) -> bool:
        judged.append(name)
        return real(name)

    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(node("a first write", outcome=""), ref="work")
    monkeypatch.setattr(refnames, "is_valid_ref_name", counting)
    repo.commit_node(node("no tag", outcome=""), ref="work")
    assert judged == [], f"names judged again: {judged}"
    written = repo.commit_node(node("tagged"), ref="work")
    assert judged == [f"refs/tags/success_{written.node_id}"]
    judged.clear()
    with pytest.raises(InvalidNameError, match="not a valid git name"):
        repo.commit_node(node("a bad branch"), ref="bad..name")
    assert judged, "a name never seen is judged"


def test_the_stored_bytes_are_those_of_the_write_before(tmp_path: Path) -> None:
    """Under a deterministic clock a fixed sequence of writes gives the ids the code before
    this work gave (commits, trees, notes commits, tags), on one branch and beside it."""
    repo = ReasoningRepo.init(tmp_path / "r.git", clock=DeterministicClock())
    out = []
    for i in range(24):
        n = Node(
            f"thought {i}\n\nwith more lines é" if i % 2 else f"  thought {i}  ",
            scores={"s_comb": i / 24, "x": i} if i % 5 else {},
            trace=[{"step": 1, "o": "é"}] if i % 3 else [],
            problem_id="p/1" if i % 4 else "",
            depth=i % 3,
            outcome=("", "success", "failed")[i % 3],
            metadata={"k": i},
        )
        kw: dict[str, object] = {}
        if i % 7 == 5:
            kw["parents"] = [out[-1][0]]
        if i % 6 == 4:
            kw["ref"] = "side"
        stored = repo.commit_node(n, **kw)
        out.append((stored.oid, repo.git.commit_tree(stored.oid), stored.node_id, tuple(stored.tags)))
    notes = repo.git.ref_target("refs/notes/got")
    digest = hashlib.sha256(repr((out, notes)).encode()).hexdigest()
    # the digest the code before this work wrote (main at 8b39138): a pin, so it passes there too
    assert digest == "9f5cc211d11c6fcd5e86c93f95e2403bc66d57566bdbacb25eb68ed275751056", out[-1]
    assert fsck_clean(repo.gitdir)[0]


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(), _values, max_size=6) | st.dictionaries(st.text(), _scalars, max_size=8))
def test_the_node_files_json_is_canonical_json(data: dict[str, object]) -> None:
    """A node's scores and metadata files hold ``canonical_json``'s text, whichever way it is written."""
    assert nodes._canonical_json(data) == canonical_json(data)


def test_the_node_files_json_refuses_what_canonical_json_refuses(tmp_path: Path) -> None:
    for bad in ({"s": float("nan")}, {"s": float("inf")}, {"s": [float("nan")]}):
        with pytest.raises(ValueError):
            canonical_json(bad)
        with pytest.raises(ValueError):
            nodes._canonical_json(bad)
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for bad_node in (
        Node("x", scores={"s_comb": float("nan")}),
        Node("x", metadata={"k": float("inf")}),
        Node("x", scores={"s": 1}, metadata={"k": object()}),
    ):
        with pytest.raises(InvalidInputError, match="JSON-serialisable"):
            repo.commit_node(bad_node)
    assert repo.tip("master") is None, "a refused node writes nothing"


def test_a_node_write_runs_no_pure_python_json_encoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Flat scores and metadata are written by json's C encoder; the indenting encoder
    (``json.encoder._make_iterencode``, pure Python) runs only for nested values."""
    made: list[object] = []
    real = json.encoder._make_iterencode

    def counting(*args: object, **kwargs: object) -> object:
        made.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    repo = ReasoningRepo.init(tmp_path / "r.git")
    monkeypatch.setattr(json.encoder, "_make_iterencode", counting)
    written = repo.commit_node(
        Node("flat", scores={"s_comb": 0.5, "s_local": 1}, metadata={"model": "m", "t": None}, outcome="success")
    )
    assert made == []
    assert json.loads(repo.read_file(written.oid, "scores.json")) == {"s_comb": 0.5, "s_local": 1}
    repo.commit_node(Node("nested", scores={"s_comb": 0.5}, metadata={"cfg": {"a": [1, 2]}}))
    assert len(made) == 1, "a nested metadata file is still written by canonical_json"


_id_chars = st.sampled_from("abcXYZ019_-.%/ é")


@settings(max_examples=600, deadline=None)
@given(st.text(_id_chars, min_size=1, max_size=8) | st.text(st.sampled_from("ab1_-"), min_size=195, max_size=205))
def test_an_id_left_as_it_is_is_the_one_encode_component_gives(value: str) -> None:
    try:
        expected: str | type[InvalidNameError] = encode_component(value, "node id")
    except InvalidNameError:
        expected = InvalidNameError
    try:
        got: str | type[InvalidNameError] = nodes._encoded(value, "node id")
    except InvalidNameError:
        got = InvalidNameError
    assert got == expected


def test_plain_ids_are_not_encoded_character_by_character(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A derived node id, a plain problem id and the outcome pass ``encode_component``
    unchanged: a write does not run its loop over their characters (five times a write before)."""
    calls: list[str] = []
    real = nodes.encode_component

    def counting(value: str, what: str = "name") -> str:
        calls.append(value)
        return real(value, what)

    repo = ReasoningRepo.init(tmp_path / "r.git")
    repo.commit_node(node("warm up"))
    monkeypatch.setattr(nodes, "encode_component", counting)
    written = repo.commit_node(node("plain ids"))
    assert calls == []
    assert written.tags == [f"success_{written.node_id}"]
    odd = repo.commit_node(Node("odd ids", scores={"s_comb": 0.1}, problem_id="p/1", node_id="a.b", outcome="success"))
    assert sorted(calls) == ["a.b", "a.b", "p/1"]
    assert odd.tags == ["success_a.b"] and "Got-Problem: p%2F1" in repo.git.read_commit(odd.oid).message


def test_the_write_s_own_sync_reads_the_notes_state_in_one_statement(tmp_path: Path) -> None:
    """The sync a write pays after a query learns where the scores were indexed and where the
    notes ref is in one statement (two before), and indexes the note it wrote."""
    repo = ReasoningRepo.init(tmp_path / "r.git")
    for i in range(3):
        repo.commit_node(node(f"history {i}"))
    repo.grep("history")
    index = repo._index
    assert index is not None
    statements: list[str] = []
    index.db.set_trace_callback(statements.append)
    written = repo.commit_node(Node("scored later", scores={"s_comb": 0.75}, problem_id="p", outcome="success"))
    index.db.set_trace_callback(None)
    assert sum(s.startswith("BEGIN IMMEDIATE") for s in statements) == 1, "the write applied itself"
    notes = ("FROM refs WHERE name=", "FROM meta WHERE key='notes:")
    # the sync's first read (generations and whether the notes are behind) aside
    reads = [s for s in statements if any(n in s for n in notes) and "obs_gen" not in s]
    assert len(reads) == 1, reads
    assert [c.score for c in repo.grep("scored later")] == [0.75]
    assert repo.search("scored later", k=1)[0].oid == written.oid
