"""Table-driven tests of the deterministic quote check (qemem.evidence.quotes)."""

from __future__ import annotations

from typing import Any

import pytest

from qemem.evidence.quotes import (
    DEFAULT_THRESHOLD,
    best_quote_match,
    verbatim_evidence,
    verify_quote,
)

GROUP = "I went to a LGBTQ support group yesterday and it was so powerful."
POTTERY = (
    "Hey Mel! Good to see you! How have you been? I'm doing great - just got back from a "
    "pottery workshop with the kids on Saturday. We made our own plates!"
)
RUNNING = (
    "Thanks, Caroline! It’s been 3 years since I started running, and I finally ran a half "
    "marathon last Sunday."
)
NECKLACE = (
    "The transgender stories were so inspiring! I was so happy and thankful for all the "
    "support. My mom gave me this necklace when I was 18, it reminds me of my roots."
)
CAMPING = (
    "We're thinking of going camping in the mountains next month. Oliver loves the outdoors, "
    "and Luna can't wait to see the lake. We have two kids, so it's a big trip."
)
RECYCLE = (
    "That's awesome, Mel! We try to be green at home too. Do you recycle at all? I've been "
    "thinking of starting a compost bin."
)
MELANIE = "I painted that lake sunrise last year! It's special to me."
SPECIAL = (
    "Thanks, Caroline! I painted it after our trip to the lake. It's really special to me, "
    "and I think so much of it."
)

# (id, quote, source, expected verified)
CASES: list[tuple[str, str, str, bool]] = [
    # --- accepted: verbatim and lightly normalised spans ---
    ("verbatim-whole", GROUP, GROUP, True),
    ("verbatim-sub-span", "LGBTQ support group yesterday", GROUP, True),
    ("lower-case", "i went to a lgbtq support group yesterday", GROUP, True),
    (
        "punctuation-changed",
        "I went to a LGBTQ support group yesterday, and it was so powerful!",
        GROUP,
        True,
    ),
    ("wrapped-in-quotes", '"LGBTQ support group"', GROUP, True),
    ("extra-whitespace", "  support   group\nyesterday ", GROUP, True),
    ("straight-vs-curly-apostrophe", "It's been 3 years since I started running", RUNNING, True),
    ("curly-quotes-around", "“I finally ran a half marathon last Sunday”", RUNNING, True),
    ("apostrophe-dropped", "Its been 3 years since I started running", RUNNING, True),
    ("dropped-article", "I went to LGBTQ support group yesterday", GROUP, True),
    (
        "dropped-filler-just",
        "I'm doing great - got back from a pottery workshop with the kids",
        POTTERY,
        True,
    ),
    (
        "em-dash-for-hyphen",
        "I'm doing great — just got back from a pottery workshop",
        POTTERY,
        True,
    ),
    (
        "contraction-expanded",
        "I am doing great - just got back from a pottery workshop",
        POTTERY,
        True,
    ),
    ("contraction-cant-expanded", "Luna cannot wait to see the lake", CAMPING, True),
    (
        "ellipsis-dots",
        "I went to a LGBTQ support group yesterday ... it was so powerful",
        GROUP,
        True,
    ),
    ("ellipsis-char", "My mom gave me this necklace … it reminds me of my roots", NECKLACE, True),
    ("number-kept", "My mom gave me this necklace when I was 18", NECKLACE, True),
    ("speaker-name-kept", "Thanks, Caroline!", RUNNING, True),
    ("possessive-name", "Caroline's support", "I really value Caroline's support.", True),
    ("two-content-words", "yesterday and it was so powerful", GROUP, True),
    ("whole-short-source", "Glad!", "Glad!", True),
    ("it-is-vs-its", "It is special to me", "It's special to me.", True),
    (
        "its-vs-it-is",
        "it's special to me, my first real painting",
        "It is special to me, my first real painting.",
        True,
    ),
    (
        "apostrophes-dropped-lowercased",
        "im into the rush of awesome cars cant wait",
        "I'm into the rush of awesome cars, can't wait!",
        True,
    ),
    ("theyre-dropped", "Theyre a real support.", "Thanks, Caroline. They're a real support.", True),
    ("number-word-kept", "We have two kids", CAMPING, True),
    # --- accepted: a verbatim span of three words or more, one of them a content word ---
    ("verbatim-short-question", "Do you recycle at all?", RECYCLE, True),
    ("verbatim-short-contraction", "It's really special to me", SPECIAL, True),
    ("verbatim-short-lowercased", "its really special to me", SPECIAL, True),
    ("verbatim-one-content-word", "it was so powerful", GROUP, True),
    ("verbatim-three-words", "was so powerful", GROUP, True),
    # --- rejected: text from elsewhere ---
    ("other-text", "We made our own plates", GROUP, False),
    ("other-source-text", "I finally ran a half marathon", POTTERY, False),
    ("paraphrase", "I attended an LGBTQ support meeting yesterday", GROUP, False),
    ("invented-tail", GROUP + " I met my new mentor there and we talked for hours.", GROUP, False),
    (
        "ellipsis-second-part-foreign",
        "I went to a LGBTQ support group yesterday ... we made our own plates",
        GROUP,
        False,
    ),
    ("negation-inserted", "it was not so powerful", GROUP, False),
    # --- rejected: word-shuffled ---
    ("shuffled-clause", "so powerful it was", GROUP, False),
    (
        "shuffled-sentence",
        "yesterday I went to a support group LGBTQ and it was powerful so",
        GROUP,
        False,
    ),
    ("reversed", "powerful so was it and yesterday group support LGBTQ a to went I", GROUP, False),
    (
        "names-swapped",
        "Luna loves the outdoors, and Oliver can't wait to see the lake",
        CAMPING,
        False,
    ),
    # --- rejected: a number or a name changed ---
    ("digit-changed", "It's been 4 years since I started running", RUNNING, False),
    ("age-changed", "My mom gave me this necklace when I was 17", NECKLACE, False),
    ("number-word-changed", "We have three kids", CAMPING, False),
    ("name-changed-thanks", "Thanks, Melanie!", RUNNING, False),
    ("name-changed-subject", "Max loves the outdoors", CAMPING, False),
    ("weekday-name-changed", "I finally ran a half marathon last Saturday", RUNNING, False),
    # --- rejected: too short to be evidence ---
    ("single-word", "powerful", GROUP, False),
    ("single-common-word", "went", GROUP, False),
    ("verbatim-two-words", "so powerful", GROUP, False),
    ("function-words-and-it-was", "and it was", GROUP, False),
    ("function-words-it-is", "it is", SPECIAL, False),
    ("function-words-to-the", "to the", SPECIAL, False),
    ("function-words-and-i", "and I", SPECIAL, False),
    ("function-words-to-me-and-i", "to me, and I", SPECIAL, False),
    ("reply-formula", "I think so", SPECIAL, False),
    ("dropped-word-one-content-word", "it was powerful", GROUP, False),
    ("changed-word-short", "Do you recycle often?", RECYCLE, False),
    ("foreign-short", "Do you recycle at all?", GROUP, False),
    # --- rejected: a number found only outside the matched span ---
    (
        "number-elsewhere",
        "My mom gave me this necklace when I was 17",
        NECKLACE + " My sister turned 17 last week.",
        False,
    ),
    # --- degenerate input ---
    ("empty-quote", "", GROUP, False),
    ("punctuation-only-quote", "...", GROUP, False),
    ("empty-source", "it was so powerful", "", False),
]


