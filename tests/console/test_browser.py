"""The console in a real browser: headless Chromium (the system's ``chromium``) driven by
Playwright against the service served by uvicorn on a seeded SQLite database.

Skipped where Chromium or Playwright is missing, unless ``RATINGS_TEST_BROWSER=required``
(CI sets it: ``.ci/run``), which makes their absence a failure instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.console.demo import LADDER, VETERAN, Demo, seed, served

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

REQUIRED = os.environ.get("RATINGS_TEST_BROWSER") == "required"
#: The veteran's matches: the chart of a long career must draw whole.
VETERAN_MATCHES = 10_000


def _missing() -> str | None:
    if shutil.which("chromium") is None:
        return "no chromium on the PATH (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    path = tmp_path_factory.mktemp("console") / "ratings.db"
    # About VETERAN_MATCHES of the matches are the veteran's.
    return seed(f"sqlite:///{path}", players=150, matches=11_800, veteran_share=0.85)


@pytest.fixture(scope="module")
def base_url(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(demo.url, log=tmp_path_factory.mktemp("logs") / "open.log") as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    problem = _missing()
    if problem is not None:
        if REQUIRED:
            pytest.fail(f"RATINGS_TEST_BROWSER=required, but {problem}")
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=shutil.which("chromium"))
        yield launched
        launched.close()


class Watched:
    """A page and every error its console or scripts reported."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"{message.type}: {message.text}")


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield Watched(context.new_page())
    context.close()


def _ranks(page: Page) -> list[int]:
    cells = page.locator("table.board tbody tr td:first-child").all_inner_texts()
    return [int(cell.replace(",", "")) for cell in cells]


def _drawn(page: Page, selector: str) -> int:
    figure = page.locator(f"{selector}[data-points]")
    figure.wait_for(timeout=15_000)
    points = int(figure.get_attribute("data-points") or 0)
    canvas = page.locator(f"{selector} canvas")
    assert canvas.count() == 1 and (canvas.bounding_box() or {"width": 0})["width"] > 200
    return points


def test_every_page_loads_without_console_errors(watched: Watched, base_url: str) -> None:
    page = watched.page
    pages = {
        "/console": "Ladders",
        f"/console/ladders/{LADDER}": LADDER,
        f"/console/ladders/{LADDER}/players/player-0001": "player-0001",
        f"/console/ladders/{LADDER}/health": f"Prediction health of {LADDER}",
        "/console/ladders/league-races": "league-races",
        "/console/ladders/league-races/players/racer-001": "racer-001",
        "/console/ladders/league-races/health": "Prediction health of league-races",
        "/console/login": "Sign in",
    }
    for path, heading in pages.items():
        answer = page.goto(base_url + path)
        assert answer is not None and answer.status == 200, path
        assert page.locator("h1").inner_text() == heading
        if "/players/" in path:
            assert _drawn(page, "#trajectory") > 1
    page.goto(f"{base_url}/console/ladders/{LADDER}/health")
    assert _drawn(page, "#calibration") >= 5
    assert _drawn(page, "#periods") == 20
    assert _drawn(page, "#draws") > 100
    assert watched.errors == []

    # The keyboard: the first Tab lands on the skip link, which moves to the content.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


def test_the_search_finds_a_player_and_the_leaderboard_pages(
    watched: Watched, base_url: str
) -> None:
    page = watched.page
    page.goto(f"{base_url}/console/ladders/{LADDER}")
    assert _ranks(page) == list(range(1, 51))
    page.get_by_role("link", name="Next page").click()
    assert _ranks(page) == list(range(51, 101))
    page.get_by_role("link", name="First page").click()
    assert _ranks(page)[0] == 1

    page.get_by_label("Find a player by id").fill("player-0042")
    page.keyboard.press("Enter")
    page.wait_for_url("**player=player-0042")
    rows = page.locator("table.board tbody tr")
    assert rows.count() == 1 and "player-0042" in rows.inner_text()
    rows.get_by_role("link", name="player-0042").click()
    assert page.locator("h1").inner_text() == "player-0042"
    assert watched.errors == []


def test_the_chart_of_a_long_career_has_every_point(
    watched: Watched, base_url: str, demo: Demo
) -> None:
    assert demo.veteran_matches >= VETERAN_MATCHES
    page = watched.page
    page.goto(f"{base_url}/console/ladders/{LADDER}/players/{VETERAN}")
    assert _drawn(page, "#trajectory") == demo.veteran_matches + 1
    # The page still answers: its matches page on.
    page.get_by_role("link", name="Next page").click()
    assert page.locator("#matches-caption").is_visible()
    assert watched.errors == []


def test_a_phone_reads_the_leaderboard(browser: Browser, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        page.goto(f"{base_url}/console/ladders/{LADDER}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390  # the table scrolls inside its box, not the page
        assert page.locator(".scroll").first.evaluate("e => e.scrollWidth > e.clientWidth")
    finally:
        context.close()


def test_a_required_key_is_asked_once(
    browser: Browser, demo: Demo, tmp_path_factory: pytest.TempPathFactory
) -> None:
    log: Path = tmp_path_factory.mktemp("logs") / "keyed.log"
    with served(demo.url, require_read_key=True, log=log) as base:
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(f"{base}/console/ladders/{LADDER}")
            assert page.locator("h1").inner_text() == "Sign in"
            page.get_by_label("API key").fill(demo.key)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"**/console/ladders/{LADDER}")
            assert _ranks(page)[:3] == [1, 2, 3]
            page.goto(f"{base}/console/ladders/{LADDER}/players/{VETERAN}")
            assert _drawn(page, "#trajectory") > 1  # the chart's read carries the cookie
            page.get_by_role("button", name="Sign out").click()
            page.goto(f"{base}/console")
            assert page.locator("h1").inner_text() == "Sign in"
        finally:
            context.close()
