"""``/docs`` in a real browser with no network but the server's (issue 34): the page loads its
scripts and styles from the server (``fastapi-offline``'s assets), never from a CDN, and lists
every operation of the API. Debian's chromium through Playwright, as in
``test_view_browser.py``; under CI=true a missing chromium fails, elsewhere it skips."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from serve_helpers import free_port
from service_helpers import served

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update"]

if not CHROMIUM.exists() and os.environ.get("CI") != "true":
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)

import uvicorn  # noqa: E402
from playwright.sync_api import Page, Route, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def base() -> Iterator[tuple[str, int]]:
    """The URL of a real HTTP server of the app, and its number of operations."""
    with served(llm=None) as s:
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(s.app, port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        paths = s.client.get("/openapi.json").json()["paths"]
        yield f"http://127.0.0.1:{port}", sum(len(methods) for methods in paths.values())
        server.should_exit = True
        thread.join(timeout=10)


def _offline(page: Page, base: str) -> list[str]:
    """Abort every request that is not to ``base``; the list of those aborted."""
    outside: list[str] = []

    def route(request: Route) -> None:
        if request.request.url.startswith(base):
            request.continue_()
        else:
            outside.append(request.request.url)
            request.abort()

    page.route("**/*", route)
    return outside


def test_docs_lists_every_operation_with_no_network(base: tuple[str, int]) -> None:
    url, operations = base
    assert CHROMIUM.exists(), "CI needs /usr/bin/chromium: .ci/run installs it with apt-get"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=ARGS
        )
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            outside = _offline(page, url)
            page.goto(f"{url}/docs")
            page.wait_for_selector(".opblock", timeout=30_000)
            assert page.locator(".opblock").count() == operations
            assert page.get_by_text("/v1/conversations/{conversation}/search").count() >= 1
        finally:
            browser.close()
    assert outside == [] and errors == []
