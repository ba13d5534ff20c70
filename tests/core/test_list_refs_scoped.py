"""``GitRepo.list_refs(prefix)`` reads only what lies under the prefix (issue 13, part 3).

Loose refs are read from the prefix's own directory, ``packed-refs`` is searched from the
prefix on; the answers are libgit2's full iteration's (the one used before) and the real
``git for-each-ref``'s, on a mix of packed, loose, shadowed, symbolic and peeled refs and
of prefixes that are whole directories, parts of a name, or nothing. Hostile entries (a
damaged loose ref, a name git refuses, a name that is not UTF-8, a link, an unsorted or
CRLF ``packed-refs``) give the same answers as before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from got_core import ReasoningRepo
from got_core.storage.git import GitRepo
from tests.gitcli import git

PREFIXES = [
    "refs/",
    "refs/heads/",
    "refs/heads/a",
    "refs/heads/a/",
    "refs/heads/b/",
    "refs/heads/b/c",
    "refs/tags/",
    "refs/tags/v",
    "refs/got/threads/t1/",
    "refs/got/threads/t1",
    "refs/got/threads/t10/ns/head",
    "refs/notes/",
    "refs/nothing/",
    "refs/heads/zzz",
]


def _mix(tmp_path: Path) -> Path:
    """A repository of packed, loose, shadowing, symbolic and annotated-tag refs."""
    path = tmp_path / "r.git"
    repo = ReasoningRepo.init(path)
    oids = [repo.commit_files("master", {"f.txt": f"v{i}\n"}, f"c{i}") for i in range(4)]
    repo.close()
    names = [
        "refs/heads/a",
        "refs/heads/ab",
        "refs/heads/b/c",
        "refs/heads/b/cd/e",
        "refs/got/threads/t1/ns/head",
        "refs/got/threads/t1/pending/x",
        "refs/got/threads/t10/ns/head",
        "refs/got/threads/t2/ns/head",
        "refs/tags/v1",
    ]
    for i, name in enumerate(names):
        git(path, "update-ref", name, oids[i % 4])
    env_tag = ["-c", "user.name=t", "-c", "user.email=t@x"]
    git(path, *env_tag, "tag", "-a", "-m", "annotated", "v2", oids[1])  # peeled line in packed-refs
    git(path, "pack-refs", "--all")
    git(path, "update-ref", "refs/heads/a", oids[3])  # a loose ref shadowing its packed line
    git(path, "update-ref", "refs/got/threads/t1/ns/head", oids[2])
    git(path, "update-ref", "refs/got/threads/t1/new", oids[0])  # loose only
    git(path, "update-ref", "-d", "refs/heads/b/cd/e")  # deleted from packed-refs
    git(path, "symbolic-ref", "refs/heads/sym", "refs/heads/a")  # symbolic: never listed
    git(path, "symbolic-ref", "refs/got/threads/t1/alias", "refs/heads/ab")
    (path / "refs" / "heads" / "ab.lock").write_text(oids[0] + "\n")  # a writer's lock: not a ref
    return path


def _for_each_ref(path: Path, prefix: str) -> dict[str, str]:
    out = {}
    for line in git(path, "for-each-ref", "--format=%(refname) %(objectname) %(symref)").splitlines():
        name, sha, *symref = line.split(" ")
        if name.startswith(prefix) and not any(symref):
            out[name] = sha
    return out


def _no_full_walk(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(prefix: str) -> dict[str, str]:
        raise AssertionError(f"list_refs({prefix!r}) walked every ref")

    monkeypatch.setattr(repo, "_list_refs_all", refuse)


def test_scoped_listing_answers_as_git_and_as_the_full_walk(tmp_path, monkeypatch):
    path = _mix(tmp_path)
    repo = GitRepo(path, create=False)
    before = {p: repo._list_refs_all(p) for p in PREFIXES}
    _no_full_walk(repo, monkeypatch)
    for prefix in PREFIXES:
        got = repo.list_refs(prefix)
        assert got == before[prefix] == _for_each_ref(path, prefix), prefix
    assert repo.list_refs("refs/got/threads/t1/") == {
        "refs/got/threads/t1/new": repo.direct_targets(["refs/got/threads/t1/new"])["refs/got/threads/t1/new"],
        "refs/got/threads/t1/ns/head": before["refs/"]["refs/got/threads/t1/ns/head"],
        "refs/got/threads/t1/pending/x": before["refs/"]["refs/got/threads/t1/pending/x"],
    }
    assert "refs/tags/v2" in repo.list_refs("refs/tags/"), "annotated tags are listed, not peeled"


def test_loose_refs_only_and_packed_refs_only(tmp_path, monkeypatch):
    path = _mix(tmp_path)
    git(path, "pack-refs", "--all")  # every ref packed, no loose one left (symbolic refs stay loose)
    repo = GitRepo(path, create=False)
    _no_full_walk(repo, monkeypatch)
    for prefix in PREFIXES:
        assert repo.list_refs(prefix) == _for_each_ref(path, prefix), prefix
    (path / "packed-refs").unlink()  # only the loose symbolic refs are left
    for prefix in PREFIXES:
        assert repo.list_refs(prefix) == {} == _for_each_ref(path, prefix), prefix


def _hostile(path: Path, kind: str) -> None:
    heads = path / "refs" / "heads"
    if kind == "damaged loose ref":
        (heads / "a").write_text("not a sha at all\n")  # libgit2 skips it, answering the packed line
    elif kind == "name git refuses":
        (heads / "bad..name").write_text(git(path, "rev-parse", "refs/heads/ab").strip() + "\n")
    elif kind == "name not utf-8":
        sha = git(path, "rev-parse", "refs/heads/ab").strip()
        fd = os.open(os.fsencode(heads) + b"/\xff\xfe", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, sha.encode() + b"\n")
        os.close(fd)
    elif kind == "symlink":
        os.symlink("ab.lock", heads / "link")
    elif kind == "linked directory":
        os.symlink("../got/threads", heads / "threads")
    elif kind == "unsorted packed-refs":
        packed = path / "packed-refs"
        lines = packed.read_text().splitlines()
        packed.write_text("# pack-refs with: peeled\n" + "\n".join(reversed(lines[1:])) + "\n")
    elif kind == "crlf packed-refs":
        packed = path / "packed-refs"
        packed.write_bytes(packed.read_bytes().replace(b"\n", b"\r\n"))
    elif kind == "uppercase sha":
        sha = git(path, "rev-parse", "refs/heads/ab").strip()
        (heads / "ab").write_text(sha.upper() + "\n")


@pytest.mark.parametrize(
    "kind",
    [
        "damaged loose ref",
        "name git refuses",
        "name not utf-8",
        "symlink",
        "linked directory",
        "unsorted packed-refs",
        "crlf packed-refs",
        "uppercase sha",
    ],
)
def test_hostile_refs_give_the_answers_libgit2_gave(tmp_path, kind):
    path = _mix(tmp_path)
    _hostile(path, kind)
    for prefix in PREFIXES:  # fresh handles each time: libgit2 keeps what it read of packed-refs
        try:
            before = GitRepo(path, create=False)._list_refs_all(prefix)
        except Exception as exc:  # libgit2 refuses the whole listing: so must we, the same way
            with pytest.raises(type(exc)):
                GitRepo(path, create=False).list_refs(prefix)
            continue
        assert GitRepo(path, create=False).list_refs(prefix) == before, (kind, prefix)


def test_a_large_packed_refs_gives_the_same_answers_for_narrow_and_broad_prefixes(tmp_path):
    path = _mix(tmp_path)
    sha = git(path, "rev-parse", "refs/heads/ab").strip()
    names = [f"refs/got/threads/x{t:04d}/ns/c{k}" for t in range(300) for k in range(10)]
    for name in names[:5]:
        git(path, "update-ref", name, sha)  # loose ones among them
    packed = path / "packed-refs"
    lines = packed.read_text().splitlines()[1:]
    records: dict[str, str] = {}
    peeled: dict[str, str] = {}
    last = ""
    for line in lines:
        if line.startswith("^"):
            peeled[last] = line
        else:
            last = line.split(" ", 1)[1]
            records[last] = line
    records.update({n: f"{sha} {n}" for n in names})
    body = "".join(records[n] + "\n" + (peeled[n] + "\n" if n in peeled else "") for n in sorted(records))
    packed.write_text("# pack-refs with: peeled fully-peeled sorted \n" + body)
    assert packed.stat().st_size > 1 << 16  # large enough for the broad-prefix rule
    repo = GitRepo(path, create=False)
    for prefix in [*PREFIXES, "refs/got/", "refs/got/threads/x0042/", "refs/got/threads/x01"]:
        assert repo.list_refs(prefix) == _for_each_ref(path, prefix) == repo._list_refs_all(prefix), prefix
