"""Regression tests of issue 21's defects (reliability, second pass): each failed on the main
before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qemem.cli import app
from qemem.errors import ConfigError
from qemem.memory import Memory
from qemem.store import open_store, parse_store_url, redact

runner = CliRunner()


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``qemem ARGS`` through the console entry point (which prints user-facing errors):
    its exit status and everything it printed."""
    import sys

    from qemem.cli import main

    old = sys.argv
    sys.argv = ["qemem", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMEM_EMBEDDER", "hash")
    monkeypatch.delenv("QEMEM_LLM", raising=False)
    monkeypatch.delenv("QEMEM_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


# ---------------------------------------------------------------- 1. an empty store argument


@pytest.mark.parametrize("blank", ["", "   "])
def test_an_empty_store_argument_is_refused_by_the_library(blank: str) -> None:
    with pytest.raises(ConfigError, match="store argument is empty"):
        parse_store_url(blank)
    with pytest.raises(ConfigError, match="store argument is empty"):
        open_store(blank)
    with pytest.raises(ConfigError, match="store argument is empty"):
        Memory.open(blank)
    assert parse_store_url(None) == ("sqlite", ":memory:")  # None still means in memory


@pytest.mark.parametrize(
    "args",
    [
        ["ingest", "SAMPLE", "--store", ""],
        ["conversations", "--store", ""],
        ["search", "pottery", "--store", "", "-c", "demo-1"],
        ["serve", "--store", ""],
        ["mcp", "--store", ""],
        ["eval", "coverage", "--data", "SAMPLE", "--store", ""],
    ],
)
def test_an_empty_store_option_stops_every_command(
    args: list[str], sample_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [str(sample_path) if a == "SAMPLE" else a for a in args]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert "store is empty" in result.output and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing was written anywhere


def test_an_empty_qemem_store_variable_stops_ingest(
    sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QEMEM_STORE", "")
    result = runner.invoke(app, ["ingest", str(sample_path)])
    assert result.exit_code == 2 and "ingested" not in result.output


# ---------------------------------------------------------------- 4. passwords


def test_a_store_password_is_masked() -> None:
    url = "postgresql://postgres:S3cretPW@/postgres?host=/tmp/x"
    assert redact(url) == "postgresql://postgres:***@/postgres?host=/tmp/x"
    assert redact("memory.db") == "memory.db"
    with pytest.raises(ConfigError) as caught:
        parse_store_url("postgresql:/postgres:S3cretPW@host/db")
    assert "S3cretPW" not in str(caught.value)


@pytest.mark.slow
def test_the_ingest_line_never_prints_the_password(sample_path: Path, pg_url: str) -> None:
    scheme, rest = pg_url.split("://", 1)
    user, at, host = rest.partition("@")
    url = f"{scheme}://{user.split(':')[0]}:S3cretPW@{host}" if at else pg_url
    result = runner.invoke(app, ["ingest", str(sample_path), "--store", url, "--quiet"])
    assert result.exit_code == 0, result.output
    assert "S3cretPW" not in result.output
    assert "ingested 65 turns" in result.output


def test_a_run_manifest_masks_the_store_password(tmp_path: Path) -> None:
    from qemem.eval.locomo import LocomoRunConfig

    config = LocomoRunConfig(
        data=tmp_path / "d.json", out=tmp_path, store="postgresql://u:S3cretPW@h/db"
    )
    assert json.dumps(config.to_dict()).count("S3cretPW") == 0


# ---------------------------------------------------------------- 7. user text is not markup


@pytest.mark.slow
def test_user_text_is_printed_as_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat = tmp_path / "chat.jsonl"
    rows = [
        {
            "conversation_id": "team:smile:1",
            "session_id": "s1",
            "timestamp": "2024-03-14T19:15:00",
            "speaker": "Ana [bold]x[/]",
            "text": "I said :thumbs_up: and [link=http://x]y[/link].",
        }
    ]
    chat.write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    store = str(tmp_path / "m.db")
    ingested = runner.invoke(app, ["ingest", str(chat), "--store", store, "--quiet"])
    assert "team:smile:1: +1 sessions" in ingested.output, ingested.output
    listed = runner.invoke(app, ["conversations", "--store", store]).output
    assert "team:smile:1" in listed and "Ana [bold]x[/]" in listed and "😄" not in listed
    found = runner.invoke(app, ["search", "thumbs", "--store", store, "-c", "team:smile:1"])
    assert ":thumbs_up:" in found.output and "[link=http://x]y[/link]" in found.output
    code, printed = run_main(["search", "x", "--store", store, "-c", "nope:thumbs_up:"], capsys)
    assert code == 2 and "nope:thumbs_up:" in printed and "👍" not in printed


def test_a_bad_llm_spec_is_quoted_as_it_is(
    tmp_path: Path,
    sample_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = str(tmp_path / "m.db")
    runner.invoke(app, ["ingest", str(sample_path), "--store", store, "--quiet"])
    monkeypatch.setenv("QEMEM_LLM", "faulty:abc:fake")
    code, printed = run_main(["ask", "x", "--store", store, "-c", "demo-1"], capsys)
    assert code == 2 and "faulty:abc:fake" in printed and "🔤" not in printed


# ---------------------------------------------------------------- 2, 3. text no store can keep

BAD_TEXT = ["caf\udce9", "\ud800", "a\x00b", "bell\x07"]


def _messages(text: str, speaker: str = "Ana") -> list[dict[str, str]]:
    return [
        {"session_id": "s1", "timestamp": "2024-03-14T19:15:00", "speaker": "Ana", "text": "hi"},
        {"session_id": "s1", "timestamp": "2024-03-14T19:16:00", "speaker": speaker, "text": text},
    ]


@pytest.mark.parametrize("bad", BAD_TEXT)
def test_both_backends_refuse_the_same_text_and_stay_unchanged(store_url: str, bad: str) -> None:
    from qemem.embed import HashEmbedder
    from qemem.errors import InputError

    with Memory.open(store_url, embedder=HashEmbedder()) as memory:
        memory.add_messages("c1", _messages("fine, with a tab\tand\r\nnewlines"))
        before = memory.turns("c1")
        for messages in (_messages(bad), _messages("ok", speaker=bad)):
            with pytest.raises(InputError, match="U\\+"):
                memory.add_messages("c1", messages)
        with pytest.raises(InputError):
            memory.add_messages(bad, _messages("ok"))
        with pytest.raises(InputError):
            memory.search("c1", bad)
        assert memory.turns("c1") == before
        assert [t.text for t in before][-1] == "fine, with a tab\tand\r\nnewlines"


def test_a_json_file_with_a_lone_surrogate_is_refused(tmp_path: Path) -> None:
    from qemem.errors import InputError

    chat = tmp_path / "chat.json"
    chat.write_text(
        '[{"conversation_id": "c", "session_id": "s", "timestamp": "2024-03-14T19:15:00",'
        ' "speaker": "Ana", "text": "x \\ud800 y"}]',
        "utf-8",
    )
    with Memory.open(tmp_path / "m.db", embedder="hash") as memory:
        with pytest.raises(InputError, match="lone surrogate"):
            memory.ingest(chat)
        assert memory.conversations() == []


def test_a_shell_argument_in_another_encoding_is_a_clear_error(
    tmp_path: Path, sample_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "m.db")
    runner.invoke(app, ["ingest", str(sample_path), "--store", store, "--quiet"])
    for command in ("search", "ask"):
        code, printed = run_main([command, "caf\udce9", "--store", store, "-c", "demo-1"], capsys)
        assert code == 2 and "lone surrogate" in printed and "Traceback" not in printed
    code, printed = run_main(["search", "x", "--store", store, "-c", "caf\udce9"], capsys)
    assert code == 2 and "conversation id is not valid Unicode" in printed


@pytest.mark.slow
@pytest.mark.parametrize("bad", BAD_TEXT)
def test_http_refuses_text_no_store_can_keep_with_422(bad: str) -> None:
    from service_helpers import MESSAGES, served

    with served() as s:
        headers = {**s.auth(s.alice), "Content-Type": "application/json"}

        def post(path: str, body: object) -> int:
            # json.dumps escapes a lone surrogate as \ud800, as any JSON client sends it
            url = f"/v1/conversations/c1/{path}"
            return s.client.post(url, content=json.dumps(body), headers=headers).status_code

        assert post("messages", {"messages": MESSAGES[:1]}) == 200
        assert post("messages", {"messages": [{**MESSAGES[1], "text": bad}]}) == 422
        assert post("search", {"query": bad}) == 422
        assert post("ask", {"question": bad, "mode": "retrieval"}) == 422
        found = s.client.post(
            "/v1/conversations/c1/search", json={"query": "cat", "k": None}, headers=headers
        )
        assert len(found.json()["results"]) == 1


# ---------------------------------------------------------------- 5. mistyped store paths


def test_a_store_in_a_missing_folder_is_refused_not_created(
    tmp_path: Path, sample_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from qemem.errors import StoreError

    target = tmp_path / "no" / "such" / "m.db"
    with pytest.raises(StoreError, match="does not exist"):
        Memory.open(target)
    code, printed = run_main(["ingest", str(sample_path), "--store", str(target)], capsys)
    assert code == 2 and "does not" in printed and "exist" in printed
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("content", [None, "{not json", '[{"speaker": "Ana"}]'])
def test_a_bad_input_file_leaves_no_store_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None
) -> None:
    source = tmp_path / "in.json"
    if content is not None:
        source.write_text(content, "utf-8")
    store = tmp_path / "fresh.db"
    code, printed = run_main(["ingest", str(source), "--store", str(store)], capsys)
    assert code == 2 and "Traceback" not in printed
    assert not store.exists()


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_servers_refuse_a_store_that_does_not_exist(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "typo.db"
    code, printed = run_main([command, "--store", str(typo)], capsys)
    assert code == 2 and "no qemem store" in printed and not typo.exists()


# ---------------------------------------------------------------- 9. read-only commands


def test_read_only_commands_leave_no_side_files(tmp_path: Path, sample_path: Path) -> None:
    store = tmp_path / "m.db"
    runner.invoke(app, ["ingest", str(sample_path), "--store", str(store), "--quiet"])
    for args in (["conversations"], ["search", "pottery", "-c", "demo-1"]):
        result = runner.invoke(app, [*args, "--store", str(store)])
        assert result.exit_code == 0, result.output
        assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]


def test_a_writer_closing_beside_another_connection_does_not_wait(tmp_path: Path) -> None:
    import time

    from qemem.store import SQLiteStore

    first, second = SQLiteStore(tmp_path / "m.db"), SQLiteStore(tmp_path / "m.db")
    started = time.perf_counter()
    first.close()
    assert time.perf_counter() - started < 5
    second.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]


# ---------------------------------------------------------------- 6. output paths


@pytest.mark.slow
def test_output_paths_are_checked_before_any_work(
    tmp_path: Path, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "m.db")
    runner.invoke(app, ["ingest", str(sample_path), "--store", store, "--quiet"])
    monkeypatch.setenv("QEMEM_LLM", "fake")
    ask = ["ask", "When did Priya go to pottery?", "--store", store, "-c", "demo-1"]
    for html in (tmp_path / "no" / "a.html", tmp_path):
        result = runner.invoke(app, [*ask, "--html", str(html)])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert "FINAL" not in result.output and "Priya" not in result.output  # nothing ran
    export = ["export-memory", "--store", store, "-c", "demo-1", "-o", str(tmp_path)]
    assert runner.invoke(app, export).exit_code == 2
    run = ["eval", "locomo", "--data", str(sample_path), "--out", "/proc/nope", "--llm", "fake"]
    result = runner.invoke(app, run)
    assert result.exit_code == 2 and "cannot use /proc/nope" in result.output


# ---------------------------------------------------------------- 12. long runs off a terminal


def test_progress_off_a_terminal_is_a_line_every_tenth(capsys: pytest.CaptureFixture[str]) -> None:
    from qemem.cli.common import progress_lines

    update = progress_lines(every_seconds=3600)
    for done in range(0, 101):
        update("questions", done, 100)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"questions: {n}/100" for n in range(0, 101, 10)]


def test_an_offline_run_prints_progress_and_names_both_reports(
    tmp_path: Path, sample_path: Path
) -> None:
    out = tmp_path / "run"
    args = ["eval", "locomo", "--data", str(sample_path), "--out", str(out), "--llm", "fake"]
    result = runner.invoke(app, [*args, "--no-build", "--limit", "3", "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "questions: 3/3" in result.output
    assert str(out / "report.md") in result.output and str(out / "report.html") in result.output


# ---------------------------------------------------------------- 10. the smaller ones


def test_an_input_file_without_messages_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for content in ("", "[]"):
        source = tmp_path / "empty.json"
        source.write_text(content, "utf-8")
        code, printed = run_main(["ingest", str(source), "--store", str(tmp_path / "m.db")], capsys)
        assert code == 2 and ("no messages" in printed or "no conversations" in printed), printed
        assert not (tmp_path / "m.db").exists()


def test_a_utf16_file_is_named_as_utf16(tmp_path: Path) -> None:
    from qemem.errors import InputError
    from qemem.ingest.reader import read_conversations

    source = tmp_path / "chat.json"
    source.write_bytes('[{"speaker": "Ana"}]'.encode("utf-16"))
    with pytest.raises(InputError, match="UTF-16LE") as caught:
        read_conversations(source)
    assert "latin1" not in str(caught.value)


def test_a_changed_speaker_is_named_as_the_speaker(sample_path: Path) -> None:
    from qemem.embed import HashEmbedder
    from qemem.errors import InputError
    from qemem.store import SQLiteStore

    with Memory(SQLiteStore(":memory:"), HashEmbedder()) as memory:
        memory.add_messages("c1", _messages("hello"))
        changed = _messages("hello", speaker="Bea")
        with pytest.raises(InputError, match="its speaker differs") as caught:
            memory.ingest([_as_input(changed)])
        assert caught.value.field == "speaker"


def _as_input(messages: list[dict[str, str]]) -> object:
    from qemem.ingest.generic import parse_generic

    [conv] = parse_generic([{**m, "conversation_id": "c1"} for m in messages], "<test>")
    return conv


def test_ask_says_when_the_offline_llm_answered_and_where_the_page_went(
    tmp_path: Path, sample_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "m.db")
    runner.invoke(app, ["ingest", str(sample_path), "--store", store, "--quiet"])
    monkeypatch.setenv("QEMEM_LLM", "fake")
    page = tmp_path / "a.html"
    ask = ["ask", "What did Priya make?", "--store", store, "-c", "demo-1"]
    result = runner.invoke(app, [*ask, "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert "placeholder" in result.output and f"wrote {page}" in result.output and page.exists()
    direct = runner.invoke(app, [*ask, "--mode", "direct"])
    assert direct.exit_code == 0 and "termination None" not in direct.output


def test_http_ask_without_an_llm_tells_the_operator_what_to_do() -> None:
    from service_helpers import MESSAGES, served

    with served(llm=None) as s:
        headers = s.auth(s.alice)
        s.client.post("/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=headers)
        response = s.client.post(
            "/v1/conversations/c1/ask", json={"question": "Who has a cat?"}, headers=headers
        )
        assert response.status_code == 503
        detail = response.json()["detail"]
        assert "start it with QEMEM_LLM" in detail and "--llm" not in detail


def test_keys_create_json_names_the_key_id_and_its_access(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    args = ["keys", "create", "--store", store, "--namespace", "team", "--read-only", "--json"]
    result = runner.invoke(app, args)
    data = json.loads(result.output.splitlines()[-1])
    assert data["key"].startswith("qm_") and data["id"] and data["read_only"] is True
    assert data["namespace"] == "team"


# ---------------------------------------------------------------- 10. MCP


def test_mcp_names_its_version_bounds_k_refuses_ask_without_llm_and_hides_the_path(
    tmp_path: Path,
) -> None:
    import logging

    import anyio
    from mcp import Client

    import qemem
    from qemem.embed import HashEmbedder
    from qemem.service.mcp_server import create_mcp_server
    from service_helpers import MESSAGES

    logging.getLogger("bm25s").setLevel(logging.DEBUG)
    store = tmp_path / "secret-place" / "m.db"
    store.parent.mkdir()
    out: dict[str, object] = {}

    async def session(memory: Memory) -> None:
        async with Client(create_mcp_server(memory)) as client:
            out["version"] = client.server_info.version  # type: ignore[union-attr]
            call = client.call_tool
            await call("remember", {"conversation": "c1", "messages": MESSAGES})
            out["k0"] = await call("recall", {"conversation": "c1", "query": "cat", "k": 0})
            out["ask"] = await call("ask", {"conversation": "c1", "question": "Who?"})
            out["retrieval"] = await call(
                "ask", {"conversation": "c1", "question": "Who?", "mode": "retrieval"}
            )
            out["missing"] = await call("recall", {"conversation": "nope", "query": "x"})

    with Memory.open(store, embedder=HashEmbedder()) as memory:
        anyio.run(session, memory)
    assert out["version"] == qemem.__version__
    assert logging.getLogger("bm25s").getEffectiveLevel() >= logging.WARNING
    k0, ask, retrieval, missing = (out[k] for k in ("k0", "ask", "retrieval", "missing"))
    assert k0.is_error and "k must be from 1" in k0.content[0].text  # type: ignore[attr-defined]
    assert ask.is_error and "QEMEM_LLM" in ask.content[0].text  # type: ignore[attr-defined]
    assert not retrieval.is_error  # type: ignore[attr-defined]
    text = missing.content[0].text  # type: ignore[attr-defined]
    assert missing.is_error and "nope" in text and "secret-place" not in text  # type: ignore[attr-defined]
