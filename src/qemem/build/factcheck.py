"""Checks a fact passes before it is stored: does it name its subject (pronoun rule), and does
it say what a stored fact already says (paraphrase rule).

Both are cheap, deterministic and English-only (word lists from :mod:`qemem.lexicon`); neither
calls a model. The paraphrase rule widens the cosine-only de-duplication
(``BuildConfig.dedup_threshold``) to restatements such as "Evan paints as a hobby" / "Evan has
watercolor painting as a hobby", which e5 scores below 0.97.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qemem.lexicon import BM25_STOPWORDS, FUNCTION_WORDS, NUMBER_WORDS, PARAPHRASE_LIGHT_WORDS
from qemem.tokens import stemmer

_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_NUMBER = re.compile(
    rf"\b(?:\d+(?:[.,]\d+)?|{'|'.join(NUMBER_WORDS[:13])}|once|twice)\b", re.IGNORECASE
)
_NEGATION = re.compile(r"\b(?:not|never|no|nobody|nothing|none|cannot)\b|n[’']t\b", re.IGNORECASE)
#: Personal pronouns a fact must not use without naming anyone (third person) or at all as its
#: subject (first and second person).
THIRD_PERSON = frozenset(
    "he she they him her his hers their theirs them himself herself themselves".split()
)
FIRST_SECOND_PERSON = frozenset("i me my mine we us our ours you your yours".split())
PARAPHRASE_MAX_EXTRA = 1
"""Content stems the longer of two restatements may add (:func:`restates`): "watercolor" in
"Evan has watercolor painting as a hobby" / "Evan paints as a hobby"."""
#: Leading pronouns rewritten to a name (``Name``) or its possessive (``Name's``).
_NAMED = {"he": "", "she": "", "his": "'s", "her": "'s"}


def fact_subject(text: str) -> str:
    """The fact's first word, lowercased, without a possessive or punctuation ("Evan's" ->
    "evan")."""
    words = text.split()
    first = words[0].lower() if words else ""
    return re.sub(r"(['’]s|\W)+$", "", first)


def numbers_of(text: str) -> list[str]:
    """The numbers a fact mentions (digits and number words up to twelve, "once", "twice"),
    lowercased and sorted."""
    return sorted(n.lower() for n in _NUMBER.findall(text))


def negated(text: str) -> bool:
    """Whether the fact contains a negation ("not", "never", "n't", ...)."""
    return bool(_NEGATION.search(text))


def content_stems(text: str, names: Sequence[str] = ()) -> frozenset[str]:
    """The Snowball stems of a fact's content words: function words, search stopwords and the
    words of ``names`` (the people it is about) dropped, possessives cut."""
    drop = {n.lower() for name in names for n in name.split()}
    words = []
    for raw in _WORD.findall(text):
        word = re.sub(r"['’]s$", "", raw.lower()).strip("'’-")
        if len(word) > 1 and word not in FUNCTION_WORDS | BM25_STOPWORDS and word not in drop:
            words.append(word)
    return frozenset(stemmer().stemWords(words))


def fact_head(text: str) -> str:
    """The fact's first word, lowercased, punctuation cut but a possessive kept: "Jon has dance
    students" is about Jon ("jon"), "Jon's dance students perform" about them ("jon's")."""
    words = text.split()
    return re.sub(r"[^\w'’]+$", "", words[0].lower()).replace("’", "'") if words else ""


def restates(a: frozenset[str], b: frozenset[str], max_extra: int) -> bool:
    """Whether one set of content stems says no more than the other: the smaller has at least
    two stems, all in the larger, which adds at most ``max_extra`` stems."""
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    return len(small) >= 2 and small <= big and len(big - small) <= max_extra


def same_statement(
    a: str,
    b: str,
    cosine: float,
    *,
    min_cosine: float,
    max_extra: int,
    names: Sequence[str] = (),
) -> bool:
    """Whether two facts say the same thing about the same person: same head word
    (:func:`fact_head`), same numbers, both negated or neither, cosine at least
    ``min_cosine``, and content stems (:func:`content_stems`, light verbs such as "has" or
    "finds" dropped) of which one :func:`restates` the other ("Evan paints as a hobby" /
    "Evan has watercolor painting as a hobby")."""
    if fact_head(a) != fact_head(b) or numbers_of(a) != numbers_of(b):
        return False
    if negated(a) != negated(b) or cosine < min_cosine:
        return False
    light = _light_stems()
    return restates(content_stems(a, names) - light, content_stems(b, names) - light, max_extra)


