"""Ref names are libgit2's decision, compared here with the real ``git check-ref-format``.

Under ``refs/`` the two agree on every name of the table (and on random ones). They
differ on one-level names: libgit2 accepts all-capitals names (``HEAD``, ``MY_REF``) and
a bare ``@``, which git refuses; :func:`check_ref_name` demands ``refs/``, so it refuses
them too. pygit2 cuts a name at NUL before libgit2 sees it, so NUL is refused first.
"""

from __future__ import annotations

import subprocess

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from got_core.errors import InvalidNameError
from got_core.storage.git import is_valid_ref_name
from got_core.storage.refnames import MAX_REF_BYTES, branch_ref, check_ref_name, tag_ref

TRICKY = [
    "refs/heads/main",
    "refs/heads/a/b",
    "refs/heads",
    "refs/heads/@",
    "refs/heads/a@b",
    "refs/heads/a@",
    "refs/heads/{@",
    "refs/heads/-a",
    "refs/heads/HEAD",
    "refs/heads/lock",
    "refs/heads/a.lock.b",
    "refs/heads/a{b",
    "refs/heads/a}b",
    "refs/heads/é",
    "refs/heads/日本",
    "refs/heads/a\u200cb",
    "refs/heads/\u00a0",
    "refs/heads/a,b",
    'refs/heads/a"b',
    "refs/heads/a<b",
    "refs/heads/a|b",
    "refs/heads/a%2Eb",
    "refs/tags/v1.0",
    "refs/notes/got",
    "refs/heads/" + "x" * 255,
    # refused by both
    "refs/",
    "refs/heads/.hidden",
    "refs/heads/a.lock",
    "refs/heads/a.lock/b",
    "refs/heads/.lock",
    "refs/heads/a..b",
    "refs/heads/a.",
    "refs/heads/a/b.",
    "refs/heads/a/",
    "refs//heads/a",
    "refs/heads/a//b",
    "refs/heads/a@{b",
    "refs/heads/@{",
    "refs/heads/a b",
    "refs/heads/a\tb",
    "refs/heads/a~b",
    "refs/heads/a^b",
    "refs/heads/a:b",
    "refs/heads/a?b",
    "refs/heads/a*b",
    "refs/heads/a[b",
    "refs/heads/a\\b",
    "refs/heads/a\x7fb",
    "refs/heads/a\x01b",
    "refs/heads/.",
    "refs/heads/..",
    "refs/heads/a/.b",
    "refs/heads/a/./b",
    "refs/heads/a/../b",
]


def git_accepts(name: str) -> bool:
    return subprocess.run(["git", "check-ref-format", name], capture_output=True).returncode == 0


def accepted(name: str) -> bool:
    try:
        return check_ref_name(name) == name
    except InvalidNameError:
        return False


@pytest.mark.parametrize("name", TRICKY)
def test_check_ref_name_agrees_with_git_under_refs(name):
    assert accepted(name) == git_accepts(name) == is_valid_ref_name(name)


@given(st.lists(st.sampled_from([*"ab./@{}-~^:?*[\\ \x7f\x01é", "..", ".lock", "@{", "//"]), max_size=10))
@settings(max_examples=150, deadline=None)
def test_random_names_under_refs_agree_with_git(pieces):
    name = "refs/heads/" + "".join(pieces)
    assert accepted(name) == git_accepts(name)


@pytest.mark.parametrize("name", ["HEAD", "FETCH_HEAD", "MY_REF", "@"])
def test_one_level_names_libgit2_accepts_and_git_refuses_are_refused(name):
    assert is_valid_ref_name(name) and not git_accepts(name)  # the documented difference
    with pytest.raises(InvalidNameError, match="not under 'refs/'"):
        check_ref_name(name)


@pytest.mark.parametrize("name", ["foo", "a/b", "heads/main", "Refs/heads/a"])
def test_names_outside_refs_are_refused_even_where_git_accepts_them(name):
    with pytest.raises(InvalidNameError, match="not under 'refs/'"):
        check_ref_name(name)


def test_nul_is_refused_although_pygit2_would_cut_the_name_there():
    name = "refs/heads/a\x00b"
    assert pygit2.reference_is_valid_name(name)  # judged as "refs/heads/a"
    assert not is_valid_ref_name(name)
    with pytest.raises(InvalidNameError, match="control characters"):
        check_ref_name(name)


@pytest.mark.parametrize(
    "name, rule",
    [
        ("refs/heads/a..b", "'..'"),
        ("refs/heads/a@{1}", "'@{'"),
        ("refs/heads/x.lock", "ends with '.lock'"),
        ("refs/heads/.x", "starts with '.'"),
        ("refs/heads/a b", "spaces"),
        ("refs/heads/a/", "trailing '/'"),
        ("refs/heads/" + "x" * 256, "component longer than 255"),
        ("refs/heads/" + "a/" * 600 + "b", f"longer than {MAX_REF_BYTES} bytes"),
    ],
)
def test_the_message_names_the_broken_rule(name, rule):
    with pytest.raises(InvalidNameError, match="not a valid git name") as err:
        check_ref_name(name)
    assert rule in str(err.value)


def test_shorthands_still_map_to_full_refs():
    assert branch_ref("alice/draft") == "refs/heads/alice/draft"
    assert branch_ref("heads/memory") == "refs/heads/memory"
    assert tag_ref("v1.0") == "refs/tags/v1.0"
    for bad in ("HEAD", "@", "-x", "a..b"):
        with pytest.raises(InvalidNameError):
            branch_ref(bad)


def test_the_old_import_path_still_works_with_a_deprecation_warning():
    import got_core.names as names
    from got_core.storage.refnames import branch_ref

    with pytest.warns(DeprecationWarning, match="got_core.storage.refnames"):
        old = names.branch_ref
    assert old is branch_ref
