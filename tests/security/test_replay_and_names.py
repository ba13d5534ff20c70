"""Hostile trees, refs and arguments against the substrate: replay, the derived index, the public API.

Hostile objects are written with raw pygit2 object writes (``odb.write``), which, unlike
our writer and libgit2's TreeBuilder, take any name: exactly what a peer, a bundle or
another tool can put into a repository. Real ``git`` then checks what happened.
"""

from __future__ import annotations

import inspect
import os
import stat
import subprocess
from pathlib import Path

import pygit2
import pytest
from gitcli import fsck_clean, git

from got_core import (
    CorruptRepositoryError,
    GotError,
    GotUserError,
    Identity,
    InvalidInputError,
    InvalidNameError,
    Node,
    PayloadTooLargeError,
    ReasoningRepo,
)
from got_core.cli import main

BLOB, EXEC, TREE, LINK, GITLINK = 0o100644, 0o100755, 0o040000, 0o120000, 0o160000


# ---------------------------------------------------------------------------- raw object writes
def raw_tree(r: pygit2.Repository, entries: list[tuple[int, bytes, pygit2.Oid]]) -> pygit2.Oid:
    """A tree object holding exactly ``entries`` (mode, raw name, oid): no name is checked."""

    def order(e):
        return e[1] + (b"/" if e[0] == TREE else b"")

    data = b"".join(
        f"{mode:o}".encode() + b" " + name + b"\0" + oid.raw for mode, name, oid in sorted(entries, key=order)
    )
    return r.odb.write(pygit2.GIT_OBJECT_TREE, data)


def raw_path_tree(r: pygit2.Repository, files: dict[bytes, tuple[int, pygit2.Oid]]) -> pygit2.Oid:
    """A tree from raw ``/``-separated paths (components unchecked) -> (mode, oid)."""
    here: dict[bytes, tuple[int, pygit2.Oid]] = {}
    sub: dict[bytes, dict[bytes, tuple[int, pygit2.Oid]]] = {}
    for path, entry in files.items():
        head, sep, rest = path.partition(b"/")
        if sep:
            sub.setdefault(head, {})[rest] = entry
        else:
            here[head] = entry
    entries = [(mode, name, oid) for name, (mode, oid) in here.items()]
    entries += [(TREE, name, raw_path_tree(r, inner)) for name, inner in sub.items()]
    return raw_tree(r, entries)


def raw_commit(
    r: pygit2.Repository,
    tree: pygit2.Oid,
    ref: str,
    message: str = "evil commit\n",
    parents: list[pygit2.Oid] | None = None,
) -> str:
    sig = pygit2.Signature("Mallory", "mallory@example.org", 1_700_000_000, 0)
    oid = r.create_commit(None, sig, sig, message, tree, parents or [])
    r.references.create(ref, oid, force=True)
    return str(oid)


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    return env


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def repo(tmp_path):
    r = ReasoningRepo.init(tmp_path / "victim.git", identity=Identity("Victim", "victim@example.org"))
    r.commit_node(
        Node(
            "Use the quadratic formula on x^2 - 5x + 6.",
            scores={"s_comb": 0.8},
            problem_id="p1",
            outcome="success",
            node_id="root-1",
        )
    )
    return r


@pytest.fixture
def raw(repo):
    return pygit2.Repository(str(repo.gitdir))


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------------------- item 1: replay
DOTGIT_SPELLINGS = [
    b".git",
    b".GIT",
    b".Git",
    b"git~1",
    b"GIT~1",
    b".git.",
    b".git ",
    b".git::$INDEX_ALLOCATION",
    ".g\u200cit".encode(),
    "\ufeff.git".encode(),
]


