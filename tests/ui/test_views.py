"""The viewer's data layer on real repositories: paging, the cached walk order, escaping on the server."""

from __future__ import annotations

from got_core.repo import ReasoningRepo
from got_core.types import Node
from got_core.ui.trees import render_markdown, tree_view


def test_pages_follow_new_commits_and_rewritten_refs(tmp_path):
    with ReasoningRepo.init(tmp_path / "r.git") as repo:
        root = repo.commit_node(Node("root", scores={"s_comb": 0.5}, problem_id="p"))
        kids = [
            repo.commit_node(
                Node(f"child {i}", problem_id="p", depth=1), parents=[root.committed_oid()], ref=f"p/child{i}"
            )
            for i in range(5)
        ]
        pages = [tree_view(repo, offset=o, limit=2) for o in (0, 2, 4)]
        seen = [n["oid"] for p in pages for n in p["nodes"]]
        assert [p["more"] for p in pages] == [True, True, False]
        assert sorted(seen) == sorted([root.committed_oid(), *(k.committed_oid() for k in kids)])
        assert seen[-1] == root.committed_oid()  # parents after children (topological order)
        # A new commit on top (the cached order grows at the front) ...
        extra = repo.commit_node(
            Node("later", problem_id="p", depth=2), parents=[kids[4].committed_oid()], ref="p/child4"
        )
        assert tree_view(repo, limit=1)["nodes"][0]["oid"] == extra.committed_oid()
        # ... and a ref rewritten to an older commit drops what is no longer reachable.
        repo.set_ref("p/child4", kids[3].committed_oid())
        oids = [n["oid"] for n in tree_view(repo)["nodes"]]
        assert extra.committed_oid() not in oids and kids[4].committed_oid() not in oids
        assert set(oids) == {root.committed_oid(), *(k.committed_oid() for k in kids[:4])}


def test_markdown_escapes_html_and_drops_script_links():
    html = render_markdown(
        '<script>x()</script> <img src=x onerror="y()">\n\n[a](javascript:z()) [b](https://ok.example)'
    )
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html
    assert 'href="javascript:' not in html
    assert 'href="https://ok.example"' in html


def test_node_page_lists_every_rescore_of_its_note(tmp_path):
    from got_core.ui.trees import node_view

    with ReasoningRepo.init(tmp_path / "r.git") as repo:
        node = repo.commit_node(Node("a thought", scores={"s_comb": 0.4}, problem_id="p"))
        oid = node.committed_oid()
        repo.set_note(oid, {"s_comb": 0.7, "why": "re-scored by the judge"})
        repo.set_note(oid, {"s_comb": 0.9, "why": "validated"})
        notes = node_view(repo, oid)["notes"]
        texts = [n["note"] for n in notes]
        assert "validated" in texts[0] and "re-scored by the judge" in texts[1]  # newest first
        assert len({n["commit"] for n in notes}) == len(notes) >= 2
        assert tree_view(repo)["nodes"][0]["score"] == 0.9  # the page shows the latest score


def test_checkpoint_page_shows_pending_writes_and_interrupts(tmp_path):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    from got_core.ui.threads import checkpoint_view, thread_view
    from got_integrations.langgraph import GitCheckpointSaver

    class State(TypedDict, total=False):
        question: str
        answer: str

    def plan(state: State) -> dict:
        return {"question": "<b>which</b> units?"}

    def ask(state: State) -> dict:
        return {"answer": interrupt({"ask": state["question"]})}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("ask", ask)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "ask")
    builder.add_edge("ask", END)
    saver = GitCheckpointSaver.from_path(tmp_path / "lg.git")
    graph = builder.compile(checkpointer=saver)
    out = graph.invoke({}, {"configurable": {"thread_id": "t-1"}}, durability="sync")
    assert out["__interrupt__"]
    repo = saver.repo
    lanes = thread_view(repo, "t-1")["lanes"]
    views = [checkpoint_view(repo, "t-1", oid) for oid in lanes[0]["commits"]]
    interrupts = [i for v in views for i in v["interrupts"]]
    assert interrupts and "<b>which</b> units?" in interrupts[0]["value"]
    assert any(w["channel"] for v in views for w in v["writes"])
