"""The BEAM conditions of ``qemem reproduce``: the bundled BEAM sample they run on in CI, and
which data each kind of --data file runs them on."""

from __future__ import annotations

import json
from pathlib import Path

from qemem.datasets.beam import convert_beam, is_beam_file
from qemem.reproduce import load_conditions
from qemem.reproduce.conditions import bundled_beam_sample, bundled_sample
from qemem.reproduce.runner import Settings, resolve, skip_reason

FIXTURE = Path(__file__).parent / "fixtures" / "beam"


def test_the_bundled_beam_sample_is_the_fixture_converted() -> None:
    expected = convert_beam(FIXTURE, ["100K"]).samples
    assert json.loads(bundled_beam_sample().read_text("utf-8")) == expected
    assert is_beam_file(bundled_beam_sample()) and not is_beam_file(bundled_sample())


def _settings(kind: str, data: Path, tmp_path: Path) -> Settings:
    settings = Settings(data, kind, "ab" * 32, "hash", "fake", "fake", tmp_path, None)
    return settings if kind != "beam" else Settings(**{**vars(settings), "beam": data})


def test_beam_conditions_run_on_beam_data_and_the_sample_only(tmp_path: Path) -> None:
    conditions = load_conditions()
    beam = conditions.conditions["beam-coverage-tokens"]
    locomo = conditions.conditions["coverage-turns"]
    on_sample = _settings("sample", bundled_sample(), tmp_path)
    assert skip_reason(conditions, beam, on_sample) is None
    argv, _ = resolve(conditions.runs["beam-coverage"], on_sample)
    assert str(bundled_beam_sample()) in argv and "--mode" in argv
    on_locomo = _settings("locomo", tmp_path / "locomo10.json", tmp_path)
    assert "needs BEAM data" in str(skip_reason(conditions, beam, on_locomo))
    on_beam = _settings("beam", tmp_path / "beam-100K.json", tmp_path)
    assert skip_reason(conditions, beam, on_beam) is None
    assert str(tmp_path / "beam-100K.json") in resolve(conditions.runs["beam-coverage"], on_beam)[0]
    assert "needs LoCoMo data" in str(skip_reason(conditions, locomo, on_beam))