@pytest.mark.parametrize(
    ("quote", "source", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_verify_quote_table(quote: str, source: str, expected: bool) -> None:
    check = verify_quote(quote, source)
    assert check.verified is expected, check
    assert 0.0 <= check.score <= 1.0


# (id, quote, source, options of verify_quote, expected verified)
OPTION_CASES: list[tuple[str, str, str, dict[str, Any], bool]] = [
    # the name swapped in for a pronoun is a paraphrase, not the speaker's words
    ("name-for-pronoun", "Melanie painted that lake sunrise last year", MELANIE, {}, False),
    (
        "name-for-pronoun-of-the-speaker",
        "Melanie painted that lake sunrise last year",
        MELANIE,
        {"speaker": "Melanie"},
        False,
    ),
    # the speaker's name is dropped only as a leading "Name:" prefix, and only the speaker's
    (
        "speaker-prefix",
        "Melanie: I painted that lake sunrise",
        MELANIE,
        {"speaker": "Melanie"},
        True,
    ),
    ("prefix-without-a-speaker", "Melanie: I painted that lake sunrise", MELANIE, {}, False),
    ("default-threshold", "I went to LGBTQ support group yesterday", GROUP, {}, True),
    ("threshold-one", "I went to LGBTQ support group yesterday", GROUP, {"threshold": 1.0}, False),
    # without the verbatim rule, the content-word floor alone decides (the rule before)
    ("verbatim-rule-on", "Do you recycle at all?", RECYCLE, {}, True),
    ("verbatim-rule-off", "Do you recycle at all?", RECYCLE, {"min_verbatim_words": None}, False),
]


@pytest.mark.parametrize(
    ("quote", "source", "options", "expected"),
    [c[1:] for c in OPTION_CASES],
    ids=[c[0] for c in OPTION_CASES],
)
def test_verify_quote_options_table(
    quote: str, source: str, options: dict[str, Any], expected: bool
) -> None:
    assert verify_quote(quote, source, **options).verified is expected


# (id, quote, sources, speakers, expected source, expected verified)
MATCH_CASES: list[tuple[str, str, dict[str, str], dict[str, str], str, bool]] = [
    (
        "picks-the-verifying-source",
        "yesterday and it was so powerful",
        {"D1:2": POTTERY, "D1:3": GROUP, "D2:1": RUNNING},
        {},
        "D1:3",
        True,
    ),
    ("unverified-best-source", "We went sailing in Hawaii", {"D1:3": GROUP}, {}, "D1:3", False),
    (
        "strips-each-sources-speaker",
        "Melanie: that lake sunrise",
        {"D1:1": "We made our own plates.", "D1:2": MELANIE},
        {"D1:1": "Caroline", "D1:2": "Melanie"},
        "D1:2",
        True,
    ),
    (
        "short-verbatim-through-the-speaker-prefix",
        "Melanie: It's really special to me",
        {"D1:1": GROUP, "D1:2": SPECIAL},
        {"D1:2": "Melanie"},
        "D1:2",
        True,
    ),
]


@pytest.mark.parametrize(
    ("quote", "sources", "speakers", "source_id", "verified"),
    [c[1:] for c in MATCH_CASES],
    ids=[c[0] for c in MATCH_CASES],
)
def test_best_quote_match_table(
    quote: str, sources: dict[str, str], speakers: dict[str, str], source_id: str, verified: bool
) -> None:
    found, check = best_quote_match(quote, sources, speakers=speakers)
    assert (found, check.verified) == (source_id, verified)


RECYCLE_WORDS = "do you recycle at all".split()
# (id, the quote's runs of words, source words, min_words (None: the default), expected)
VERBATIM_CASES: list[tuple[str, list[list[str]], list[str], int | None, bool]] = [
    ("contiguous-with-a-content-word", [["do", "you", "recycle"]], RECYCLE_WORDS, None, True),
    ("reordered", [["do", "you"], ["at", "all", "recycle"]], RECYCLE_WORDS, None, False),
    ("not-contiguous", [["you", "at", "all"]], RECYCLE_WORDS, None, False),
    ("two-words", [["you", "recycle"]], RECYCLE_WORDS, None, False),
    ("two-words-allowed", [["you", "recycle"]], RECYCLE_WORDS, 2, True),
    ("function-words-only", [["at", "all"], ["do", "you"]], RECYCLE_WORDS, None, False),
    ("reply-formula", [["i", "think", "so"]], "i think so".split(), None, False),
]


@pytest.mark.parametrize(
    ("runs", "source", "min_words", "expected"),
    [c[1:] for c in VERBATIM_CASES],
    ids=[c[0] for c in VERBATIM_CASES],
)
def test_verbatim_evidence_table(
    runs: list[list[str]], source: list[str], min_words: int | None, expected: bool
) -> None:
    options = {} if min_words is None else {"min_words": min_words}
    assert verbatim_evidence(runs, source, **options) is expected


def test_table_is_separated_by_the_threshold() -> None:
    """Accepted cases clear the threshold with margin; rejected fuzzy cases stay well below it."""
    name_or_number = {
        "digit-changed",
        "age-changed",
        "number-word-changed",
        "name-changed-thanks",
        "name-changed-subject",
        "weekday-name-changed",
        "number-elsewhere",
    }
    too_short = {
        "single-word",
        "single-common-word",
        "verbatim-two-words",
        "dropped-word-one-content-word",
    }
    too_short |= {case[0] for case in CASES if case[0].startswith(("function-", "reply-"))}
    for case_id, quote, source, expected in CASES:
        score = verify_quote(quote, source).score
        if expected:
            assert score >= DEFAULT_THRESHOLD + 0.03, (case_id, score)
        elif case_id not in name_or_number | too_short:
            assert score <= DEFAULT_THRESHOLD - 0.04, (case_id, score)


def test_changed_name_is_reported_missing() -> None:
    check = verify_quote("Thanks, Melanie!", RUNNING)
    assert (check.missing, check.verified) == (("melanie",), False)


def test_empty_quote_scores_zero() -> None:
    check = verify_quote("", GROUP)
    assert (check.verified, check.score, check.span) == (False, 0.0, None)


def test_span_points_at_the_matched_source_text() -> None:
    check = verify_quote("lgbtq support group", GROUP)
    assert check.span is not None
    assert GROUP[check.span[0] : check.span[1]] == "LGBTQ support group"


def test_best_quote_match_without_sources() -> None:
    assert best_quote_match("anything", {}) == (None, verify_quote("", ""))
