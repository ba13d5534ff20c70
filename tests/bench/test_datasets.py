"""Dataset loaders, option shuffling and stratified splits on the project-written samples."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from got_core.bench.datasets import (
    LETTERS,
    Problem,
    Split,
    audit_overlap,
    format_question,
    load_from_hub,
    load_gpqa,
    load_math500,
    normalize_question,
    stratified_split,
)
from got_core.errors import ConfigError, GotUserError, InvalidInputError

DATA = Path(__file__).resolve().parents[1] / "data"
MATH = DATA / "math500_sample.jsonl"
GPQA = DATA / "gpqa_sample.csv"


def _csv_rows() -> tuple[list[str], list[dict[str, str]]]:
    with GPQA.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _write_csv(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


# --- MATH-500 --------------------------------------------------------------------------------


def test_load_math500_sample_reads_every_field():
    problems = load_math500(MATH)
    assert len(problems) == 10
    raw = [json.loads(line) for line in MATH.read_text(encoding="utf-8").splitlines()]
    for p, r in zip(problems, raw):
        assert (p.id, p.question, p.answer, p.subject, p.level) == (
            r["unique_id"],
            r["problem"],
            r["answer"],
            r["subject"],
            r["level"],
        )
        assert p.kind == "math" and p.choices == [] and p.gold_letter is None
        assert p.domain == p.subject and p.meta["solution"] == r["solution"]
    assert {p.level for p in problems} == {1, 2, 3, 4, 5}
    assert len({p.subject for p in problems}) == 5


def test_load_math500_limit_and_level_strings(tmp_path):
    assert [p.id for p in load_math500(MATH, limit=3)] == [p.id for p in load_math500(MATH)[:3]]
    row = {
        "problem": "1+1?",
        "solution": "",
        "answer": "2",
        "subject": "Prealgebra",
        "level": "Level 2",
        "unique_id": "x/1.json",
    }
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(row) + "\n\n", encoding="utf-8")
    assert load_math500(path)[0].level == 2


@pytest.mark.parametrize(
    "bad_line, expect",
    [
        ("{not json", "not valid JSON"),
        ('{"problem": "p", "answer": "1", "subject": "Algebra", "level": 1}', "unique_id"),
        ('{"problem": "p", "answer": "", "subject": "Algebra", "level": 1, "unique_id": "u"}', "answer"),
        ('{"problem": "p", "answer": "1", "subject": "Algebra", "level": 9, "unique_id": "u"}', "level"),
        ('["a list"]', "JSON object"),
    ],
)
def test_malformed_math_line_names_file_and_line(tmp_path, bad_line, expect):
    good = MATH.read_text(encoding="utf-8").splitlines()[:2]
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join([*good, bad_line]) + "\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=expect) as info:
        load_math500(path)
    assert "broken.jsonl" in str(info.value) and "line 3" in str(info.value)


def test_missing_file_and_duplicate_ids_are_user_errors(tmp_path):
    with pytest.raises(InvalidInputError, match="no such file"):
        load_math500(tmp_path / "absent.jsonl")
    line = MATH.read_text(encoding="utf-8").splitlines()[0]
    dup = tmp_path / "dup.jsonl"
    dup.write_text(line + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="duplicate problem id"):
        load_math500(dup)
    bad_utf8 = tmp_path / "latin1.jsonl"
    bad_utf8.write_bytes(line.encode() + b"\n" + b'{"problem": "caf\xe9"}\n')
    with pytest.raises(InvalidInputError, match="line 2.*UTF-8"):
        load_math500(bad_utf8)


# --- GPQA ------------------------------------------------------------------------------------


def test_load_gpqa_sample_shuffles_options_and_keeps_gold():
    _, rows = _csv_rows()
    problems = load_gpqa(GPQA, seed=0)
    assert len(problems) == 10
    for p, r in zip(problems, rows):
        assert p.kind == "mcq" and p.id == r["Record ID"] and p.level is None
        assert p.question == r["Question"].strip()
        assert sorted(p.choices) == sorted(
            r[c].strip() for c in ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
        )
        assert p.choices[LETTERS.index(p.gold_letter)] == r["Correct Answer"].strip() == p.answer
        assert (p.subject, p.domain) == (r["Subdomain"], r["High-level domain"])
        perm = p.meta["permutation"]
        assert sorted(perm) == [0, 1, 2, 3] and p.meta["shuffle_seed"] == 0
        originals = [r["Correct Answer"]] + [r[f"Incorrect Answer {i}"] for i in (1, 2, 3)]
        assert p.choices == [originals[i].strip() for i in perm]
    assert {p.domain for p in problems} == {"Physics", "Chemistry", "Biology"}
    # A shuffle that left the correct answer first would be no shuffle at all.
    assert len({p.gold_letter for p in problems}) > 1
    assert "\n" in problems[2].question  # the quoted two-line question survived


def test_gpqa_shuffle_is_deterministic_per_seed_and_record_not_row_order(tmp_path):
    header, rows = _csv_rows()
    first = load_gpqa(GPQA, seed=3)
    again = load_gpqa(GPQA, seed=3)
    assert [p.choices for p in first] == [p.choices for p in again]
    reversed_file = _write_csv(tmp_path / "rev.csv", header, rows[::-1])
    by_id = {p.id: p for p in load_gpqa(reversed_file, seed=3)}
    assert all(by_id[p.id].choices == p.choices for p in first)
    other = load_gpqa(GPQA, seed=4)
    assert [p.meta["permutation"] for p in other] != [p.meta["permutation"] for p in first]


def test_gpqa_without_optional_columns_uses_content_hash_and_subdomain(tmp_path):
    _header, rows = _csv_rows()
    keep = ["Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3", "Subdomain"]
    path = _write_csv(tmp_path / "bare.csv", keep, [{k: r[k] for k in keep} for r in rows])
    problems = load_gpqa(path, limit=4)
    assert len(problems) == 4
    assert all(p.id.startswith("gpqa-") and p.domain == p.subject for p in problems)
    assert [p.id for p in problems] == [p.id for p in load_gpqa(path, limit=4)]


def test_gpqa_missing_column_is_reported_with_file(tmp_path):
    header, rows = _csv_rows()
    header = [h for h in header if h != "Incorrect Answer 3"]
    path = _write_csv(tmp_path / "cols.csv", header, [{k: r[k] for k in header} for r in rows])
    with pytest.raises(InvalidInputError, match=r"cols\.csv, line 1.*Incorrect Answer 3"):
        load_gpqa(path)


def test_gpqa_empty_cell_names_file_and_line(tmp_path):
    header, rows = _csv_rows()
    rows[4]["Correct Answer"] = "   "
    path = _write_csv(tmp_path / "cell.csv", header, rows)
    # Row 3 spans two physical lines, so the fifth record starts on line 7.
    with pytest.raises(InvalidInputError, match=r"cell\.csv, line 7.*Correct Answer"):
        load_gpqa(path)


def test_gpqa_extra_cells_and_duplicate_options_are_rejected(tmp_path):
    header, rows = _csv_rows()
    text = io.StringIO()
    csv.writer(text).writerows([header, [rows[0][h] for h in header] + ["stray"]])
    path = tmp_path / "extra.csv"
    path.write_text(text.getvalue(), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="line 2.*more cells"):
        load_gpqa(path)
    rows[0]["Incorrect Answer 2"] = rows[0]["Correct Answer"]
    with pytest.raises(InvalidInputError, match="identical"):
        load_gpqa(_write_csv(tmp_path / "same.csv", header, rows))


def test_format_question_lists_options_in_display_order():
    p = load_gpqa(GPQA)[0]
    text = format_question(p)
    assert text.startswith(p.question)
    for letter, choice in zip(LETTERS, p.choices):
        assert f"({letter}) {choice}" in text
    m = load_math500(MATH)[0]
    assert format_question(m) == m.question


# --- hub guard (never reaches the network) ---------------------------------------------------


def test_load_from_hub_refuses_when_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="offline"):
        load_from_hub("math500")
    with pytest.raises(GotUserError, match="offline"):
        load_math500(None)


def test_load_from_hub_rejects_unknown_names():
    with pytest.raises(ConfigError, match="unknown data set"):
        load_from_hub("imagenet")


# --- splits ----------------------------------------------------------------------------------


def _pool() -> list[Problem]:
    return load_gpqa(GPQA) + load_math500(MATH)


def test_stratified_split_is_disjoint_stratified_and_deterministic():
    pool = _pool()
    split = stratified_split(pool, n_study=8, n_test=10, seed=1)
    assert len(split.study) == 8 and len(split.test) == 10
    assert audit_overlap(split) == 0
    assert not {p.id for p in split.study} & {p.id for p in split.test}
    # Every stratum is represented in proportion to its size (largest remainder).
    test_domains = Counter(p.domain for p in split.test)
    assert set(test_domains) == {p.domain for p in pool}
    assert sum(split.strata[g][1] for g in split.strata) == 10
    for g, (n_s, n_t) in split.strata.items():
        assert Counter(p.domain for p in split.study)[g] == n_s and test_domains[g] == n_t
    again = stratified_split(list(reversed(pool)), n_study=8, n_test=10, seed=1)
    assert [p.id for p in again.study] == [p.id for p in split.study]
    assert [p.id for p in again.test] == [p.id for p in split.test]
    other = stratified_split(pool, n_study=8, n_test=10, seed=2)
    assert [p.id for p in other.test] != [p.id for p in split.test]


def test_stratified_split_drops_text_duplicates_and_checks_sizes():
    pool = _pool()
    twin = replace(pool[0], id="twin-of-first", question="  " + pool[0].question.upper() + " ")
    split = stratified_split([*pool, twin], n_study=10, n_test=10, seed=0)
    assert split.dropped == [max(pool[0].id, "twin-of-first")]
    assert audit_overlap(split) == 0
    with pytest.raises(InvalidInputError, match="distinct problems"):
        stratified_split([*pool, twin], n_study=11, n_test=10, seed=0)
    with pytest.raises(InvalidInputError, match="duplicate problem id"):
        stratified_split([*pool, pool[0]], n_study=1, n_test=1, seed=0)
    with pytest.raises(InvalidInputError):
        stratified_split(pool, n_study=-1, n_test=1, seed=0)
    with pytest.raises(InvalidInputError, match="stratify"):
        stratified_split(pool, n_study=1, n_test=1, seed=0, key="colour")


def test_audit_overlap_counts_id_and_text_collisions():
    pool = _pool()
    same_text = replace(pool[1], id="other-id", question=pool[1].question.replace(" ", "  ").lower())
    leaked = Split(study=pool[:5], test=[pool[0], same_text, pool[7]], seed=0)
    assert audit_overlap(leaked) == 2
    assert normalize_question("What is $x$?") == normalize_question("what is x")
