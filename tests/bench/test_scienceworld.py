"""ScienceWorld cross-episode memory (issue 16 §2): the real simulator, a scripted policy, commits checked with git.

The pure parts (action kinds, the shortlist, reply parsing and matching, lessons, the
scripted policy) are tested without the simulator; everything else runs the real
ScienceWorld jar shipped in the ``scienceworld`` package (a Java process on 127.0.0.1),
with short tasks and few steps so the file stays well within two minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gitcli import fsck_clean, git
from timeouts import TEST_TIMEOUT

from got_core.bench.scienceworld import (
    DEMO_TURN,
    ScienceWorldEnv,
    action_kind,
    kind_label,
    match_action,
    parse_reply,
    shortlist,
    step_messages,
    system_prompt,
)
from got_core.bench.scienceworld_episodes import (
    Episode,
    EpisodeSettings,
    distill_lesson,
    observed_lesson,
    run_episode,
)
from got_core.bench.scienceworld_policy import plan_from_lessons, scripted_model, scripted_policy
from got_core.bench.scienceworld_run import RunOptions, run_scienceworld
from got_core.errors import ConfigError, InvalidInputError
from got_core.memory import get_backend
from got_core.memory.git import GitMemory
from got_core.repo import ReasoningRepo
from got_core.solver.scripted import ScriptedChatModel
from got_core.types import DeterministicClock

#: The simulator is a Java program; CI installs a runtime (.ci/run), so there it never skips.
needs_java = pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("CI"),
    reason="ScienceWorld's simulator needs a Java runtime (apt-get install -y openjdk-17-jre-headless)",
)


# ----------------------------------------------------------------------------- pure parts


def test_action_kinds_drop_the_objects():
    assert action_kind("move egg dove egg in inventory to red box") == "move"
    assert action_kind("Look around") == "look around"
    assert action_kind("look at table") == "look at"
    assert action_kind("focus on baby brown bear") == "focus on"
    assert action_kind("wait1") == "wait1"
    assert kind_label("move") == "move … to …"
    assert kind_label("focus on") == "focus on …"
    assert kind_label("look around") == "look around"


@pytest.mark.parametrize(
    ("reply", "thought", "action"),
    [
        ("Thought: go there.\nAction: teleport to kitchen", "go there.", "teleport to kitchen"),
        ("thought: hm\n  action:  `open door to kitchen`.\nObservation: x", "hm", "open door to kitchen"),
        ("I will look.\nlook around", "I will look.", "look around"),
        ("", "", ""),
    ],
)
def test_replies_are_split_into_thought_and_action(reply, thought, action):
    assert parse_reply(reply) == (thought, action)


def test_actions_are_matched_to_valid_ones_or_fall_back():
    valid = ["focus on table", "look around", "task", "teleport to kitchen", "teleport to kitchen door"]
    shown = valid
    assert match_action("Teleport to kitchen!", valid, shown) == ("teleport to kitchen", "exact")
    # no Action line, but the reply names a shown action: the longest one named wins
    said = "I think I should teleport to kitchen door now"
    assert match_action("", valid, shown, said) == ("teleport to kitchen door", "mentioned")
    # a one-word action ("task") in the text is chance, not a choice
    assert match_action("", valid, shown, "the task is hard") == ("look around", "fallback")
    assert match_action("focus on tabel", valid, shown) == ("focus on table", "closest")
    assert match_action("fly to the moon", valid, shown) == ("look around", "fallback")


def test_shortlist_puts_navigation_first_caps_and_hides_fatal_or_useless_actions():
    valid = [
        "look around",
        "teleport to kitchen",
        "go to hallway",
        "open door to kitchen",
        "focus on kitchen",  # a place: focusing on it ends the episode
        "focus on agent",
        "focus on door to kitchen",
        "focus on red box",
        "reset task",
        "connect battery to wire",
        *[f"move cup {i} to cup {j}" for i in range(10) for j in range(10)],
        "pick up thermometer",
        "read recipe",
    ]
    task = "Your task is to find a(n) non-living thing. Then, move it to the red box in the kitchen."
    out = shortlist(valid, task, "This room is called the kitchen. a thermometer", "", k=12)
    assert len(out) == 12
    assert out[:4] == ["go to hallway", "look around", "open door to kitchen", "teleport to kitchen"]
    for hidden in ("focus on kitchen", "focus on agent", "focus on door to kitchen", "reset task"):
        assert hidden not in out
    assert "connect battery to wire" not in out
    assert "connect battery to wire" in shortlist(valid, task, "", "", k=200, electrical=True)
    # one kind's hundred pairs do not crowd out the others
    kinds = {action_kind(a) for a in out[4:]}
    assert {"focus on", "pick up", "move", "read"} <= kinds
    assert "focus on red box" in out  # shares words with the task
    with pytest.raises(InvalidInputError):
        shortlist(valid, task, "", "", k=0)


def test_observed_lessons_name_kinds_never_objects():
    steps = [
        ("teleport to kitchen", 17),
        ("look around", 0),
        ("focus on thermometer", 50),
        ("move thermometer to red box", 25),
    ]
    text = observed_lesson("find-non-living-thing", steps, 100)
    assert "teleport to … (+17); focus on … (+50); move … to … (+25)" in text
    for obj in ("kitchen", "thermometer", "red box"):
        assert obj not in text
    fatal = observed_lesson("find-animal", [("teleport to outside", 0), ("focus on chair", -125)], -100)
    assert "no action raised the score" in fatal and "ended at -100 right after focus on …" in fatal
    assert "chair" not in fatal


def test_a_lesson_naming_the_focused_object_is_stripped_or_refused():
    steps = [("focus on blue jay", 50), ("move blue jay to red box", 25)]
    naming = ScriptedChatModel(default="Lesson: Always focus on the blue jay before you move anything to a box.")
    text, source, raw = distill_lesson(naming, "find-animal", "Find an animal.", steps, 75)
    assert source == "model" and "blue jay" not in text.lower() and "[answer withheld]" in text
    assert "Lesson:" in raw
    only_object = ScriptedChatModel(default="Lesson: blue jay")
    text, source, _ = distill_lesson(only_object, "find-animal", "Find an animal.", steps, 75)
    assert source == "template (model lesson refused)" and "blue jay" not in text
    silent = ScriptedChatModel(default="")
    text, source, _ = distill_lesson(silent, "find-animal", "Find an animal.", steps, 75)
    assert source == "template" and text == observed_lesson("find-animal", steps, 75)


def test_scripted_policy_follows_the_best_lesson_and_explores_without_one():
    lessons = [
        observed_lesson("find-non-living-thing", [("teleport to kitchen", 17)], 25),
        observed_lesson("find-non-living-thing", [("teleport to kitchen", 17), ("focus on table", 50)], 75),
    ]
    system = system_prompt(lessons)
    assert plan_from_lessons(system) == ["teleport to", "focus on"]
    user = "\n".join(
        [
            "Task: Your task is to find a(n) non-living thing. Then, move it to the red box in the kitchen.",
            "Step 2 of 10. Score so far: 25/100.",
            "Actions so far: teleport to kitchen",
            "Valid actions (4 of 90):",
            "- look around",
            "- teleport to hallway",
            "- focus on chair",
            "- focus on red box",
            "What do you do next?",
        ]
    )
    reply = scripted_policy(step_messages(system, user))
    assert parse_reply(reply)[1] == "focus on red box"  # the plan's next kind, most task words
    explore = parse_reply(scripted_policy(step_messages(system_prompt([]), user)))[1]
    assert explore in {"look around", "teleport to hallway", "focus on chair", "focus on red box"}
    assert scripted_policy([{"role": "user", "content": "Write ONE general lesson (one or two sentences)"}]).startswith(
        "Lesson:"
    )


def test_every_step_shows_the_same_made_up_demonstration():
    messages = step_messages("sys", "now")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1:3] == [dict(m) for m in DEMO_TURN]
    assert "library" in DEMO_TURN[1]["content"]  # a room no ScienceWorld task has


# ----------------------------------------------------------------------------- the real simulator


@pytest.fixture(scope="module")
def env():
    with ScienceWorldEnv(step_limit=9) as e:
        yield e


@pytest.mark.slow
@needs_java
def test_the_package_ships_the_simulator_and_it_runs(env):
    from importlib.metadata import files

    jars = [str(f) for f in files("scienceworld") or [] if str(f).endswith(".jar")]
    assert jars == ["scienceworld/scienceworld.jar"]
    state = env.reset("find-non-living-thing", 0)
    assert "hallway" in state.look and state.valid and "look around" in state.valid
    assert "non-living thing" in env.task_description
    after = env.step("teleport to kitchen")
    assert after.reward > 0 and after.score == state.score + after.reward and not after.done
    assert "kitchen" in after.look


@pytest.mark.slow
@needs_java
def test_bad_tasks_variations_and_actions_are_typed_errors(env):
    with pytest.raises(InvalidInputError, match="unknown ScienceWorld task"):
        env.reset("find-a-unicorn", 0)
    top = env.max_variations("find-animal")
    with pytest.raises(InvalidInputError, match="variations"):
        env.reset("find-animal", top)
    env.reset("find-animal", 0)
    for bad in ("", "look\naround", "x" * 600, None):
        with pytest.raises(InvalidInputError):
            env.step(bad)
    assert "No known action" in env.step("fly to the moon").observation


@pytest.mark.slow
@needs_java
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_the_simulator_needs_no_network(tmp_path):
    """In a network namespace with only loopback up, the simulator still starts and plays."""
    script = (
        "from got_core.bench.scienceworld import ScienceWorldEnv\n"
        "with ScienceWorldEnv(step_limit=5) as e:\n"
        "    s = e.reset('find-animal', 1)\n"
        "    print('VALID', len(s.valid), e.step('look around').score)\n"
    )
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("creating a network namespace is not permitted here (needs root)")
    out = subprocess.run(
        ["unshare", "-n", "sh", "-c", f'ip link set lo up && {sys.executable} -c "$0"', script],
        capture_output=True,
        text=True,
        timeout=TEST_TIMEOUT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "VALID" in out.stdout


def _settings(arm: str, **kw):
    return EpisodeSettings(arm=arm, max_steps=kw.pop("max_steps", 6), **kw)


@pytest.mark.slow
@needs_java
def test_every_step_is_a_commit_the_outcome_a_tag_and_lessons_carry_over(env, tmp_path):
    repo = ReasoningRepo.open(tmp_path / "git.git", clock=DeterministicClock())
    memory = GitMemory(repo=repo)
    model = scripted_model()
    first = run_episode(
        env, Episode(0, "find-non-living-thing", 0), model=model, memory=memory, repo=repo, settings=_settings("git")
    )
    second = run_episode(
        env, Episode(1, "find-non-living-thing", 1), model=model, memory=memory, repo=repo, settings=_settings("git")
    )
    gitdir = tmp_path / "git.git"
    for rec in (first, second):
        branch = rec["branch"]
        # one commit per step plus the episode's summary, on an orphan branch of its own
        assert int(git(gitdir, "rev-list", "--count", branch)) == rec["steps"] + 1
        assert git(gitdir, "rev-list", "--max-parents=0", branch).strip() != ""
        tip = git(gitdir, "rev-parse", branch).strip()
        assert rec["commit"] == tip
        assert git(gitdir, "rev-parse", f"{rec['tag']}^{{commit}}").strip() == tip
        assert rec["tag"] == ("success_" if rec["success"] else "failed_") + rec["episode"]
        step1 = git(gitdir, "rev-list", "--reverse", branch).split()[0]
        assert set(git(gitdir, "ls-tree", "--name-only", step1).split()) == {
            "metadata.json",
            "scores.json",
            "thought.md",
            "trace.jsonl",
        }
        meta = json.loads(git(gitdir, "show", f"{step1}:metadata.json"))
        assert meta["kind"] == "step" and meta["valid_actions"] > 0 and meta["shown_actions"] <= 30
        trace = json.loads(git(gitdir, "show", f"{step1}:trace.jsonl"))
        assert trace["action"] == rec["actions"][0] and trace["observation"] and "prompt" in trace
        assert f"Got-Problem: {rec['episode']}" in git(gitdir, "log", "-1", "--format=%B", step1)
        for sha in git(gitdir, "rev-list", branch).split():  # every node has its score note
            note = json.loads(git(gitdir, "notes", "--ref=got", "show", sha))
            assert 0.0 <= note["s_comb"] <= 1.0
    # the first episode's lesson is on the memory branch and in the second episode's prompt
    assert first["lessons_used"] == [] and first["lesson"]
    assert second["lessons_used"] == [first["lesson"]]
    step1 = git(gitdir, "rev-list", "--reverse", second["branch"]).split()[0]
    system = json.loads(git(gitdir, "show", f"{step1}:trace.jsonl"))["prompt"][0]["content"]
    assert first["lesson"] in system
    assert "lessons/" in git(gitdir, "ls-tree", "-r", "--name-only", "memory")
    ok, output = fsck_clean(gitdir)
    assert ok, output
    with pytest.raises(ConfigError, match="already has"):
        run_episode(
            env,
            Episode(0, "find-non-living-thing", 0),
            model=model,
            memory=memory,
            repo=repo,
            settings=_settings("git"),
        )
    repo.close()


@pytest.mark.slow
@needs_java
def test_a_seeded_rerun_writes_the_same_commits_and_no_memory_sees_nothing(env, tmp_path):
    shas = []
    for name in ("a", "b"):
        repo = ReasoningRepo.open(tmp_path / f"{name}.git", clock=DeterministicClock())
        rec = run_episode(
            env,
            Episode(0, "lifespan-longest-lived", 0),
            model=scripted_model(seed=3),
            memory=get_backend("none"),
            repo=repo,
            settings=_settings("none", max_steps=4),
        )
        assert rec["lessons_used"] == [] and rec["lesson"] is None and rec["lesson_source"] == "no memory"
        shas.append(git(tmp_path / f"{name}.git", "rev-list", rec["branch"]))
        repo.close()
    assert shas[0] == shas[1]


@pytest.mark.slow
@needs_java
def test_the_protocol_writes_table_curve_and_paired_records(tmp_path):
    out = tmp_path / "run"
    lines: list[str] = []
    opts = RunOptions(
        out=out,
        tasks=("find-non-living-thing", "lifespan-longest-lived"),
        n_variations=2,
        backends=("none", "markdown", "git"),
        max_steps=5,
        workers=2,
        bootstrap=500,
    )
    result = run_scienceworld(
        opts, model_factory=scripted_model, label="stand-in model (scripted policy)", progress=lines.append
    )
    assert len(result.records) == 3 * 4 and len(lines) == 12
    episodes = [[r["episode"] for r in result.records if r["arm"] == arm] for arm in opts.backends]
    assert episodes[0] == episodes[1] == episodes[2]
    assert [e.split("-", 1)[1] for e in episodes[0][:2]] == ["find-non-living-thing-v0", "lifespan-longest-lived-v0"]
    table = (out / "table.md").read_text()
    assert "stand-in model (scripted policy)" in table and "Δ vs none" in table
    for arm in opts.backends:
        assert f"| {arm} | 4 |" in table
        ok, output = fsck_clean(out / "repos" / f"{arm}.git")
        assert ok, output
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curve = [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]
    assert len(curve) == 12 and all(p["low"] <= p["mean_so_far"] <= p["high"] for p in curve)
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert {r["arm"] for r in rows} == set(opts.backends)
    row = {r.arm: r for r in result.rows}
    assert row["none"].delta is None and row["git"].delta is not None
    assert row["none"].lessons == 0 and row["git"].lessons >= 1 and row["markdown"].lessons >= 1
    assert (out / "memory" / "markdown").is_dir() and not (out / "memory" / "git").exists()
    config = json.loads((out / "config.json").read_text())
    assert config["model_label"] == "stand-in model (scripted policy)" and "api_key" not in config["options"]
    with pytest.raises(ConfigError, match="already holds a run"):
        run_scienceworld(opts, model_factory=scripted_model)
    with pytest.raises(InvalidInputError, match="variations"):
        run_scienceworld(
            RunOptions(out=tmp_path / "r2", tasks=("power-component",), n_variations=10_000),
            model_factory=scripted_model,
        )


def test_bad_options_are_refused_before_anything_starts(tmp_path):
    for opts, error in (
        (RunOptions(out=tmp_path / "a", backends=("none", "sqlite")), ConfigError),
        (RunOptions(out=tmp_path / "b", backends=("git", "git")), InvalidInputError),
        (RunOptions(out=tmp_path / "c", tasks=()), InvalidInputError),
        (RunOptions(out=tmp_path / "d", max_steps=0), InvalidInputError),
    ):
        with pytest.raises(error):
            run_scienceworld(opts, model_factory=scripted_model)
    assert not any(Path(tmp_path).iterdir())
