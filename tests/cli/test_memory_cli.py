"""`got memory` list / search / add / stats on real backends."""

from __future__ import annotations

import json

import pytest

from got_core.cli import main


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("backend", ["git", "markdown", "graph"])
def test_add_search_list_stats(tmp_path, capsys, backend):
    path = str(tmp_path / "mem")
    for text, outcome in [
        ("Check units before dividing distances by times.", "insight"),
        ("Draw the triangle and mark the right angle first.", "success"),
        ("Multiplying distance by time gives nonsense units.", "failure"),
    ]:
        code, out, _ = run(capsys, "memory", "add", text, "--outcome", outcome, "-b", backend, "-p", path)
        assert code == 0 and "stored under topic" in out
    code, out, _ = run(capsys, "memory", "search", "triangle angle", "-k", "1", "--json", "-b", backend, "-p", path)
    hits = json.loads(out)
    assert code == 0 and len(hits) == 1 and "triangle" in hits[0]["text"]
    code, out, _ = run(capsys, "memory", "list", "--json", "-b", backend, "-p", path)
    assert sorted(l["outcome"] for l in json.loads(out)) == ["failure", "insight", "success"]
    code, out, _ = run(capsys, "memory", "stats", "--json", "-b", backend, "-p", path)
    stats = json.loads(out)
    assert stats["backend"] == backend and stats["lessons"] == 3 and stats["storage_bytes"] > 0


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    code, _, err = run(capsys, "memory", "list", "-b", "sqlite-of-dreams", "-p", str(tmp_path / "m"))
    assert code == 2 and "unknown memory backend" in err
    code, _, err = run(capsys, "memory", "add", "   ", "-b", "git", "-p", str(tmp_path / "m"))
    assert code == 2 and "empty" in err
    code, _, err = run(capsys, "memory", "add", "fine", "--outcome", "maybe", "-b", "git", "-p", str(tmp_path / "m"))
    assert code == 2
