"""Human in the loop: a paused agent's Context, resumed in a new process, as of its commit."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from timeouts import TEST_TIMEOUT

from got_integrations.llamaindex import GitMemory
from got_integrations.llamaindex._session import session_ref

ROOT = Path(__file__).resolve().parents[3]
APP = Path(__file__).with_name("hitl_app.py")
# The app is also run as a script by the child process, so it is a file beside the tests,
# loaded by path (the test directories are not packages).
_spec = importlib.util.spec_from_file_location("hitl_app", APP)
assert _spec is not None and _spec.loader is not None
hitl_app = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hitl_app)
agent, pause = hitl_app.agent, hitl_app.pause


def resume_in_a_new_process(tmp_path: Path, repo: Path, context: dict, live: bool = False) -> dict:
    context_file, out_file = tmp_path / "context.json", tmp_path / "out.json"
    context_file.write_text(json.dumps(context), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    args = [sys.executable, str(APP), "resume", str(repo), str(context_file), str(out_file)]
    done = subprocess.run(
        [*args, *(["--live"] if live else [])], capture_output=True, text=True, env=env, timeout=TEST_TIMEOUT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out_file.read_text(encoding="utf-8"))


def seen_text(result: dict) -> str:
    return json.dumps(result["seen"])


def session_refs(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname)", "refs/got/sessions/").split()


async def later_turn(repo: Path, live: bool = False) -> str:
    """The user moves on while the approval is pending: another turn on the same session."""
    other, _ = agent(["2 + 3 is 5."])
    memory = GitMemory.from_defaults(session_id="ops", path=repo, live=live)
    await other.run("Never mind: what is 2 + 3?", memory=memory)
    return memory.head or ""


async def test_resume_after_the_session_moved_on_forks_at_the_paused_commit(tmp_path, repo_path):
    memory = GitMemory.from_defaults(session_id="ops", path=repo_path)
    context = await pause(memory, "Delete notes.txt", "notes.txt")
    paused_at = memory.head
    assert paused_at and paused_at in json.dumps(context)  # the handle names its commit
    newest = await later_turn(repo_path)

    result = resume_in_a_new_process(tmp_path, repo_path, context)
    assert result["answer"] == "Done: the file is deleted."
    fork = f"ops.fork-{paused_at[:12]}"
    assert result["session_id"] == fork and result["forked_from"] == ["ops", paused_at]
    # the resumed LLM saw the conversation as it was when paused, not the later turn
    assert "Delete notes.txt" in seen_text(result) and "deleted notes.txt" in seen_text(result)
    assert "what is 2 + 3" not in seen_text(result) and "2 + 3 is 5." not in seen_text(result)
    assert result["stored"][0] == "Delete notes.txt" and "2 + 3 is 5." not in result["stored"]
    # git: the original line is untouched; the fork branches off at the paused commit
    assert git(repo_path, "rev-parse", session_ref("ops")).strip() == newest
    assert git(repo_path, "merge-base", session_ref(fork), session_ref("ops")).strip() == paused_at
    assert git(repo_path, "rev-list", "--count", f"{paused_at}..{session_ref(fork)}").strip() == "1"
    assert session_refs(repo_path) == [session_ref("ops"), session_ref(fork)]
    assert fsck_clean(repo_path)[0]


async def test_resume_of_an_unchanged_session_continues_on_it(tmp_path, repo_path):
    memory = GitMemory.from_defaults(session_id="ops", path=repo_path)
    context = await pause(memory, "Delete notes.txt", "notes.txt")
    paused_at = memory.head
    result = resume_in_a_new_process(tmp_path, repo_path, context)
    assert result["session_id"] == "ops" and result["forked_from"] is None
    assert result["stored"][-1] == "Done: the file is deleted."
    assert git(repo_path, "rev-parse", f"{session_ref('ops')}~1").strip() == paused_at
    assert session_refs(repo_path) == [session_ref("ops")]


@pytest.mark.parametrize("how", ["memory", "resume"])
async def test_live_resumes_on_the_newest_commit_as_before(tmp_path, repo_path, how):
    memory = GitMemory.from_defaults(session_id="ops", path=repo_path, live=how == "memory")
    context = await pause(memory, "Delete notes.txt", "notes.txt")
    newest = await later_turn(repo_path, live=how == "memory")
    result = resume_in_a_new_process(tmp_path, repo_path, context, live=how == "resume")
    assert result["session_id"] == "ops" and result["forked_from"] is None
    assert "what is 2 + 3" in seen_text(result)  # the later turn is visible: live
    assert git(repo_path, "rev-parse", f"{session_ref('ops')}~1").strip() == newest
    assert session_refs(repo_path) == [session_ref("ops")]
