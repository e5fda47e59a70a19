"""``qemem data locomo``: download, checksum and subsets, served by httpx.MockTransport."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.datasets import LOCOMO_SHA256, LOCOMO_URL, download_locomo, locomo_subset
from qemem.errors import DownloadError, InputError

SAMPLES = [{"sample_id": f"conv-{n}", "qa": [], "conversation": {"x": "é"}} for n in (26, 30, 41)]
BODY = json.dumps(SAMPLES, ensure_ascii=False).encode("utf-8")
SHA = hashlib.sha256(BODY).hexdigest()


def serving(body: bytes, status: int = 200, seen: list[str] | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(str(request.url))
        return httpx.Response(status, content=body)

    return httpx.MockTransport(handler)


def test_download_checks_the_sha256_and_says_where(tmp_path: Path) -> None:
    seen: list[str] = []
    path, fetched = download_locomo(
        tmp_path / "data", sha256=SHA, transport=serving(BODY, seen=seen)
    )
    assert (path, fetched) == (tmp_path / "data" / "locomo10.json", True)
    assert path.read_bytes() == BODY and seen == [LOCOMO_URL]
    assert "snap-research/locomo" in LOCOMO_URL and LOCOMO_URL.endswith("data/locomo10.json")
    # already there with the right bytes: no request
    again, fetched = download_locomo(tmp_path / "data", sha256=SHA, transport=serving(b"other"))
    assert again == path and fetched is False and path.read_bytes() == BODY


def test_a_different_file_is_refused_and_not_written(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match=f"not the canonical {LOCOMO_SHA256}"):
        download_locomo(tmp_path, transport=serving(BODY))
    assert list(tmp_path.iterdir()) == []


def test_http_errors_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(
        DownloadError,
        match=r"cannot download .*: HTTP 404; .*pass its path to the command that reads it",
    ):
        download_locomo(tmp_path, sha256=SHA, transport=serving(b"gone", status=404))

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no route", request=request)

    with pytest.raises(DownloadError, match="no route"):
        download_locomo(tmp_path, sha256=SHA, transport=httpx.MockTransport(refuse))


def test_subset_keeps_the_format(tmp_path: Path) -> None:
    source = tmp_path / "locomo10.json"
    source.write_bytes(BODY)
    out = locomo_subset(source, ["conv-41", "conv-26"], tmp_path / "dev.json")
    assert out.read_bytes() == json.dumps([SAMPLES[0], SAMPLES[2]], ensure_ascii=False).encode()
    with pytest.raises(InputError, match="no conversation conv-99"):
        locomo_subset(source, ["conv-99"], tmp_path / "x.json")


def test_cli_offers_the_command() -> None:
    result = CliRunner().invoke(app, ["data", "locomo", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--out" in result.output and "--subset" in result.output