def _light_stems() -> frozenset[str]:
    return frozenset(stemmer().stemWords(sorted(PARAPHRASE_LIGHT_WORDS)))


def names_someone(text: str, names: Sequence[str]) -> bool:
    """Whether the fact names a person: one of ``names`` (any of its words), or a capitalised
    word that is no pronoun or function word (another person's name, "Becoming Nicole")."""
    wanted = {w.lower() for name in names for w in name.split()}
    for raw in _WORD.findall(text):
        word = re.sub(r"['’]s$", "", raw).strip("'’-")
        low = word.lower()
        if low in wanted or (word[:1].isupper() and low not in FUNCTION_WORDS | THIRD_PERSON):
            return True
    return False


def unnamed_subject(text: str, names: Sequence[str]) -> bool:
    """Whether a fact leaves its subject unnamed: it starts with a personal pronoun ("His
    ankle ...", "She wasn't thrilled ..."), or uses a personal pronoun and names nobody
    (:func:`names_someone`). "Evan worries about his health" names its subject."""
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return False
    if words[0] in THIRD_PERSON | FIRST_SECOND_PERSON:
        return True
    uses = any(w in THIRD_PERSON | FIRST_SECOND_PERSON for w in words)
    return uses and not names_someone(text, names)


def name_subject(text: str, name: str) -> str | None:
    """The fact with its leading "He"/"She" replaced by ``name`` and its leading "His"/"Her"
    by ``name's``; None when it does not start with one of them (nothing safe to rewrite)."""
    match = re.match(r"\s*([A-Za-z]+)\b", text)
    if not match:
        return None
    word = match[1].lower()
    if word not in _NAMED:
        return None
    return f"{name}{_NAMED[word]}{text[match.end() :]}"


def pronoun_of(name: str, facts: Sequence[str]) -> str | None:
    """The pronoun of ``name``, "he" or "she", when the facts about that person (those starting
    with the name) use only that one's forms (he/him/his/himself or she/her/hers/herself), at
    least once; None when they use neither or both."""
    male = female = 0
    for fact in facts:
        if fact_subject(fact) != name.split()[0].lower():
            continue
        words = {w.lower() for w in _WORD.findall(fact)}
        male += bool(words & {"he", "him", "his", "himself"})
        female += bool(words & {"she", "her", "hers", "herself"})
    if male and not female:
        return "he"
    if female and not male:
        return "she"
    return None


def rewrite_subject(fact: str, speakers: Sequence[str], known: Sequence[str]) -> str | None:
    """``fact`` with its leading "He"/"She"/"His"/"Her" replaced by the episode's speaker's
    name (:func:`name_subject`) when that subject is unambiguous: ``speakers`` (those of the
    episode) are one person, and the ``known`` facts show that person's pronoun
    (:func:`pronoun_of`) is the fact's; else None."""
    words = _WORD.findall(fact)
    lead = words[0].lower() if words else ""
    people = list(dict.fromkeys(speakers))
    if len(people) != 1 or lead not in _NAMED:
        return None
    if pronoun_of(people[0], known) != ("he" if lead in ("he", "his") else "she"):
        return None
    return name_subject(fact, people[0])


def check_pronouns(
    facts: Sequence[str],
    names: Sequence[str],
    episode_speakers: Sequence[str],
    known: Sequence[str] = (),
) -> tuple[list[str], int, int]:
    """(facts kept, facts rewritten, facts refused) under the pronoun rule.

    A fact that names its subject is kept as it is. One that does not (:func:`unnamed_subject`)
    is rewritten when its subject is unambiguous (:func:`rewrite_subject`: "His ankle" from
    Melanie, known as "she", may be her son's, so it is refused), and refused otherwise.
    ``names`` are the conversation's speakers, ``episode_speakers`` those of the episode.
    """
    kept: list[str] = []
    rewritten = refused = 0
    for fact in facts:
        if not unnamed_subject(fact, names):
            kept.append(fact)
            continue
        fixed = rewrite_subject(fact, episode_speakers, known)
        if fixed is not None and not unnamed_subject(fixed, names):
            kept.append(fixed)
            rewritten += 1
        else:
            refused += 1
    return kept, rewritten, refused
