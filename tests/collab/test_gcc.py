"""GCC context tools (arXiv 2508.00031): the workspace, agents driving it, Contexa interop."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from typer.testing import CliRunner

from got_core import DeterministicClock, ReasoningRepo
from got_core.cli.gcc_cmds import app as gcc_app
from got_core.errors import InvalidInputError, InvalidNameError, UnknownRefError
from got_core.gcc import GCCWorkspace, OTARecord, export_gcc, import_gcc
from got_core.gcc.contexa import (
    BranchMetadata,
    parse_metadata,
    parse_steps,
    render_metadata,
    render_steps,
)

HOSTILE = [
    "",
    "   ",
    " padded",
    "../etc",
    "a/b",
    "a\\b",
    "..",
    ".hidden",
    "-rf",
    "x\x00y",
    "new\nline",
    "x" * 150,
    "tab\tname",
]


@pytest.fixture
def repo(tmp_path):
    return ReasoningRepo.init(tmp_path / "agent.git", clock=DeterministicClock())


def records(ws):
    """Every record of a workspace, for comparing two of them."""
    out = {"roadmap": ws.roadmap(ws.root_branch), "branches": {}}
    for name, meta in ws.branches().items():
        commits = ws.commits(name)
        out["branches"][name] = {
            "meta": meta,
            "commits": commits,
            "current": ws.ota(name),
            "compressed": {c.commit_id: ws.compressed_steps(c.commit_id, name) for c in commits},
        }
    return out


def test_commit_compresses_steps_and_context_k1_is_the_last_summary(repo):
    ws = GCCWorkspace(repo, roadmap="Find the maximum of the LP.")
    summaries = ["Parsed the three constraints", "Solved the relaxation: x=2, y=3", "Verified integrality"]
    for i, summary in enumerate(summaries):
        for j in range(3):
            ws.log_ota(f"obs {i}.{j}", f"thought {i}.{j}", f"action {i}.{j}")
        ws.commit(summary)
    ws.log_ota("fresh observation", "fresh thought", "fresh action")
    view = ws.snapshot(k=1)
    assert view.summaries == [summaries[-1]]
    text = ws.context(k=1)
    assert summaries[-1] in text and summaries[0] not in text
    assert "Find the maximum of the LP." in text and "fresh thought" in text
    assert "thought 2.2" not in text  # compressed into the last milestone
    assert ws.snapshot(k=2).summaries == summaries[1:] and ws.snapshot(k=10).summaries == summaries
    assert ws.snapshot(k=0).summaries == []
    last = ws.commits()[-1]
    assert last.ota_steps == 3 and last.previous_summary == summaries[1]
    assert [s.thought for s in ws.compressed_steps(last.commit_id)] == [f"thought 2.{j}" for j in range(3)]
    assert [s.step for s in ws.ota()] == [10]  # numbering runs on across commits, as in Contexa
    # It is all plain git in the shared repository.
    assert git(repo.gitdir, "rev-list", "--count", "gcc/main").strip() == str(1 + 3 * 4 + 1)
    assert "Verified integrality" in git(repo.gitdir, "show", "gcc/main:branches/main/commit.md")
    assert next(c.summary for c in repo.grep("Got-GCC-Commit", fixed=True)).startswith("gcc(commit): Verified")
    assert fsck_clean(repo.gitdir)[0]


def test_branch_and_merge_are_real_git(repo):
    ws = GCCWorkspace(repo, roadmap="Prove the bound.")
    ws.log_ota("base case holds", "induct on n", "write the step")
    ws.commit("Base case done", update_roadmap="base case proven")
    meta = ws.branch("contradiction", "Try a proof by contradiction")
    assert ws.current_branch == "contradiction" and meta.created_from == "main"
    assert ws.ota() == [] and ws.commits() == []
    ws.log_ota("assume the bound fails", "derive a smaller counterexample", "apply descent")
    ws.commit("Descent argument closes the proof", update_roadmap="contradiction works")
    ws.switch("main")
    ws.commit("Induction stalls at the step", update_roadmap="induction stuck")
    record = ws.merge("contradiction")
    # both sides appended to the roadmap: git reports it, and the roadmap union decides it
    assert ws.current_branch == "main" and ws.last_merge.status == "resolved"
    assert [c.path for c in ws.last_merge.conflicts] == ["main.md"]
    merge_commit = ws.last_merge.commit
    assert len(git(repo.gitdir, "log", "-1", "--format=%P", merge_commit).split()) == 2
    assert git(repo.gitdir, "merge-base", "--is-ancestor", "gcc/contradiction", "gcc/main") == ""
    assert record.summary.startswith("Merged branch `contradiction` (1 commits)")
    assert "Descent argument closes the proof" in record.summary
    assert ws.metadata("contradiction").status == "merged" and ws.metadata("contradiction").merged_into == "main"
    roadmap = ws.roadmap()
    assert all(u in roadmap for u in ("induction stuck", "contradiction works", "Merged `contradiction`"))
    assert ws.snapshot(1).summaries == [record.summary]
    assert fsck_clean(repo.gitdir)[0]


def test_bad_input_raises_typed_errors(repo, tmp_path):
    ws = GCCWorkspace(repo)
    for summary in ("", "   ", None, 42):
        with pytest.raises(InvalidInputError):
            ws.commit(summary)
    with pytest.raises(InvalidInputError):
        ws.log_ota("", " ", "")
    with pytest.raises(InvalidInputError):
        ws.log_ota("ok", 7, "")
    with pytest.raises(InvalidInputError):
        ws.log_ota("nul\x00byte", "", "")
    for name in HOSTILE:
        with pytest.raises(InvalidNameError):
            ws.branch(name, "purpose")
        with pytest.raises(InvalidNameError):
            ws.switch(name)
    with pytest.raises(InvalidNameError):
        ws.branch(None, "purpose")
    with pytest.raises(UnknownRefError):
        ws.switch("nowhere")
    with pytest.raises(UnknownRefError):
        ws.merge("nowhere")
    with pytest.raises(UnknownRefError):
        GCCWorkspace(repo, "nowhere")
    ws.branch("alt", "explore")
    with pytest.raises(InvalidInputError):
        ws.branch("alt", "again")
    with pytest.raises(InvalidInputError):
        ws.branch("other", "")
    with pytest.raises(InvalidInputError):
        ws.merge("alt", target="alt")
    for k in (-1, 1.5, True, "1"):
        with pytest.raises(InvalidInputError):
            ws.context(k)
    with pytest.raises(InvalidInputError):
        ws.init("again")
    # Nothing hostile reached git.
    assert sorted(repo.refs("refs/heads/gcc/")) == ["refs/heads/gcc/alt", "refs/heads/gcc/main"]
    export_gcc(ws, tmp_path / "out")
    with pytest.raises(InvalidInputError):
        export_gcc(ws, tmp_path / "out")
    with pytest.raises(InvalidInputError):
        import_gcc(tmp_path / "out", repo)  # the namespace exists
    with pytest.raises(InvalidInputError):
        import_gcc(tmp_path / "empty-dir", repo, namespace="other")
    evil = tmp_path / "evil" / ".GCC" / "branches" / "-rf"
    evil.mkdir(parents=True)
    with pytest.raises(InvalidNameError):
        import_gcc(tmp_path / "evil", ReasoningRepo.init(tmp_path / "fresh.git"))


TRICKY = [
    ("line one\n---\nline three", "**Thought:** not a label", "### Step 99 — fake header"),
    ("blank\n\nlines inside", "back\\slash and \\---", "## Commit `fake`"),
    ("unicode — é ∑ 😀", "", "carriage\r\nreturn"),
]


def build_rich_workspace(repo):
    ws = GCCWorkspace(repo, roadmap="Roadmap with\n---\nseparators")
    for o, t, a in TRICKY:
        ws.log_ota(o, t, a)
    ws.commit("first: handled the tricky inputs\n---\nwith a separator line")
    ws.branch("alt-1", "Explore: an 'alternative' — \"quoted\" purpose with a very long description " * 3)
    ws.log_ota("alt obs", "alt thought", "alt action")
    ws.commit("alt milestone", update_roadmap="alt update")
    ws.log_ota("alt pending", "not committed yet", "")
    ws.switch("main")
    ws.branch("dead end", "Spaces in a name are fine")
    ws.log_ota("nothing here", "", "")
    ws.switch("main")
    ws.log_ota("main pending", "", "wait")
    ws.merge("alt-1", summary="Merged the alternative")
    ws.log_ota("after merge", "keep going", "")
    return ws


def test_export_import_roundtrip_preserves_every_record(repo, tmp_path):
    ws = build_rich_workspace(repo)
    original = records(ws)
    assert original["branches"]["alt-1"]["current"][0].thought == "not committed yet"
    assert [s.observation for s in original["branches"]["main"]["compressed"][ws.commits("main")[0].commit_id]] == [
        o for o, _, _ in TRICKY
    ]
    root = export_gcc(ws, tmp_path / "one")
    assert sorted(p.name for p in (root / "branches").iterdir()) == ["alt-1", "dead end", "main"]
    assert {p.name for p in (root / "branches" / "main").iterdir()} == {"commit.md", "log.md", "metadata.yaml"}
    # Contexa keeps one continuous log: every step, compressed or not, in order.
    steps = parse_steps((root / "branches" / "main" / "log.md").read_bytes().decode())
    assert [s.observation for s in steps] == [o for o, _, _ in TRICKY] + ["main pending", "after merge"]
    assert [s.step for s in steps] == [1, 2, 3, 4, 5]
    copy = import_gcc(tmp_path / "one", ReasoningRepo.init(tmp_path / "copy.git"))
    assert records(copy) == original
    export_gcc(copy, tmp_path / "two")
    cmp = filecmp.dircmp(tmp_path / "one" / ".GCC", tmp_path / "two" / ".GCC")
    assert _identical(cmp)
    assert copy.metadata("alt-1").status == "merged"
    assert git(copy.repo.gitdir, "merge-base", "--is-ancestor", "gcc/alt-1", "gcc/main") == ""


def _identical(cmp: filecmp.dircmp) -> bool:
    same = not (cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files)
    for name in cmp.common_files:
        same = same and (Path(cmp.left) / name).read_bytes() == (Path(cmp.right) / name).read_bytes()
    return same and all(_identical(sub) for sub in cmp.subdirs.values())


def test_metadata_yaml_matches_pyyaml():
    yaml = pytest.importorskip("yaml")
    purposes = [
        "plain",
        "Explore: JWT vs 'session' auth",
        'say "hi" \\ back',
        "é — ∑ 😀 unicode",
        "multi\nline\n\nwith blank",
        "  leading and trailing  ",
        "x " * 120,
        "#not a comment",
        "null",
        "true",
        "123",
        "- dash",
        "tab\there",
        "\x7f\x85 controls",
    ]
    for purpose in purposes:
        meta = BranchMetadata("b", purpose, "main", "2025-01-01T00:00:00.123456+00:00", "merged", "main", None)
        ours = render_metadata(meta)
        assert yaml.safe_load(ours)["purpose"] == purpose  # PyYAML (and so Contexa) reads ours
        assert parse_metadata(ours) == meta
        dumped = yaml.dump(
            {
                "name": "b",
                "purpose": purpose,
                "created_from": "main",
                "status": "merged",
                "created_at": meta.created_at,
                "merged_into": "main",
                "merged_at": None,
            },
            default_flow_style=False,
        )
        assert parse_metadata(dumped) == meta, dumped  # we read what PyYAML (Contexa) writes


def test_import_a_workspace_in_contexas_format(tmp_path, repo):
    gcc = tmp_path / "proj" / ".GCC"
    (gcc / "branches" / "main").mkdir(parents=True)
    (gcc / "branches" / "jwt").mkdir()
    (gcc / "main.md").write_text("# Project Roadmap\n\n**Initialized:** 2025-01-01T00:00:00+00:00\n\nBuild an API\n")
    (gcc / "branches" / "main" / "metadata.yaml").write_text(
        "created_at: '2025-01-01T00:00:00.000001+00:00'\ncreated_from: ''\nmerged_at: null\nmerged_into: null\n"
        "name: main\npurpose: Primary reasoning trajectory\nstatus: active\n"
    )
    (gcc / "branches" / "jwt" / "metadata.yaml").write_text(
        "created_at: '2025-01-01T00:00:05+00:00'\ncreated_from: main\nmerged_at: '2025-01-01T00:00:09+00:00'\n"
        'merged_into: main\nname: jwt\npurpose: "Explore JWT \\u2014 versus sessions, a long purpose that PyYAML\\\n'
        '  \\ folds"\nstatus: merged\n'
    )
    step = "### Step {n} — {ts}\n**Observation:** {o}\n\n**Thought:** {t}\n\n**Action:** {a}\n\n---\n"
    commit = (
        "## Commit `{id}`\n**Timestamp:** {ts}\n\n**Branch Purpose:** {p}\n\n"
        "**Previous Progress Summary:** {prev}\n\n**This Commit's Contribution:** {c}\n\n---\n"
    )
    (gcc / "branches" / "main" / "log.md").write_text(
        "# OTA Log — branch `main`\n\n"
        + step.format(n=1, ts="2025-01-01T00:00:01+00:00", o="empty dir", t="scaffold", a="mkdir")
        + step.format(n=2, ts="2025-01-01T00:00:02+00:00", o="scaffolded", t="add model", a="write models.py")
        + "\n## Merged from `jwt` (2025-01-01T00:00:09+00:00)\n\n"
        + step.format(n=1, ts="2025-01-01T00:00:06+00:00", o="jwt lib found", t="use it", a="pip install")
        + step.format(n=4, ts="2025-01-01T00:00:10+00:00", o="tests pass", t="ship", a="tag")
    )
    (gcc / "branches" / "main" / "commit.md").write_text(
        "# Commit History — branch `main`\n\n"
        + commit.format(
            id="a1b2c3d4",
            ts="2025-01-01T00:00:03+00:00",
            p="Primary reasoning trajectory",
            prev="Initial state — no prior commits.",
            c="Scaffold and model",
        )
        + commit.format(
            id="e5f6a7b8",
            ts="2025-01-01T00:00:09+00:00",
            p="Primary reasoning trajectory",
            prev="Merging branch `jwt` with purpose: Explore JWT",
            c="Merged branch `jwt`",
        )
    )
    (gcc / "branches" / "jwt" / "log.md").write_text(
        "# OTA Log — branch `jwt`\n\n"
        + step.format(n=1, ts="2025-01-01T00:00:06+00:00", o="jwt lib found", t="use it", a="pip install")
    )
    (gcc / "branches" / "jwt" / "commit.md").write_text(
        "# Commit History — branch `jwt`\n\n"
        + commit.format(id="c0ffee00", ts="2025-01-01T00:00:07+00:00", p="Explore JWT", prev="none", c="JWT middleware")
    )
    ws = import_gcc(tmp_path / "proj", repo)
    assert sorted(ws.branches()) == ["jwt", "main"]
    assert ws.metadata("jwt").purpose == "Explore JWT \u2014 versus sessions, a long purpose that PyYAML folds"
    assert ws.metadata("jwt").status == "merged"
    main_commits = ws.commits("main")
    assert [(c.commit_id, c.summary) for c in main_commits] == [
        ("a1b2c3d4", "Scaffold and model"),
        ("e5f6a7b8", "Merged branch `jwt`"),
    ]
    # Steps go to the first commit stamped at or after them; later ones are the current log.
    assert [s.observation for s in ws.compressed_steps("a1b2c3d4", "main")] == ["empty dir", "scaffolded"]
    assert [s.observation for s in ws.compressed_steps("e5f6a7b8", "main")] == ["jwt lib found"]
    assert [s.observation for s in ws.ota("main")] == ["tests pass"]
    assert ws.snapshot(1, "main").summaries == ["Merged branch `jwt`"]
    assert git(repo.gitdir, "merge-base", "--is-ancestor", "gcc/jwt", "gcc/main") == ""


def test_contexa_reads_our_export_and_we_read_contexa(tmp_path, repo):
    contexa = pytest.importorskip("contexa")  # the Contexa project's own Python package
    ws = GCCWorkspace(repo, roadmap="Build a REST API")
    ws.log_ota("dir is empty", "scaffold first", "create main.py")
    ws.log_ota("scaffolded", "add users", "write users.py")
    ws.commit("Scaffold and users endpoint")
    ws.branch("auth", "Explore JWT auth")
    ws.log_ota("jwt lib found", "use it", "pip install pyjwt")
    ws.commit("JWT middleware")
    ws.log_ota("tests red", "fix expiry", "edit auth.py")
    export_gcc(ws, tmp_path / "proj")
    theirs = contexa.GCCWorkspace(str(tmp_path / "proj"))
    theirs.load()
    main_view = theirs.context(branch="main", k=5)
    assert [c.this_commit_contribution for c in main_view.commits] == ["Scaffold and users endpoint"]
    assert [(r.step, r.observation, r.thought, r.action) for r in main_view.ota_records] == [
        (1, "dir is empty", "scaffold first", "create main.py"),
        (2, "scaffolded", "add users", "write users.py"),
    ]
    auth_view = theirs.context(branch="auth", k=1)
    assert auth_view.metadata.purpose == "Explore JWT auth" and auth_view.metadata.created_from == "main"
    assert [r.observation for r in auth_view.ota_records] == ["jwt lib found", "tests red"]
    # Contexa keeps working in our export; we import what it wrote.
    theirs.switch_branch("auth")
    theirs.commit("Expiry fixed")
    theirs.merge("auth", summary="Auth merged")
    back = import_gcc(tmp_path / "proj", ReasoningRepo.init(tmp_path / "back.git"))
    assert [c.summary for c in back.commits("auth")] == ["JWT middleware", "Expiry fixed"]
    assert [c.summary for c in back.commits("main")] == ["Scaffold and users endpoint", "Auth merged"]
    assert back.metadata("auth").status == "merged"
    assert [s.observation for s in back.compressed_steps(back.commits("auth")[1].commit_id, "auth")] == ["tests red"]


def test_step_format_escapes_round_trip():
    steps = [OTARecord(i + 1, f"2025-01-01T00:00:0{i}+00:00", o, t, a) for i, (o, t, a) in enumerate(TRICKY)]
    assert parse_steps("# OTA Log\n\n" + render_steps(steps)) == steps


# --------------------------------------------------------------------- agents driving the tools
def test_langgraph_scripted_agent_drives_the_tools(repo):
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from got_integrations.gcc_tools import as_langchain_tools

    ws = GCCWorkspace(repo, roadmap="Find the shortest proof.")
    script = [
        ("gcc_log", {"observation": "lemma A is known", "thought": "use it", "action": "cite A"}),
        ("gcc_commit", {"summary": "Reduced the claim to lemma A"}),
        ("gcc_branch", {"name": "../escape", "purpose": "hostile"}),
        ("gcc_branch", {"name": "direct", "purpose": "Try a direct proof"}),
        ("gcc_log", {"observation": "direct works", "thought": "write it", "action": "draft"}),
        ("gcc_commit", {"summary": ""}),
        ("gcc_commit", {"summary": "Direct proof in 5 lines"}),
        ("gcc_merge", {"branch": "direct"}),
        ("gcc_context", {"k": 1}),
    ]

    def agent(state: MessagesState):
        step = sum(isinstance(m, AIMessage) for m in state["messages"])
        if step < len(script):
            name, args = script[step]
            return {"messages": [AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{step}"}])]}
        return {"messages": [AIMessage("done")]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(as_langchain_tools(ws)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    out = graph.compile().invoke({"messages": [HumanMessage("prove it")]}, {"recursion_limit": 50})
    tool_msgs = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_msgs) == len(script)
    assert tool_msgs[2].status == "error" and "not usable" in tool_msgs[2].content
    assert tool_msgs[5].status == "error" and "empty" in tool_msgs[5].content
    context = tool_msgs[-1].content
    assert "Merged branch `direct` (1 commits). Contributions: Direct proof in 5 lines" in context
    assert "Reduced the claim to lemma A" not in context  # k=1: only the last milestone
    assert ws.current_branch == "main" and sorted(ws.branches()) == ["direct", "main"]
    assert [c.summary for c in ws.commits("direct")] == ["Direct proof in 5 lines"]
    assert ws.last_merge.status in ("merged", "fast-forward")
    assert out["messages"][-1].content == "done"


async def test_llamaindex_function_agent_drives_the_tools(repo):
    from llama_index.core.agent.workflow import FunctionAgent

    from got_integrations.gcc_tools import as_llamaindex_tools
    from got_integrations.llamaindex.testing import ScriptedFunctionCallingLLM, ScriptedToolCall

    ws = GCCWorkspace(repo, roadmap="Classify the reaction.")
    llm = ScriptedFunctionCallingLLM(
        [
            ScriptedToolCall("gcc_log", {"observation": "exothermic", "thought": "check entropy", "action": "compute"}),
            ScriptedToolCall("gcc_commit", {"summary": "Enthalpy negative"}),
            ScriptedToolCall("gcc_merge", {"branch": "ghost"}),
            ScriptedToolCall("gcc_log", {"observation": "entropy up", "thought": "spontaneous", "action": "conclude"}),
            ScriptedToolCall("gcc_commit", {"summary": "Reaction is spontaneous at all T"}),
            ScriptedToolCall("gcc_context", {"k": 1}),
            "Spontaneous at all temperatures.",
        ]
    )
    agent = FunctionAgent(tools=as_llamaindex_tools(ws), llm=llm, streaming=False)
    result = await agent.run(user_msg="Is the reaction spontaneous?")
    assert "Spontaneous" in str(result)
    assert [c.summary for c in ws.commits()] == ["Enthalpy negative", "Reaction is spontaneous at all T"]
    assert [s.observation for s in ws.compressed_steps(ws.commits()[-1].commit_id)] == ["entropy up"]
    tool_texts = [m.content for call in llm.calls for m in call if m.role.value == "tool"]
    assert any("no GCC branch 'ghost'" in t for t in tool_texts)  # the typed error reached the model
    last_context = [t for t in tool_texts if t.startswith("# CONTEXT")][-1]
    assert "Reaction is spontaneous at all T" in last_context and "Enthalpy negative" in last_context
    assert ws.snapshot(1).summaries == ["Reaction is spontaneous at all T"]


def test_gcc_cli(tmp_path):
    runner = CliRunner()
    r = ["-r", str(tmp_path / "cli.git")]

    def ok(*args):
        result = runner.invoke(gcc_app, [*args, *r])
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.output

    ok("init", "Ship the parser")
    ok("log", "-o", "tokens ok", "-t", "parse next", "-a", "write parser")
    assert "compressed 1 steps" in ok("commit", "Tokenizer done")
    ok("branch", "pratt", "Try a Pratt parser")
    ok("log", "-t", "precedence climbing")  # goes to the remembered current branch
    ok("commit", "Pratt parser works")
    assert "* pratt" in ok("branches")
    ok("switch", "main")
    assert "into main" in ok("merge", "pratt")
    view = json.loads(ok("context", "-k", "1", "--json"))
    assert [c["summary"] for c in view["commits"]] == [
        "Merged branch `pratt` (1 commits). Contributions: Pratt parser works"
    ]
    assert "Tokenizer done" in ok("context", "-k", "2")
    ok("export", str(tmp_path / "proj"))
    out = runner.invoke(gcc_app, ["import", str(tmp_path / "proj"), "-n", "copy", *r])
    assert out.exit_code == 0 and "imported 2 branch(es)" in out.output
    bad = runner.invoke(gcc_app, ["commit", "  ", *r])
    assert isinstance(bad.exception, InvalidInputError)
    bad = runner.invoke(gcc_app, ["branch", "a/b", "nope", *r])
    assert isinstance(bad.exception, InvalidNameError)
