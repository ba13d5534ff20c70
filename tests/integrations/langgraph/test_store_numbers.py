"""Numbers a store value holds come back exactly, whichever path answers.

orjson (LangGraph's JSON library, which the store uses to read values fast) reads an integer
beyond 64 bits as a float without an error: ``2**70 + 1`` came back as ``1.1805916207174113e21``
from every read the derived index answered. Python's own JSON reads it exactly, as it wrote it.
"""

from __future__ import annotations

from gitcli import git

from got_integrations.langgraph import GitStore

VALUE = {
    "big": 2**70 + 1,
    "negative": -(2**65) - 3,
    "u64": 2**64 - 1,
    "i64": 2**63 - 1,
    "pi": 3.141592653589793,
    "nested": [{"n": 10**30 + 7}],
    "text": "1234567890123456789012 is a string",
}


def test_integers_beyond_64_bits_read_back_exactly_from_every_path(tmp_path):
    path = tmp_path / "n.git"
    store = GitStore.from_path(path)
    store.put(("users", "u1"), "k", VALUE, index=False)
    item = store.get(("users", "u1"), "k")  # the rows this process holds of its own write
    assert item is not None and item.value == VALUE
    assert isinstance(item.value["big"], int)
    hits = store.search(("users",))  # the index file's rows
    assert [h.value for h in hits] == [VALUE]
    store.close()

    fresh = GitStore.from_path(path)  # a new handle: the index file's rows, written before
    again = fresh.get(("users", "u1"), "k")
    assert again is not None and again.value == VALUE
    assert type(again.value["nested"][0]["n"]) is int
    listed = fresh.search(("users", "u1"), filter={"big": 2**70 + 1})
    assert [h.key for h in listed] == ["k"]
    fresh.close()
    # and the item file in git holds the digits as written
    text = git(path, "show", f"{git(path, 'rev-parse', 'refs/got/store').strip()}:" + _item_path(path)).strip()
    assert str(2**70 + 1) in text


def _item_path(path) -> str:
    files = git(path, "ls-tree", "-r", "--name-only", "refs/got/store").split()
    (item,) = [f for f in files if f.endswith("/k.json")]
    return item