@pytest.mark.parametrize("dotgit", DOTGIT_SPELLINGS, ids=lambda b: b.decode("utf-8", "backslashreplace"))
def test_replayed_dotgit_config_never_plants_fsmonitor(repo, raw, tmp_path, dotgit, capsys):
    target = tmp_path / "worktree"
    subprocess.run(["git", "init", "-q", str(target)], check=True, env=git_env())
    config_before = (target / ".git" / "config").read_bytes()
    sentinel = tmp_path / "PWNED"
    evil_config = (
        f'[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = "touch {sentinel}; false"\n'
    ).encode()
    tree = raw_path_tree(
        raw,
        {
            dotgit + b"/config": (BLOB, raw.create_blob(evil_config)),
            b"thought.md": (BLOB, raw.create_blob(b"harmless")),
        },
    )
    raw_commit(raw, tree, "refs/remotes/peer/evil")

    try:
        repo.materialize("refs/remotes/peer/evil", target)
        refused: Exception | None = None
    except InvalidNameError as exc:
        refused = exc
    code, _out, err = cli(capsys, "replay", "refs/remotes/peer/evil", target, "-r", repo.gitdir)

    subprocess.run(["git", "status"], cwd=target, capture_output=True, env=git_env())
    assert not sentinel.exists()  # no code ran
    assert refused is not None and "config" in str(refused) and "git" in str(refused).lower()
    assert code == 2 and "config" in err
    assert (target / ".git" / "config").read_bytes() == config_before
    assert [p for p in os.listdir(target) if p != ".git"] == []  # nothing written
    assert fsck_clean(target / ".git")[0]


def test_refusal_names_the_path(repo, raw, tmp_path):
    tree = raw_path_tree(raw, {b"notes/.GIT/hooks/post-checkout": (BLOB, raw.create_blob(b"#!/bin/sh\n"))})
    raw_commit(raw, tree, "refs/remotes/peer/evil")
    from got_core import UnsafePathError

    with pytest.raises(UnsafePathError) as info:
        repo.materialize("refs/remotes/peer/evil", tmp_path / "out")
    assert info.value.path == "notes/.GIT/hooks/post-checkout"
    assert isinstance(info.value, GotUserError)


HOSTILE_NAMES = [  # (one raw entry name at the root) or (a raw path, split at "/")
    ("entry", b".."),
    ("entry", b"."),
    ("entry", b"/abs"),
    ("entry", b"../escape"),
    ("entry", b"a\\..\\b"),
    ("entry", b"\xff\xfe-latin1"),
    ("entry", b"\xed\xb3\xbf"),
    ("entry", b"x" * 256),
    ("entry", "é".encode() * 128),
    ("path", b"a/../../escape"),
    ("path", b"ok/" + (b"d" * 200 + b"/") * 21 + b"deep"),
]


@pytest.mark.parametrize("how,bad", HOSTILE_NAMES, ids=lambda v: repr(v[:24]) if isinstance(v, bytes) else v)
def test_hostile_names_refuse_the_whole_replay(repo, raw, tmp_path, how, bad):
    """A tree with one bad entry writes nothing at all, inside or outside the target."""
    payload = raw.create_blob(b"escaped")
    fine = [(BLOB, b"a_first.md", raw.create_blob(b"first")), (BLOB, b"z_last.md", raw.create_blob(b"last"))]
    if how == "entry":
        tree = raw_tree(raw, [*fine, (BLOB, bad, payload)])
    else:
        tree = raw_path_tree(raw, {**{n: (m, o) for m, n, o in fine}, bad: (BLOB, payload)})
    raw_commit(raw, tree, "refs/remotes/peer/evil")
    target = tmp_path / "w1" / "w2" / "out"
    with pytest.raises(InvalidNameError):
        repo.materialize("refs/remotes/peer/evil", target)
    assert listing(tmp_path / "w1") == []  # not even the target directory was made
    assert not (tmp_path / "escape").exists() and not (tmp_path / "w1" / "escape").exists()


