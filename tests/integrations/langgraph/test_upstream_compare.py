"""scripts/langgraph_upstream/compare.py: how a run of LangGraph's own tests is judged."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts" / "langgraph_upstream"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("upstream_compare", SCRIPTS / "compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _xml(tmp_path, cases: dict[str, str]) -> Path:
    rows = []
    for name, outcome in cases.items():
        cls, _, test = name.partition("::")
        body = {"passed": "", "failed": "<failure message='x'/>", "skipped": "<skipped/>"}[outcome]
        rows.append(f'<testcase classname="{cls}" name="{test}">{body}</testcase>')
    path = tmp_path / "results.xml"
    path.write_text(f"<testsuites><testsuite>{''.join(rows)}</testsuite></testsuites>")
    return path


def test_a_failure_where_sqlite_passes_fails_the_run(compare, tmp_path, capsys):
    path = _xml(
        tmp_path,
        {
            "t.m::test_a[sync-git]": "failed",
            "t.m::test_a[sync-sqlite]": "passed",
            "t.m::test_b[git_aio]": "passed",
            "t.m::test_b[sqlite_aio]": "passed",
        },
    )
    assert compare.main(["results", str(path)]) == 1
    assert "test_a[sync-git] (reference: passed)" in capsys.readouterr().out


def test_a_failure_shared_with_sqlite_or_a_pass_does_not(compare, tmp_path):
    path = _xml(
        tmp_path,
        {
            "t.m::test_a[git_aes]": "failed",
            "t.m::test_a[sqlite_aes]": "failed",
            "t.m::test_b[git]": "passed",
            "t.m::test_c": "failed",
        },
    )
    assert compare.main(["results", str(path)]) == 0


def test_no_test_of_ours_or_an_unmatched_failure_fails(compare, tmp_path):
    assert compare.main(["results", str(_xml(tmp_path, {"t.m::test_c": "passed"}))]) == 1
    assert compare.main(["results", str(_xml(tmp_path, {"t.m::test_a[git]": "failed"}))]) == 1


def test_our_conftest_defines_every_fixture_langgraph_defines(compare, tmp_path):
    theirs = tmp_path / "conftest.py"
    theirs.write_text(
        "import pytest\n@pytest.fixture(params=[1])\ndef sync_checkpointer(request): ...\n"
        "@pytest.fixture\nasync def brand_new(): ...\n"
    )
    ours = SCRIPTS / "upstream_conftest.py"
    assert compare.main(["fixtures", str(theirs), str(ours)]) == 1
    theirs.write_text("import pytest\n@pytest.fixture\ndef durability(): ...\n")
    assert compare.main(["fixtures", str(theirs), str(ours)]) == 0
