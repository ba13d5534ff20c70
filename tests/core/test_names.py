"""Hostile names are encoded or rejected, never passed raw into refs or paths."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from got_core.errors import InvalidNameError
from got_core.names import decode_component, encode_component
from got_core.storage.refnames import branch_ref, check_ref_name, tag_ref


@given(st.text(min_size=1, max_size=40))
@settings(max_examples=300, deadline=None)
def test_encode_roundtrip_property(name):
    try:
        enc = encode_component(name)
    except InvalidNameError:
        return  # lone surrogates or too long: refused, which is allowed
    assert decode_component(enc) == name
    check_ref_name("refs/heads/t/" + enc)


@pytest.mark.parametrize("bad", ["", "x" * 10_000, "\udcff"])
def test_unusable_names_are_refused(bad):
    with pytest.raises(InvalidNameError):
        encode_component(bad)


@pytest.mark.parametrize("bad", ["a..b", "-x", "a b", "x.lock", "a//b", "@", "a@{1}", "refs/heads/.x", "tab\t"])
def test_branch_names_follow_git_rules(bad):
    with pytest.raises(InvalidNameError):
        branch_ref(bad)


def test_good_branch_and_tag_names():
    assert branch_ref("memory") == "refs/heads/memory"
    assert branch_ref("alice/draft") == "refs/heads/alice/draft"
    assert tag_ref("success_ab12") == "refs/tags/success_ab12"
    with pytest.raises(InvalidNameError):
        tag_ref("-oops")
