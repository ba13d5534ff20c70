"""A note into a flat notes directory decodes none of its notes, and its directory is read
from memory when this handle wrote it (issue 13: the substrate write flat in history size).

At 10k notes a note's ``ab/`` is a flat directory of ~40 notes: the write keeps it raw
(only a split or a flattening decodes its notes), and the ``ab/`` this handle's own last
write into it built is kept by id, so the write that comes back to it (~256 writes later)
reads no object from the object database. The trees must stay the ones main's algorithm
(``notes_fanout_reference.py``, frozen) and ``git notes add`` make: compared on random
notes trees, hostile ones included, at every write.
"""

from __future__ import annotations

import importlib.util
import itertools
import random
import re
from pathlib import Path
from types import ModuleType

import pytest

from got_core import ReasoningRepo
from got_core.errors import CorruptRepositoryError
from got_core.repo.notes import publish_notes
from got_core.storage import notes_fanout, packs
from got_core.storage.git import GitRepo
from got_core.storage.git._staging import NOTES_TREES_MAX_BYTES, ReadTrees
from got_core.storage.packs import build_tree_objects, object_id

REF = "refs/notes/got"
HEX = "0123456789abcdef"


def reference() -> ModuleType:
    path = Path(__file__).with_name("notes_fanout_reference.py")
    spec = importlib.util.spec_from_file_location("notes_fanout_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAIN = reference()


class Store:
    """An object store in memory: trees by id (notes blobs are only named, never read)."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[str, bytes]] = {}

    def read(self, oid: str) -> tuple[str, bytes]:
        try:
            return self.objects[oid]
        except KeyError:
            raise CorruptRepositoryError(f"object {oid} is missing") from None

    def tree(self, entries: dict[str, str]) -> str:
        """A tree of ``entries`` (name -> id; an id of a stored tree is a directory)."""
        rows = []
        for name, oid in entries.items():
            is_dir = oid in self.objects
            rows.append((name + "/" if is_dir else name, (b"40000 " if is_dir else b"100644 ") + name.encode()))
            rows[-1] = (rows[-1][0], rows[-1][1] + b"\0" + bytes.fromhex(oid))
        data = b"".join(entry for _key, entry in sorted(rows))
        oid = object_id("tree", data)
        self.objects[oid] = ("tree", data)
        return oid

    def apply(self, base: str | None, changes: dict[str, str | None]) -> str | None:
        root, objects = build_tree_objects(self.read, base, changes)
        for kind, data in objects:
            self.objects[object_id(kind, data)] = (kind, data)
        return root


def rand_hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(HEX) for _ in range(n))


def hostile_base(store: Store, rng: random.Random, width: int) -> tuple[str, list[str]]:
    """A notes tree git could have written or a hostile tool made: a flat note at the root, a
    directory split too early (``ab/cd/…`` of a few notes: git flattens it at its next write),
    notes spelled flat beside the subtree of their digits, a note held twice (two spellings),
    names that are not notes (three digits, too long, not hex) and a flat directory of notes
    only. Returns it and the ids of its notes."""
    blob = rand_hex(rng, 40)
    keys: list[str] = []

    def note(prefix: str) -> str:
        k = prefix + rand_hex(rng, width - len(prefix))
        keys.append(k)
        return k

    early = {}
    for sub in ("cd", "ce"):
        early[sub] = store.tree({note("ab" + sub)[4:]: blob for _ in range(2)})
    ab = store.tree({**early, **{note("abc")[2:]: blob for _ in range(3)}})
    dup = note("12")
    twelve = store.tree({dup[2:]: blob, note("12")[2:]: blob, "zz" + "0" * (width - 4): blob})
    flat = store.tree({note("77")[2:]: blob for _ in range(rng.randrange(1, 40))})
    odd = store.tree({rand_hex(rng, width - 3): blob})
    root = {"ab": ab, "12": twelve, "77": flat, "9ab": odd, dup: blob, note(""): blob, "f" * (width + 1): blob}
    for d in HEX:
        if d not in "17a9":
            prefix = d + rng.choice(HEX)
            root[prefix] = store.tree({note(prefix)[2:]: blob for _ in range(rng.randrange(1, 4))})
    return store.tree(root), keys


def steps(rng: random.Random, known: list[str], width: int) -> list[dict[str, str]]:
    """Batches of 1-3 notes: new ids crowded under a few prefixes (so directories reach the
    split at one level and two), replacements of notes already there, now and then a new id anywhere."""
    crowded = ["ab", "abcd", "77", "12", rand_hex(rng, 2), rand_hex(rng, 4)]
    out = []
    for _ in range(160):
        batch = {}
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            roll = rng.random()
            if roll < 0.15 and known:
                k = rng.choice(known)
            elif roll < 0.25:
                k = rand_hex(rng, width)
            else:
                prefix = rng.choice(crowded)
                k = prefix + rand_hex(rng, width - len(prefix))
            batch[k] = rand_hex(rng, 40)
            known.append(k)
        out.append(batch)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_changes_are_main_algorithms_on_random_notes_trees(seed: int) -> None:
    """At every write (160 batches a seed, into a fresh tree and into a hostile one, ids of 40
    and 64 digits) the changes are exactly those of main's algorithm: directories that stay
    flat, split (one level and two) or are flattened, notes replaced, names left alone."""
    rng = random.Random(seed)
    width = 64 if seed % 3 == 2 else 40
    store = Store()
    hostile, keys = hostile_base(store, rng, width)
    splits = 0
    for base, known in ((None, []), (hostile, keys)):
        for batch in steps(rng, known, width):
            expected = MAIN.fanout_changes(store.read, base, batch)
            assert notes_fanout.fanout_changes(store.read, base, batch) == expected, (seed, batch)
            splits += sum(1 for path in expected if path.count("/") >= 2)
            base = store.apply(base, expected)
    assert splits, "no directory split: the comparison missed the split path"


def test_a_damaged_directory_raises_as_before() -> None:
    """A notes directory that is a blob, or is missing, raises the typed error either way."""
    store = Store()
    rng = random.Random(1)
    blob = rand_hex(rng, 40)
    store.objects[blob] = ("blob", b"x\n")
    spread = {d + "0": store.tree({rand_hex(rng, 38): blob}) for d in HEX}
    not_a_tree = store.tree({**spread, "ab": blob})  # a directory entry naming a blob
    gone = store.tree({rand_hex(rng, 38): blob})
    missing = store.tree({**spread, "ab": gone})
    del store.objects[gone]
    for base in (not_a_tree, missing):
        for module in (MAIN, notes_fanout):
            with pytest.raises(CorruptRepositoryError):
                module.fanout_changes(store.read, base, {"ab" + rand_hex(rng, 38): blob})


def joins_per_write(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = notes_fanout._join

    def counting(path: str, name: str) -> str:
        calls[0] += 1
        return real(path, name)

    monkeypatch.setattr(notes_fanout, "_join", counting)
    return calls


def fanned_repo(tmp_path: Path, dirs: int, per_dir: int, seed: int) -> tuple[ReasoningRepo, random.Random, list[str]]:
    repo = ReasoningRepo.init(tmp_path / "r.git")
    rng = random.Random(seed)
    prefixes = sorted({rand_hex(rng, 2) for _ in range(dirs * 4)})[:dirs]
    notes = {p + rand_hex(rng, 38): b"base\n" for p in prefixes for _ in range(per_dir)}
    notes |= {d + "0" + rand_hex(rng, 38): b"spread\n" for d in HEX}  # the root is a directory of directories
    publish_notes(repo, REF, notes)
    return repo, rng, prefixes


def test_a_note_into_a_flat_directory_decodes_none_of_its_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note into a flat directory of 28 notes (~40 at 10k notes in all; under 32 it cannot
    split) computes no path but its own: main decoded and joined every note of it."""
    repo, rng, prefixes = fanned_repo(tmp_path, 4, 28, 3)
    calls = joins_per_write(monkeypatch)
    per_write = []
    for i in range(8):
        calls[0] = 0
        publish_notes(repo, REF, {prefixes[i % 4] + rand_hex(rng, 38): b"new\n"})
        per_write.append(calls[0])
    assert max(per_write) <= 4, per_write
    listed = repo.notes()
    assert len(listed) == 4 * 28 + 16 + 8


def test_a_directory_this_handle_wrote_is_not_read_from_the_object_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes go round 64 flat directories, four times: from the second round on, each
    directory a write goes to is the one this handle's last write into it built, read from
    memory; main read most of them back from the object database (libgit2 inflates and hashes
    each), as the objects of the last flushes no longer held them."""
    repo, rng, prefixes = fanned_repo(tmp_path, 64, 20, 5)
    reads: list[str] = []
    real = GitRepo._odb_read

    def counting(self: GitRepo, oid: str) -> object:
        reads.append(oid)
        return real(self, oid)

    for _ in range(64):  # the first round reads each directory once
        publish_notes(repo, REF, {rng.choice(prefixes) + rand_hex(rng, 38): b"warm\n"})
    for p in prefixes:
        publish_notes(repo, REF, {p + rand_hex(rng, 38): b"first\n"})
    monkeypatch.setattr(GitRepo, "_odb_read", counting)
    for round_ in range(3):
        for p in prefixes:
            publish_notes(repo, REF, {p + rand_hex(rng, 38): f"round {round_}\n".encode()})
    assert reads == [], len(reads)
    assert len(repo.notes()) == 64 * 20 + 16 + 64 + 64 * 4


def test_the_notes_directories_kept_are_bounded_and_a_hit_leaves() -> None:
    """The cache of notes directories holds at most its bytes, least recently kept out first;
    a tree read from it moves to the few trees read lately (the write replaces it)."""
    trees = ReadTrees()
    size = 64 << 10
    for i in range(2 * NOTES_TREES_MAX_BYTES // size):
        trees.keep_notes(f"{i:040x}", bytes([i % 256]) * size)
    assert trees.notes_bytes <= NOTES_TREES_MAX_BYTES
    assert trees.notes_bytes == sum(map(len, trees.notes.values()))
    assert f"{0:040x}" not in trees.notes
    last = f"{2 * NOTES_TREES_MAX_BYTES // size - 1:040x}"
    assert trees.get(last) == ("tree", bytes([(2 * NOTES_TREES_MAX_BYTES // size - 1) % 256]) * size)
    assert last not in trees.notes and last in trees.recent
    assert trees.get(f"{0:040x}") is None


def test_only_notes_directories_are_kept() -> None:
    """What the next write looks for in memory is kept only when it is a directory of the
    root, a notes directory taken whole (notes only, or fan-out directories only) and of at
    least 1 KiB: a tree of another shape, a small one, one not in memory is not."""
    store = Store()
    rng = random.Random(9)
    blob = rand_hex(rng, 40)
    good = store.tree({rand_hex(rng, 38): blob for _ in range(20)})
    mixed = store.tree({**{rand_hex(rng, 38): blob for _ in range(20)}, "readme": blob})
    small = store.tree({rand_hex(rng, 38): blob})
    gone = store.tree({rand_hex(rng, 38): blob for _ in range(21)})
    spread = {f"{i:02x}": small for i in range(0, 256, 5)}
    root = store.tree({**spread, "ab": good, "cd": mixed, "ef": gone, "00": small})
    memory = dict(store.objects)
    del memory[gone]
    kept: dict[str, bytes] = {}
    notes_fanout.keep_written_dirs(memory.get, root, {"ab", "cd", "ef", "00", "77"}, 40, kept.__setitem__)
    assert kept == {good: store.read(good)[1]}
    small_root = store.tree({"ab": good, "cd": small})  # a root under 1 KiB: a few notes, nothing kept
    notes_fanout.keep_written_dirs(store.objects.get, small_root, {"ab"}, 40, kept.__setitem__)
    assert list(kept) == [good]
    assert notes_fanout.written_dirs(["ab/cd/ef", "ab/12", "cd/34", "99" * 20]) == {"ab", "cd"}


def regex_uniform(data: bytes) -> tuple[bytes, int, list[bytes]] | None:
    """main's scan of a uniform tree (one regular expression over every entry): the reference."""
    mode = next((m for m in (b"100644", b"40000") if data.startswith(m + b" ")), None)
    if mode is None:
        return None
    head = len(mode) + 1
    width = data.find(b"\0", head) - head
    stride = head + width + 21
    if width <= 0 or len(data) % stride:
        return None
    names = re.compile(re.escape(mode) + rb" ([^\x00/]{%d})\x00[\s\S]{20}" % width).findall(data)
    if len(names) * stride != len(data) or any(a >= b for a, b in itertools.pairwise(names)):
        return None
    return mode, width, names


def test_the_uniform_scan_agrees_with_mains_on_random_and_damaged_trees() -> None:
    """Trees of one mode and one name width (notes directories, notes roots) and every way of
    not being one: another mode, a name too short or long, a NUL or '/' in a name, names out of
    order or twice, a byte too many or too few, an id holding NULs. The scan (columns checked,
    names cut by struct, also past its one-format limit) answers what main's regex did."""
    rng = random.Random(17)
    checked = 0
    for _ in range(2000):
        mode = rng.choice((b"100644", b"40000"))
        width = rng.choice((2, 38, 62, 3))
        count = rng.choice((1, 2, 5, 40, 256, packs._UNPACK_MAX + 3)) if rng.random() < 0.97 else 0
        names = sorted({rng.randbytes(width).hex()[:width].encode() for _ in range(count)})
        ids = [rng.randbytes(20).replace(b"\x05", b"\0").replace(b"\x06", b"/") for _ in names]
        entries = [mode + b" " + n + b"\0" + i for n, i in zip(names, ids, strict=True)]
        damage = rng.randrange(9)
        if entries and damage == 1:
            at = rng.randrange(len(entries))
            entries[at] = rng.choice((b"100755", b"40000", b"100644", b"160000")) + entries[at][len(mode) :]
        elif entries and damage == 2:
            at = rng.randrange(len(entries))
            name = entries[at][len(mode) + 1 : len(mode) + 1 + width]
            pos = rng.randrange(width)
            bad = name[:pos] + rng.choice((b"/", b"\0", b"g", b"A")) + name[pos + 1 :]
            entries[at] = entries[at].replace(name, bad, 1)
        elif len(entries) > 1 and damage == 3:
            i, j = rng.sample(range(len(entries)), 2)
            entries[i], entries[j] = entries[j], entries[i]
        elif entries and damage == 4:
            entries.insert(rng.randrange(len(entries)), entries[rng.randrange(len(entries))])
        elif entries and damage == 5:
            at = rng.randrange(len(entries))
            name = entries[at][len(mode) + 1 : len(mode) + 1 + width]
            entries[at] = entries[at].replace(
                name, name + rng.choice((b"a", b"")) if rng.random() < 0.5 else name[:-1], 1
            )
        data = b"".join(entries)
        if damage == 6 and data:
            data = data[:-1] if rng.random() < 0.5 else data + b"\0"
        expected = regex_uniform(data)
        assert packs._uniform_tree_names(data) == expected, (damage, data[:80])
        checked += expected is not None
    assert 300 < checked < 2000
