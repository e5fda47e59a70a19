"""Hand-computed checks of the answer-scoring metrics."""

from __future__ import annotations

import math

import pytest

from qemem.errors import InputError
from qemem.eval.metrics import bleu1, f1_common, f1_locomo, normalise_gold

# ---------------------------------------------------------------- normalise_gold


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, "3"), (2022, "2022"), (2022.0, "2022"), (2.5, "2.5"), ("7 May 2023", "7 May 2023")],
)
def test_normalise_gold_casts_numbers_to_text(value: object, expected: str) -> None:
    assert normalise_gold(value) == expected


@pytest.mark.parametrize("value", [None, True, ["a"]])
def test_normalise_gold_rejects_non_answers(value: object) -> None:
    with pytest.raises(InputError, match="neither text nor a number"):
        normalise_gold(value)


# ---------------------------------------------------------------- f1_common


def test_f1_common_token_sets_with_punctuation_to_spaces() -> None:
    # P = {she, went, to, paris} ("Paris." -> "paris"), G = {paris, in, may}
    # overlap 1 -> precision 1/4, recall 1/3, F1 = 2*(1/12)/(7/12) = 2/7
    assert f1_common("She went to Paris.", "Paris in May") == pytest.approx(2 / 7)


def test_f1_common_uses_sets_not_multisets() -> None:
    # P = {the, cat} (duplicates collapse), G = {the, cat} -> F1 = 1
    assert f1_common("the the cat cat", "The cat") == 1.0


def test_f1_common_keeps_other_punctuation_and_articles() -> None:
    # "'s" and ";" are not separators: P = {caroline's, dog;}, G = {caroline, dog} -> no overlap
    assert f1_common("Caroline's dog;", "Caroline dog") == 0.0
    # articles stay tokens: P = {a, dog}, G = {dog} -> p 1/2, r 1, F1 = 1/(3/2) = 2/3
    assert f1_common("a dog", "dog") == pytest.approx(2 / 3)


def test_f1_common_commas_split_numbers() -> None:
    # "2,022" -> "2 022" -> {2, 022}; G = {2022} -> no overlap
    assert f1_common("2,022", "2022") == 0.0
    assert f1_common("In 2022!", normalise_gold(2022)) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("prediction", "gold"), [("", "paris"), ("paris", ""), ("", ""), ("?!.,", "?"), ("   ", "x")]
)
def test_f1_common_empty_or_punctuation_only_scores_zero(prediction: str, gold: str) -> None:
    assert f1_common(prediction, gold) == 0.0


# ---------------------------------------------------------------- f1_locomo


def test_f1_locomo_plain_uses_stems_and_drops_articles_and_and() -> None:
    # pred: "The cats and dogs ran." -> remove punct, drop the/and -> "cats dogs ran"
    #   -> stems [cat, dog, ran]; gold "a cat" -> [cat]
    # overlap 1 -> p 1/3, r 1, F1 = (2/3)/(4/3) = 1/2
    assert f1_locomo("The cats and dogs ran.", "a cat", 4) == pytest.approx(0.5)


def test_f1_locomo_is_multiset_f1() -> None:
    # pred [cat, cat], gold [cat] -> overlap min(2,1)=1 -> p 1/2, r 1, F1 = 2/3
    # (f1_common on the same pair would be 1.0: its sets collapse the duplicate)
    assert f1_locomo("cat cat", "cat", 2) == pytest.approx(2 / 3)
    assert f1_common("cat cat", "cat") == 1.0


def test_f1_locomo_deletes_punctuation_without_spaces() -> None:
    # official normalisation deletes commas and punctuation: "2,022" -> "2022" matches
    assert f1_locomo("2,022", "2022", 2) == 1.0
    # "Caroline's" -> "carolines" -> stem "carolin"; gold "Caroline" -> "carolin" -> F1 1
    assert f1_locomo("Caroline's", "Caroline", 4) == 1.0


def test_f1_locomo_short_words_and_irregular_forms_follow_nltk() -> None:
    # NLTK leaves words of <= 2 letters alone: "is" stays "is" and must not match "i"
    assert f1_locomo("is", "I", 4) == 0.0
    # NLTK's irregular table: "dying" -> "die" (plain Porter would give "dy")
    assert f1_locomo("dying", "die", 4) == 1.0