@pytest.mark.parametrize("kind", ["symlink", "gitlink"])
def test_links_are_refused_by_default_and_can_be_skipped(repo, raw, tmp_path, kind, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("do not read")
    if kind == "symlink":
        entry = (LINK, raw.create_blob(str(outside).encode()))
    else:
        entry = (GITLINK, pygit2.Oid(hex="1" * 40))
    tree = raw_path_tree(
        raw,
        {
            b"thought.md": (BLOB, raw.create_blob(b"a thought")),
            b"dir/link": entry,
            b"dir/note.md": (BLOB, raw.create_blob(b"a note")),
        },
    )
    raw_commit(raw, tree, "refs/remotes/peer/links")
    target = tmp_path / "out"
    with pytest.raises(InvalidNameError) as info:
        repo.materialize("refs/remotes/peer/links", target)
    assert "dir/link" in str(info.value)
    assert not target.exists()

    repo.materialize("refs/remotes/peer/links", target, links="skip")
    plan = repo.replay_plan("refs/remotes/peer/links", links="skip")
    assert [p for p, _ in plan.skipped] == ["dir/link"]
    code, out, _ = cli(capsys, "replay", "refs/remotes/peer/links", tmp_path / "cli", "--skip-links", "-r", repo.gitdir)
    assert code == 0 and "skipped dir/link" in out and listing(tmp_path / "cli") == listing(target)
    assert listing(target) == ["dir", "dir/note.md", "thought.md"]
    assert not any(p.is_symlink() for p in target.rglob("*"))
    assert (outside / "secret").read_text() == "do not read"


def test_links_already_in_the_target_are_never_written_through(repo, raw, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("original")
    tree = raw_path_tree(
        raw, {b"sub/x.md": (BLOB, raw.create_blob(b"payload")), b"thought.md": (BLOB, raw.create_blob(b"payload"))}
    )
    raw_commit(raw, tree, "refs/remotes/peer/plain")

    dir_link = tmp_path / "t1"
    dir_link.mkdir()
    (dir_link / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidNameError) as info:
        repo.materialize("refs/remotes/peer/plain", dir_link)
    assert "sub" in str(info.value)
    assert sorted(os.listdir(outside)) == ["victim"] and not (dir_link / "thought.md").exists()

    file_link = tmp_path / "t2"
    file_link.mkdir()
    (file_link / "thought.md").symlink_to(outside / "victim")
    with pytest.raises(InvalidNameError):
        repo.materialize("refs/remotes/peer/plain", file_link)
    assert (outside / "victim").read_text() == "original"

    hard = tmp_path / "t3"
    hard.mkdir()
    os.link(outside / "victim", hard / "thought.md")  # a hard link is replaced, not written through
    repo.materialize("refs/remotes/peer/plain", hard)
    assert (hard / "thought.md").read_text() == "payload"
    assert (outside / "victim").read_text() == "original"


def test_replay_writes_plain_files_and_keeps_limits(repo, raw, tmp_path):
    tree = raw_path_tree(
        raw,
        {
            b"run.sh": (EXEC, raw.create_blob(b"#!/bin/sh\necho hi\n")),
            b"big.bin": (BLOB, raw.create_blob(b"\0" * 5000)),
        },
    )
    raw_commit(raw, tree, "refs/remotes/peer/exec")
    out = repo.materialize("refs/remotes/peer/exec", tmp_path / "out")
    assert not os.stat(out / "run.sh").st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    assert (out / "big.bin").read_bytes() == b"\0" * 5000

    with pytest.raises(PayloadTooLargeError):
        ReasoningRepo(repo.gitdir, max_file_bytes=1000).materialize("refs/remotes/peer/exec", tmp_path / "o2")
    with pytest.raises(PayloadTooLargeError):
        repo.materialize("refs/remotes/peer/exec", tmp_path / "o3", max_bytes=1000)
    with pytest.raises(InvalidInputError):
        repo.materialize("refs/remotes/peer/exec", tmp_path / "o4", max_files=1)
    assert not any((tmp_path / d).exists() for d in ("o2", "o3", "o4"))


def test_tree_bomb_is_stopped_by_the_file_limit(repo, raw, tmp_path):
    """Each level names the level below twice: 2**30 files from 31 tiny trees."""
    level = raw_tree(raw, [(BLOB, b"f", raw.create_blob(b"x"))])
    for _ in range(30):
        level = raw_tree(raw, [(TREE, b"a", level), (TREE, b"b", level)])
    raw_commit(raw, level, "refs/remotes/peer/bomb")
    with pytest.raises(InvalidInputError):
        repo.materialize("refs/remotes/peer/bomb", tmp_path / "out", max_files=500)
    assert not (tmp_path / "out").exists()


def test_replay_of_our_own_nodes_is_unchanged(repo, tmp_path):
    out = repo.materialize("master", tmp_path / "replay")
    assert sorted(os.listdir(out)) == ["metadata.json", "scores.json", "thought.md", "trace.jsonl"]
    again = repo.materialize("master", out)  # replaying over an earlier replay overwrites it
    assert (again / "thought.md").read_text().startswith("Use the quadratic")


# ---------------------------------------------------------------------------- item 2: names and the index
@pytest.mark.parametrize("name", ["x" * 256, "x" * 65_535, "x" * 65_536, "é" * 40_000, "x" * 70_000])
def test_over_long_components_are_refused_and_nothing_is_half_written(repo, name):
    tip = repo.tip("master")
    objects_before = set(git(repo.gitdir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split())
    with pytest.raises(InvalidNameError):
        repo.commit_files("master", {"a_fine.md": "kept?", f"dir/{name}": "dropped?"}, "too long")
    assert repo.tip("master") == tip
    objects_after = set(git(repo.gitdir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split())
    assert objects_after == objects_before  # not even the blobs
    assert fsck_clean(repo.gitdir)[0]
    assert [i.oid for i in repo.grep("quadratic")] == [tip]
    assert repo.resolve("root-1") == tip and repo.search("quadratic formula")[0].oid == tip


def _hostile_ref(raw: pygit2.Repository, repo: ReasoningRepo, kind: str) -> None:
    """Write one kind of hostile history under refs/remotes/peer/, as a fetch could bring it."""
    base = raw.revparse_single("master").id
    blob = raw.create_blob(b"evil payload text")
    if kind == "non-utf8-name":
        tree = raw_tree(raw, [(BLOB, b"\xff\xfe-latin1.md", blob)])
    elif kind == "encoded-surrogate-name":
        tree = raw_tree(raw, [(BLOB, b"\xed\xb3\xbf.md", blob)])
    elif kind == "gitlink":
        tree = raw_tree(raw, [(GITLINK, b"sub", pygit2.Oid(hex="1" * 40)), (BLOB, b"f.md", blob)])
    elif kind == "symlink":
        tree = raw_tree(raw, [(LINK, b"link", raw.create_blob(b"/etc/passwd")), (BLOB, b"f.md", blob)])
    elif kind == "binary-and-huge":
        tree = raw_tree(
            raw,
            [
                (BLOB, b"bin", raw.create_blob(bytes(range(256)) * 64)),
                (BLOB, b"huge.txt", raw.create_blob(b"evil payload text\n" * 120_000)),
                (BLOB, b"f.md", blob),
            ],
        )
    elif kind == "missing-blob":
        tree = raw_tree(raw, [(BLOB, b"gone.md", pygit2.Oid(hex="2" * 40)), (BLOB, b"f.md", blob)])
    elif kind == "dotgit-and-dotdot":
        inner = raw_tree(raw, [(BLOB, b"config", blob)])
        tree = raw_tree(raw, [(TREE, b".git", inner), (TREE, b"..", inner), (BLOB, b"a/b", blob)])
    elif kind == "missing-parent":
        tree = raw_tree(raw, [(BLOB, b"f.md", blob)])
        missing = raw.odb.write(
            pygit2.GIT_OBJECT_COMMIT,
            b"tree %s\nparent %s\nauthor M <m@x> 1 +0000\n"
            b"committer M <m@x> 1 +0000\n\nevil commit\n" % (str(tree).encode(), b"3" * 40),
        )
        raw.references.create("refs/remotes/peer/evil", missing, force=True)
        return
    elif kind == "bad-ref-name":
        tree = raw_tree(raw, [(BLOB, b"f.md", blob)])
        oid = raw_commit(raw, tree, "refs/remotes/peer/evil", parents=[base])
        subprocess.run(
            ["git", f"--git-dir={repo.gitdir}", "update-ref", b"refs/remotes/peer/\xff\xfe", oid],
            check=True,
            env=git_env(),
        )
        return
    elif kind == "junk-notes":
        tree = raw_tree(raw, [(BLOB, b"f.md", blob)])
        raw_commit(raw, tree, "refs/remotes/peer/evil", parents=[base])
        notes = raw_tree(
            raw,
            [
                (BLOB, b"\xff\xfe", blob),
                (GITLINK, b"1" * 40, pygit2.Oid(hex="1" * 40)),
                (BLOB, b"2" * 40, pygit2.Oid(hex="2" * 40)),
                (TREE, b"ab", raw_tree(raw, [(BLOB, b"c" * 38, raw.create_blob(b"\xff" * 10))])),
            ],
        )
        raw_commit(
            raw,
            notes,
            repo.notes_ref,
            "Notes added by 'git notes add'\n",
            parents=[raw.revparse_single(repo.notes_ref).id],
        )
        return
    else:  # pragma: no cover
        raise AssertionError(kind)
    raw_commit(raw, tree, "refs/remotes/peer/evil", parents=[base])


HOSTILE_REFS = [
    "non-utf8-name",
    "encoded-surrogate-name",
    "gitlink",
    "symlink",
    "binary-and-huge",
    "missing-blob",
    "dotgit-and-dotdot",
    "missing-parent",
    "bad-ref-name",
    "junk-notes",
]


@pytest.mark.parametrize("kind", HOSTILE_REFS)
def test_index_survives_any_fetched_ref(repo, raw, kind):
    tip = repo.tip("master")
    assert [i.oid for i in repo.grep("quadratic")] == [tip]  # the index exists before the attack
    _hostile_ref(raw, repo, kind)
    for attempt in range(2):  # and stays usable: the second round reads the stored index
        assert [i.oid for i in repo.grep("quadratic")] == [tip]
        assert [i.oid for i in repo.grep("quadr", fixed=True)] == [tip]
        assert repo.search("quadratic formula")[0].oid == tip
        assert repo.search("quadratic formula")[0].node_id == "root-1"
        assert tip in [i.oid for i in repo.pickaxe("x^2 - 5x")]
        assert [i.oid for i in repo.log()] == [tip] and repo.log()[0].tags == ("success_root-1",)
        assert repo.resolve("root-1") == tip and repo.read_node("root-1").oid == tip
        assert [i.oid for i in repo.tagged("success_")] == [tip]
        repo.pickaxe("evil payload")  # whatever the hostile ref holds, answers are typed or fine
        if kind not in ("missing-parent",):
            evil = repo.tip("refs/remotes/peer/evil")
            assert evil in [i.oid for i in repo.grep("evil commit")]
            for call in (
                lambda: repo.files(evil),
                lambda: repo.list_dir(evil),
                lambda: repo.diff(tip, evil),
                lambda: repo.read_node(evil),
                lambda: repo.commit_info(evil),
            ):
                try:
                    call()
                except GotError:
                    pass
        if attempt == 0:
            repo.close()


def test_listings_show_only_names_the_api_can_use(repo, raw):
    _hostile_ref(raw, repo, "dotgit-and-dotdot")
    evil = repo.tip("refs/remotes/peer/evil")
    assert repo.list_files(evil) == {} and repo.list_dir(evil) == []
    _hostile_ref(raw, repo, "non-utf8-name")
    assert repo.files(repo.tip("refs/remotes/peer/evil")) == {}
    _hostile_ref(raw, repo, "symlink")
    linked = repo.tip("refs/remotes/peer/evil")
    # a link is data (its target's name, as `git show` prints it), never followed
    assert repo.files(linked) == {"f.md": b"evil payload text", "link": b"/etc/passwd"}
    assert git(repo.gitdir, "show", f"{linked}:link") == "/etc/passwd"
    with pytest.raises(InvalidNameError):
        repo.read_file(evil, ".git/config")


# ---------------------------------------------------------------------------- item 9: hostile arguments
@pytest.mark.parametrize("pattern", ["(", "[", "a{2,1}", "(?P<", "\\", "*x", "(?<=a+)b"])
def test_invalid_regex_is_a_user_error(repo, pattern, capsys):
    with pytest.raises(InvalidInputError) as info:
        repo.grep(pattern)
    assert "regular expression" in str(info.value) and "fixed" in str(info.value)
    assert repo.grep(pattern, fixed=True) == []
    code, _out, err = cli(capsys, "grep", pattern, "-r", repo.gitdir)
    assert code == 2 and "regular expression" in err


def test_long_literals_are_matched_exactly(repo):
    """Long needles only narrow the index lookup by a prefix; every hit is still confirmed in full."""
    head = "lorem ipsum dolor sit amet " * 4
    hit = repo.commit_files("long", {"doc.md": head + "TAIL-ONE"}, head + "TAIL-ONE\n")
    repo.commit_files("long", {"doc.md": head + "TAIL-TWO"}, head + "TAIL-TWO\n")
    assert [i.oid for i in repo.grep(head + "TAIL-ONE", fixed=True)] == [hit]
    assert [i.oid for i in repo.grep(head + "TAIL-ONE")] == [hit]
    assert repo.grep(head + "TAIL-THREE", fixed=True) == []
    assert {i.oid for i in repo.pickaxe(head + "TAIL-ONE")} == {repo.tip("long"), hit}  # added, then removed
    assert repo.pickaxe("x" * 70_000) == [] and repo.grep("y" * 70_000) == []


@pytest.mark.parametrize("path", ["\udcff.md", "dir/\ud800", "\udcff\udcfe"])
def test_lone_surrogates_in_paths_are_invalid_names(repo, path):
    tip = repo.tip("master")
    with pytest.raises(InvalidNameError):
        repo.commit_files("master", {path: "x"}, "m")
    for call in (
        lambda: repo.read_file(tip, path),
        lambda: repo.files(tip, path),
        lambda: repo.list_files(tip, path),
        lambda: repo.list_dir(tip, path),
        lambda: repo.diff(tip, tip, path),
    ):
        with pytest.raises(InvalidNameError):
            call()
    assert repo.tip("master") == tip


def test_bytes_arguments_round_trip_or_are_refused(repo):
    """Names given as UTF-8 bytes mean that text; ids and paths must be text (a typed error otherwise)."""
    tip = repo.tip("master")
    assert repo.tip(b"master") == tip
    oid = repo.commit_files(b"memory", {"lesson.md": b"bytes content is stored as is"}, b"a lesson\n")
    assert repo.tip("memory") == oid and repo.branches()["memory"] == oid
    assert repo.read_file(oid, "lesson.md") == b"bytes content is stored as is"
    for call in (
        lambda: repo.commit_files("memory", {b"f.md": "x"}, "m"),
        lambda: repo.read_file(oid, b"lesson.md"),
        lambda: repo.commit_node(Node("t", node_id=b"id")),
        lambda: repo.commit_node(Node("t", problem_id=b"p")),
        lambda: repo.tip(b"\xff\xfe"),
    ):
        with pytest.raises(InvalidNameError):
            call()
    assert repo.tip("memory") == oid and fsck_clean(repo.gitdir)[0]


ODD_IDS = ["a/b", "a%2Fb", "x y", "../../etc/passwd", "ünï/cødé", "-rf", "100%", "tab\tnl\n", "emoji🙂"]


def test_percent_encoded_node_ids_round_trip(repo):
    nodes = {
        i: repo.commit_node(
            Node(
                f"thought for {i!r} about ellipses", problem_id=i, node_id=i, outcome="success", scores={"s_comb": 0.5}
            )
        )
        for i in ODD_IDS
    }
    for given, stored in nodes.items():
        assert stored.node_id == given
        back = repo.read_node(given)
        assert back.oid == stored.oid and back.node_id == given and back.problem_id == given
        assert repo.resolve(given) == stored.oid
        assert repo.resolve(stored.tags[0]) == stored.oid
    hits = {h.oid: h for h in repo.search("ellipses", k=20)}
    assert {hits[n.oid].node_id for n in nodes.values()} == set(ODD_IDS)
    assert {hits[n.oid].problem_id for n in nodes.values()} == set(ODD_IDS)
    assert fsck_clean(repo.gitdir)[0]


@pytest.mark.parametrize(
    "field,value",
    [
        ("node_id", b"bytes-id"),
        ("node_id", 5),
        ("problem_id", b"p"),
        ("problem_id", None),
        ("outcome", 1),
        ("node_id", "\ud800"),
        ("depth", "1"),
        ("depth", None),
        ("metadata", None),
        ("scores", None),
        ("trace", None),
        ("trace", "not a list"),
        ("thought", None),
        ("node_id", "x" * 500),
    ],
)
def test_hostile_node_fields_are_typed_errors(repo, field, value):
    tip = repo.tip("master")
    node = Node("a fine thought", problem_id="p")
    setattr(node, field, value)
    with pytest.raises(GotUserError):
        repo.commit_node(node)
    assert repo.tip("master") == tip


@pytest.mark.parametrize(
    "meta", [b"[]", b'{"depth": "deep"}', b'{"depth": [1]}', b'{"problem_id": 7}', b'{"node_id": {"a": 1}}']
)
def test_nodes_of_the_wrong_shape_read_as_corrupt(repo, meta):
    oid = repo.commit_files("odd", {"thought.md": "t", "metadata.json": meta}, "odd node\n")
    with pytest.raises(CorruptRepositoryError):
        repo.read_node(oid)


def test_repository_text_never_drives_the_terminal(repo, capsys):
    evil = "title \x1b]0;owned\x07 \x1b[2J\r\u202eoverride"
    n = repo.commit_node(Node(evil, problem_id="p1"))
    for args in (("show", n.oid), ("log", "--full"), ("grep", "title", "--full")):  # --full: nothing cut short
        code, out, _ = cli(capsys, *args, "-r", repo.gitdir)
        assert code == 0 and "\x1b" not in out and "\r" not in out and "\u202e" not in out, args
        assert "\\x1b" in out


HOSTILE_VALUES = [
    None,
    b"\xff\xfe",
    b"master",
    "\udcff",
    "\ud800",
    "a\x00b",
    "x" * 70_000,
    12,
    -1,
    3.5,
    True,
    [],
    {},
    [1, 2],
    {"a": 1},
    object(),
    "",
    "..",
    "../../etc",
    "-x",
    "[",
    "(",
    ".git/config",
    "refs/heads/../x",
    "HEAD~99999",
]
# Not worth a call with hostile arguments: lifecycle and whole-repository maintenance.
NO_ARGS = {"close", "attempts", "open", "init", "fsck", "maintenance", "reindex"}


def test_every_public_method_raises_only_got_errors(repo, tmp_path, monkeypatch):
    """Each parameter of each public ReasoningRepo method, in turn, gets each hostile value."""
    cwd = tmp_path / "c1" / "c2" / "c3"  # relative paths ("..", "-x") land in here
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    tip = repo.tip("master")
    good = {
        "rev": tip,
        "target": tip,
        "ref": "memory",
        "name": "t1",
        "path": "thought.md",
        "oid": tip,
        "pattern": "quadratic",
        "needle": "quadratic",
        "query": "quadratic",
        "a": tip,
        "b": tip,
        "changes": {"f.md": "x"},
        "message": "m",
        "node": Node("x"),
        "outcome": "success",
        "content": "{}",
        "notes": {tip: "{}"},
        "directory": str(tmp_path / "out"),
        "source": str(tmp_path / "none"),
        "dest": str(tmp_path / "none2"),
        "theirs": "master",
        "prefix": "",
        "base": "master",
        "tip": "master",
    }
    raw_errors = []
    methods = [
        (n, f)
        for n, f in inspect.getmembers(ReasoningRepo, inspect.isfunction)
        if not n.startswith("_") and n not in NO_ARGS
    ]
    assert len(methods) > 30
    for name, fn in methods:
        params = [
            p
            for p in list(inspect.signature(fn).parameters.values())[1:]
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        for param in params:
            for value in HOSTILE_VALUES:
                kwargs = {q.name: good.get(q.name, "x") for q in params if q.default is inspect.Parameter.empty}
                kwargs[param.name] = value
                try:
                    getattr(repo, name)(**kwargs)
                except GotError:
                    pass
                except Exception as exc:
                    raw_errors.append(f"{name}({param.name}={value!r:.20}): {type(exc).__name__}: {exc}"[:200])
    assert raw_errors == []
    assert repo.tip("master") == tip and repo.read_node("root-1").oid == tip
    assert fsck_clean(repo.gitdir)[0]
