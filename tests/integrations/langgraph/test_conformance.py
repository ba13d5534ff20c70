"""The official langgraph-checkpoint-conformance suite against GitCheckpointSaver.

Every capability runs, the optional ones included (``copy_thread``, ``prune``,
``delete_for_runs``): 58 required + 23 optional tests in 0.0.2. The suite is run
through its own ``validate`` entry point, as its README tells third-party savers to.
"""

from __future__ import annotations

import pytest
from gitcli import fsck_clean
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES, DetectedCapabilities

from got_integrations.langgraph import GitCheckpointSaver


@pytest.fixture
def registered(tmp_path):
    paths = []

    @checkpointer_test(name="GitCheckpointSaver")
    async def git_checkpointer():
        # a fresh repository per capability suite, as the suite expects
        path = tmp_path / f"cp{len(paths)}.git"
        paths.append(path)
        with GitCheckpointSaver.from_conn_string(str(path)) as saver:
            yield saver

    return git_checkpointer, paths


def test_every_capability_is_detected(tmp_path):
    saver = GitCheckpointSaver.from_path(tmp_path / "detect.git")
    detected = DetectedCapabilities.from_instance(saver)
    assert detected.detected == ALL_CAPABILITIES and not detected.missing


async def test_conformance_suite_passes_all_capabilities(registered):
    factory, paths = registered
    report = await validate(factory)
    failures = {name: result.failures for name, result in report.results.items() if not result.passed}
    assert not failures, failures
    assert report.passed_all_base()
    counts = {name: result.tests_passed for name, result in report.results.items()}
    # every capability ran (none skipped), and the counts are those of the published suite
    assert set(counts) == {c.value for c in ALL_CAPABILITIES}
    assert all(result.detected for result in report.results.values())
    required = sum(counts[c] for c in ("put", "put_writes", "get_tuple", "list", "delete_thread"))
    optional = sum(counts[c] for c in ("copy_thread", "prune", "delete_for_runs"))
    assert required >= 58 and optional >= 23, counts
    # what the suite wrote (forks, rewrites, deletions included) is a valid git repository
    for path in paths:
        if path.exists():
            ok, out = fsck_clean(path)
            assert ok, out