def test_f1_locomo_category1_best_match_per_gold_part() -> None:
    # pred parts: "The cats went to the park" -> [cat, went, to, park]; "and a shop!" -> [shop]
    # gold parts: "cat" -> [cat]; "park" -> [park]; "museum" -> [museum]
    # "cat": vs part 1 overlap 1, p 1/4, r 1 -> F1 2/5; vs part 2 -> 0; best 2/5
    # "park": likewise 2/5; "museum": 0
    # mean = (2/5 + 2/5 + 0)/3 = 4/15
    score = f1_locomo("The cats went to the park, and a shop!", "cat, park, museum", 1)
    assert score == pytest.approx(4 / 15)


def test_f1_locomo_category1_exact_list_in_other_order_scores_one() -> None:
    assert f1_locomo("hiking, painting", "Painting, Hiking", 1) == 1.0


def test_f1_locomo_category1_without_commas_is_plain_f1() -> None:
    # pred [run, marathon] vs gold [marathon] -> p 1/2, r 1 -> 2/3
    assert f1_locomo("running marathons", "marathon", 1) == pytest.approx(2 / 3)


def test_f1_locomo_category3_uses_gold_before_semicolon() -> None:
    # gold "ran in Paris; or London" -> "ran in Paris" -> [ran, in, pari]
    # pred "Running in Paris" -> [run, in, pari]; overlap 2 -> p 2/3, r 2/3 -> 2/3
    assert f1_locomo("Running in Paris", "ran in Paris; or London", 3) == pytest.approx(2 / 3)
    # the same pair under category 4 keeps the whole gold [ran, in, pari, or, london]:
    # overlap 2 -> p 2/3, r 2/5 -> 2*(4/15)/(16/15) = 1/2
    assert f1_locomo("Running in Paris", "ran in Paris; or London", 4) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("No information available about that.", 1.0),
        ("It is NOT MENTIONED in the conversation", 1.0),
        ("She went to Paris", 0.0),
        ("", 0.0),
    ],
)
def test_f1_locomo_category5_checks_abstention(prediction: str, expected: float) -> None:
    assert f1_locomo(prediction, "Paris", 5) == expected


@pytest.mark.parametrize(("prediction", "gold"), [("", "paris"), ("paris", ""), ("!?", "the")])
def test_f1_locomo_empty_after_normalisation_scores_zero(prediction: str, gold: str) -> None:
    for category in (1, 2, 3, 4):
        assert f1_locomo(prediction, gold, category) == 0.0


def test_f1_locomo_numbers_as_gold() -> None:
    # gold 3 -> "3"; pred "3 times" -> [3, time]; overlap 1 -> p 1/2, r 1 -> 2/3
    assert f1_locomo("3 times", normalise_gold(3), 1) == pytest.approx(2 / 3)


@pytest.mark.parametrize("category", [0, 6, -1])
def test_f1_locomo_rejects_unknown_category(category: int) -> None:
    with pytest.raises(InputError, match="unknown LoCoMo category"):
        f1_locomo("x", "x", category)


# ---------------------------------------------------------------- bleu1


def test_bleu1_short_prediction_gets_brevity_penalty() -> None:
    # hyp [the, cat, sat] (c=3), ref 6 tokens; all 3 match -> p1 = 1
    # BP = exp(1 - 6/3) = exp(-1)
    assert bleu1("The cat sat.", "the cat sat on the mat") == pytest.approx(math.exp(-1))


def test_bleu1_clips_repeated_tokens() -> None:
    # hyp [the]*4 (c=4) vs ref [the, cat] (r=2): clipped matches min(4, 1) = 1 -> p1 = 1/4
    # c > r -> BP = 1 -> 0.25
    assert bleu1("the the the the", "the cat") == pytest.approx(0.25)


def test_bleu1_partial_match_longer_prediction() -> None:
    # hyp [she, went, to, paris, in, may] (c=6), ref [paris, may] (r=2)
    # matches 2 -> p1 = 2/6, BP = 1 -> 1/3
    assert bleu1("She went to Paris in May!", "Paris, May") == pytest.approx(1 / 3)


def test_bleu1_equal_length_has_no_penalty() -> None:
    # c = r = 2, one match -> p1 = 1/2, BP = exp(1 - 1) = 1
    assert bleu1("red car", "red bike") == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [("", "paris"), ("paris", ""), ("", ""), ("london", "paris"), (".", ".")],
)
def test_bleu1_no_unigram_match_scores_zero(prediction: str, gold: str) -> None:
    assert bleu1(prediction, gold) == 0.0


def test_bleu1_numbers() -> None:
    # hyp [2022] vs ref ["2022"] -> 1
    assert bleu1("2022", normalise_gold(2022)) == 1.0
