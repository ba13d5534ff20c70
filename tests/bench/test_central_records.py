"""What the driver writes to central reaches a central URL too (issue 18 §4).

Tasks push their results to the URL themselves; the driver's own records — the ingest
record of each memory store, the online streams' logs, the pre-registration — and the
results of the online streams (solved by the driver) are written in ``RUN_DIR/central.git``
and pushed from there with git's compare-and-swap (fast-forwards only, never forced). The
servers are real: ``git daemon`` and ``git http-backend``, started by the fixtures.
"""

from __future__ import annotations

import shutil

import pytest
from gitcli import fsck_clean, git
from gitserver import make_bare

from got_core.bench import protocols as P
from got_core.bench.runner import CENTRAL_REFS, INGEST_PREFIX, ModelSpec, follow_central, open_central
from got_core.errors import ConfigError, PushRejectedError

STANDIN = ModelSpec(
    "http://127.0.0.1:0/v1", "got-standin", max_tokens=64, parallel_nodes=False, standin={"responder": "bench"}
)
RULE = """\
title: self-consistency beats greedy
decision_rule:
  arm: self_consistency
  require: ci_above_zero
validity:
  - {check: empty_predictions, max: 0}
"""


def _opts(out, data_dir, **kw):
    base = {
        "out": out,
        "spec": STANDIN,
        "math_path": data_dir / "math500_sample.jsonl",
        "gpqa_path": data_dir / "gpqa_sample.csv",
        "workers": 1,
        "progress": False,
        "bootstrap": 300,
    }
    return P.ExperimentOptions(**{**base, **kw})


def run_refs(gitdir) -> dict[str, str]:
    """The run's refs (results, lessons, notes, records) in a repository, read with git."""
    out = git(gitdir, "for-each-ref", "--format=%(refname) %(objectname)").split("\n")
    pairs = (line.split() for line in out if line)
    return {ref: oid for ref, oid in pairs if ref.startswith(CENTRAL_REFS)}


def test_ingest_records_and_online_streams_reach_a_central_url(tmp_path, data_dir, git_daemon):
    served = make_bare(git_daemon.base)
    url = git_daemon.url("central.git")
    out = tmp_path / "run"
    opts = _opts(out, data_dir, k_study=2, m_test=4, backends=("git", "markdown"), memory_mode="online", central=url)
    result = P.five_substrates(opts)
    there = run_refs(served)
    assert run_refs(out / "central.git") == there  # the driver's copy and the URL agree on everything
    assert {r for r in there if r.startswith(INGEST_PREFIX)} == {INGEST_PREFIX + "none"}
    assert {r for r in there if r.startswith("refs/got/online/")} == {
        "refs/got/online/git",
        "refs/got/online/markdown",
    }
    results = {r for r in there if r.startswith("refs/got/results/")}
    assert len(results) == len(result.records)  # the streams' results too, which no task pushed
    assert fsck_clean(served)[0]
    # Lose the driver's copy: the resumed run takes the records back from the URL, ingests
    # nothing again and moves none of them (a re-ingest would be a new root commit, refused).
    shutil.rmtree(out / "central.git")
    again = P.five_substrates(
        _opts(
            out,
            data_dir,
            k_study=2,
            m_test=4,
            backends=("git", "markdown"),
            memory_mode="online",
            central=url,
            resume=True,
        )
    )
    assert run_refs(served) == there
    assert sorted(r["result_sha"] for r in again.records) == sorted(r["result_sha"] for r in result.records)


def test_a_pre_registration_reaches_a_central_url_over_http(tmp_path, data_dir, http_git):
    served = make_bare(http_git.base)
    url = http_git.url("central.git")
    rule = tmp_path / "prereg.yaml"
    rule.write_text(RULE)
    out = tmp_path / "run"
    P.test_time_arms(_opts(out, data_dir, m_test=3, arms=("self_consistency",), prereg=rule, central=url))
    prereg = git(served, "rev-parse", "refs/got/prereg").strip()
    with open_central(out) as local:
        assert local.tip("refs/got/prereg") == prereg
    assert "prereg.json" in git(served, "ls-tree", "--name-only", "refs/got/prereg")
    assert any("git-receive-pack" in r for r in http_git.requests)


def test_a_record_the_url_holds_otherwise_is_refused_never_forced(tmp_path, git_daemon):
    served = make_bare(git_daemon.base)
    url = git_daemon.url("central.git")
    a, b = tmp_path / "a", tmp_path / "b"
    for run_dir, text in ((a, "one\n"), (b, "two\n")):
        with open_central(run_dir) as local:
            local.commit_files(INGEST_PREFIX + "git", {"state.json": text}, "ingest git\n", parents=[])
    follow_central(a, url)
    first = git(served, "rev-parse", INGEST_PREFIX + "git").strip()
    with pytest.raises(PushRejectedError, match="fast-forward"):
        follow_central(b, url)
    assert git(served, "rev-parse", INGEST_PREFIX + "git").strip() == first
    with pytest.raises(ConfigError, match="URL"):
        follow_central(a, str(served))
