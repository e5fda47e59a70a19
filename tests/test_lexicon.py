"""The lexicon: every named word list keeps exactly its words, the calendar helpers and the
date parsers read and write English names, and the module stays the lowest layer."""

from __future__ import annotations

import ast
import hashlib
import sys
from datetime import date, datetime
from pathlib import Path

import pytest
from bm25s.stopwords import STOPWORDS_EN

from qemem import lexicon
from qemem.errors import InputError
from qemem.lexicon import (
    BM25_STOPWORDS,
    FUNCTION_WORDS,
    LOCOMO_ARTICLES,
    MONTH_NUMBERS,
    MONTHS,
    NUMBER_WORDS,
    NUMERAL_WORDS,
    OFFLINE_MATCH_STOPWORDS,
    OFFLINE_PLAN_STOPWORDS,
    SEASON_START,
    SEASONS,
    TITLE_STOPWORDS,
    WEEKDAYS,
    day_phrase,
    month_number,
    month_range,
    parse_datetime,
    season_range,
    shift_month,
)


def digest(words: frozenset[str]) -> str:
    return hashlib.sha256(" ".join(sorted(words)).encode()).hexdigest()[:16]


# Size and content digest of each stage's list: a changed word moves that stage's figures, so
# a change here must be deliberate (and measured).
@pytest.mark.parametrize(
    ("words", "size", "sha"),
    [
        (BM25_STOPWORDS, 33, "aa94909badcb7b77"),
        (FUNCTION_WORDS, 115, "d1773dbeec2a1fa9"),
        (TITLE_STOPWORDS, 75, "7fa59948154f8195"),
        (OFFLINE_PLAN_STOPWORDS, 55, "a9c15a1fe591d79a"),
        (OFFLINE_MATCH_STOPWORDS, 43, "8a924b0f8d56c0c1"),
        (NUMERAL_WORDS, 43, "062b66affaf11d1b"),
    ],
    ids=["bm25", "function", "title", "offline-plan", "offline-match", "numerals"],
)
def test_word_lists_keep_their_words(words: frozenset[str], size: int, sha: str) -> None:
    assert len(words) == size
    assert digest(words) == sha


def test_bm25_stopwords_are_the_bm25s_english_list() -> None:
    assert frozenset(STOPWORDS_EN) == BM25_STOPWORDS


def test_lists_differ_where_their_stages_do() -> None:
    assert "not" in BM25_STOPWORDS and "not" in FUNCTION_WORDS
    assert "going" in TITLE_STOPWORDS and "going" not in FUNCTION_WORDS
    assert "question" in OFFLINE_MATCH_STOPWORDS and "likely" in OFFLINE_PLAN_STOPWORDS
    assert LOCOMO_ARTICLES == ("a", "an", "the", "and")


def test_calendar_names_and_numbers() -> None:
    assert MONTHS[0] == "January" and MONTHS[-1] == "December" and len(MONTHS) == 12
    assert WEEKDAYS == (
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    )
    assert len(NUMBER_WORDS) == 21 and NUMBER_WORDS[12] == "twelve" and NUMBER_WORDS[20] == "twenty"
    assert set(NUMBER_WORDS) < NUMERAL_WORDS and {"dozen", "tenth", "billion"} < NUMERAL_WORDS
    assert SEASONS == ("spring", "summer", "autumn", "fall", "winter")
    assert len(MONTH_NUMBERS) == 23  # "may" is both a name and an abbreviation


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("May", False, 5),
        ("SEPTEMBER", False, 9),
        ("sep", False, 9),
        ("Sept", False, None),
        ("Sept", True, 9),
        ("Mai", False, None),
        ("Ma", True, None),
        ("Tues", True, None),
    ],
)
def test_month_number(name: str, prefix: bool, expected: int | None) -> None:
    assert month_number(name, prefix=prefix) == expected


def test_prefix_lookup_reads_every_word_strptime_did() -> None:
    for word in ("jan", "FEBRUARY", "mAr", "aprx", "Junk", "julY", "augur", "Sept", "ſep", "dec"):
        expected = datetime.strptime(word[:3].title(), "%b").month
        assert month_number(word, prefix=True) == expected


def test_ranges() -> None:
    assert shift_month(date(2023, 12, 31), 2) == (2024, 2)
    assert shift_month(date(2023, 1, 5), -1) == (2022, 12)
    assert month_range(2024, 2) == (date(2024, 2, 1), date(2024, 2, 29))
    assert month_range(2023, 12) == (date(2023, 12, 1), date(2023, 12, 31))
    assert season_range("Winter", 2022) == (date(2022, 12, 1), date(2023, 2, 28))
    assert season_range("fall", 2023) == season_range("autumn", 2023)
    assert season_range("summer", 2023) == (date(2023, 6, 1), date(2023, 8, 31))
    assert set(SEASON_START) == set(SEASONS)


def test_day_phrase_is_english_without_leading_zero() -> None:
    assert day_phrase(date(2023, 5, 7)) == "7 May 2023"
    assert day_phrase(datetime(2024, 3, 14, 19, 15)) == "14 March 2024"


def test_parse_datetime_reads_month_words_by_their_first_letters() -> None:
    assert parse_datetime("1:56 pm on 8 Sept, 2023") == datetime(2023, 9, 8, 13, 56)
    with pytest.raises(InputError, match="names no month"):
        parse_datetime("1:56 pm on 8 Mai, 2023")


def test_lexicon_imports_only_the_standard_library_and_errors() -> None:
    tree = ast.parse(Path(lexicon.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    outside = {
        name
        for name in imported
        if name and name.split(".")[0] not in sys.stdlib_module_names and name != "qemem.errors"
    }
    assert outside == set()
