"""Deterministic answer-scoring metrics for the LoCoMo evaluation.

Two token-F1 conventions are reported side by side because published numbers use both:

* :func:`f1_common` — the convention of the memory-systems literature (lowercase, ``. , ! ?``
  turned into spaces, whitespace split, F1 over token *sets*);
* :func:`f1_locomo` — the scorer of the LoCoMo benchmark (``task_eval/evaluation.py`` of
  snap-research/LoCoMo): punctuation and the words ``a an the and`` removed, Porter stems,
  F1 over token *multisets*, with per-category rules.

:func:`bleu1` is sentence-level BLEU-1 on the :func:`f1_common` tokens. All functions are pure.
"""

from __future__ import annotations

import math
import re
import string
import threading
from collections import Counter

import Stemmer

from qemem.errors import InputError
from qemem.lexicon import LOCOMO_ARTICLES

__all__ = ["bleu1", "f1_common", "f1_locomo", "normalise_gold"]

_COMMON_PUNCT = str.maketrans({".": " ", ",": " ", "!": " ", "?": " "})
_OFFICIAL_PUNCT = str.maketrans("", "", string.punctuation)
_OFFICIAL_ARTICLES = re.compile(rf"\b({'|'.join(LOCOMO_ARTICLES)})\b")
_ADVERSARIAL_MARKERS = ("no information available", "not mentioned")
_LOCOMO_CATEGORIES = frozenset({1, 2, 3, 4, 5})

# NLTK's PorterStemmer (default NLTK_EXTENSIONS mode, used by the official scorer) maps these
# irregular forms directly and leaves words of at most two letters unchanged; everything else
# goes through the Porter algorithm (PyStemmer's "porter").
_NLTK_IRREGULAR = {
    "sky": "sky",
    "skies": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "news": "news",
    "innings": "inning",
    "inning": "inning",
    "outings": "outing",
    "outing": "outing",
    "cannings": "canning",
    "canning": "canning",
    "howe": "howe",
    "proceed": "proceed",
    "exceed": "exceed",
    "succeed": "succeed",
}
_local = threading.local()


def normalise_gold(value: object) -> str:
    """Return a gold answer as text: strings unchanged, ints and floats cast (``3 -> "3"``).

    Integral floats lose the ``.0`` (``2022.0 -> "2022"``) so that they score like the int.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(
            f"gold answer {value!r} is neither text nor a number; "
            "pass the question's 'answer' (or 'adversarial_answer' for category 5)",
            field="answer",
        )
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _common_tokens(text: str) -> list[str]:
    """Lowercase, turn ``. , ! ?`` into spaces and split on whitespace."""
    return text.lower().translate(_COMMON_PUNCT).split()


def _f1(num_same: int, n_pred: int, n_gold: int) -> float:
    """F1 from the overlap size and the two token counts (0 when nothing overlaps)."""
    if num_same == 0:
        return 0.0
    precision = num_same / n_pred
    recall = num_same / n_gold
    return 2 * precision * recall / (precision + recall)


def f1_common(prediction: str, gold: str) -> float:
    """Token-set F1 of the common convention; 0.0 when either side has no tokens."""
    pred = set(_common_tokens(prediction))
    ref = set(_common_tokens(gold))
    return _f1(len(pred & ref), len(pred), len(ref))


def bleu1(prediction: str, gold: str) -> float:
    """Sentence BLEU-1 (clipped unigram precision times brevity penalty), ``f1_common`` tokens.

    Semantics of NLTK ``sentence_bleu(weights=(1, 0, 0, 0),
    smoothing_function=SmoothingFunction().method1)``, the setting used in this literature:
    method1 adds epsilon 0.1 only to *zero-count* precisions, but NLTK returns 0 before
    smoothing whenever no unigram matches, so for BLEU-1 the smoothing never changes a score:
    the result is ``BP * matches / len(prediction)`` with ``BP = 1`` if the prediction is longer
    than the gold, else ``exp(1 - len(gold) / len(prediction))``; 0.0 when nothing matches.
    """
    hyp = _common_tokens(prediction)
    ref = _common_tokens(gold)
    ref_counts = Counter(ref)
    clipped = sum(min(count, ref_counts[token]) for token, count in Counter(hyp).items())
    if clipped == 0:
        return 0.0
    c, r = len(hyp), len(ref)
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return brevity * clipped / c


def _stem(word: str) -> str:
    """Porter stem of a lowercase word, following NLTK's PorterStemmer front matter."""
    if word in _NLTK_IRREGULAR:
        return _NLTK_IRREGULAR[word]
    if len(word) <= 2:
        return word
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:  # PyStemmer objects are not thread-safe: one per thread
        stemmer = _local.stemmer = Stemmer.Stemmer("porter")
    return str(stemmer.stemWord(word))


def _official_tokens(text: str) -> list[str]:
    """LoCoMo ``normalize_answer`` then Porter stems.

    Commas deleted, lowercase, ASCII punctuation deleted, ``a an the and`` replaced by spaces,
    whitespace split.
    """
    text = text.replace(",", "").lower().translate(_OFFICIAL_PUNCT)
    text = _OFFICIAL_ARTICLES.sub(" ", text)
    return [_stem(word) for word in text.split()]


def _f1_official(prediction: str, gold: str) -> float:
    """Multiset F1 over stemmed, normalised tokens (LoCoMo ``f1_score``)."""
    pred = _official_tokens(prediction)
    ref = _official_tokens(gold)
    num_same = sum((Counter(pred) & Counter(ref)).values())
    return _f1(num_same, len(pred), len(ref))


def f1_locomo(prediction: str, gold: str, category: int) -> float:
    """LoCoMo's official per-question score.

    * category 1 (multi-hop): prediction and gold split on commas; for each gold part the best
      F1 over prediction parts, averaged over gold parts;
    * category 3 (open-domain): only the gold before the first ``;`` counts;
    * categories 2 and 4: plain F1;
    * category 5 (adversarial): 1.0 if the prediction contains "no information available" or
      "not mentioned" (case-insensitive), else 0.0; the gold is ignored.

    Stemming uses PyStemmer's Porter with NLTK's irregular-form table and its rule that words of
    one or two letters stay unchanged; NLTK's remaining extensions (e.g. ``dies -> die``) are
    not reproduced, so rare stems can differ from the official scorer.
    """
    if category not in _LOCOMO_CATEGORIES:
        raise InputError(
            f"unknown LoCoMo category {category!r}; use 1-5 "
            "(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial)",
            field="category",
        )
    if category == 5:
        lowered = prediction.lower()
        return 1.0 if any(marker in lowered for marker in _ADVERSARIAL_MARKERS) else 0.0
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        predictions = [part.strip() for part in prediction.split(",")]
        golds = [part.strip() for part in gold.split(",")]
        best = [max(_f1_official(pred, part) for pred in predictions) for part in golds]
        return sum(best) / len(best)
    return _f1_official(prediction, gold)
