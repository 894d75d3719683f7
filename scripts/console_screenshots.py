"""Screenshots of the console's pages: ``.venv/bin/python scripts/console_screenshots.py OUT``.

Seeds the browser tests' demo database (``tests/console/demo.py``: simulated duels and
races recorded through the API) in a scratch folder, serves it with uvicorn, and saves a
PNG of each page into the folder ``OUT``, at a desktop width and at a phone's. Needs
Chromium on the PATH and the dev dependencies (Playwright). docs/images/ holds its output.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.console.demo import LADDER, VETERAN, seed, served  # noqa: E402

#: (file name, path, the chart to wait for) at the desktop width.
DESKTOP = (
    ("console-ladders", "/console", None),
    ("console-leaderboard", f"/console/ladders/{LADDER}?limit=15", None),
    ("console-player", f"/console/ladders/{LADDER}/players/{VETERAN}?limit=10", "#trajectory"),
    ("console-health", f"/console/ladders/{LADDER}/health", "#draws"),
    ("console-login", "/console/login", None),
)
#: The same at a phone's width.
PHONE = (
    ("console-leaderboard-phone", f"/console/ladders/{LADDER}?limit=10", None),
    ("console-player-phone", f"/console/ladders/{LADDER}/players/{VETERAN}?limit=5", "#trajectory"),
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the PNG files")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium")
    if chromium is None:
        print("no chromium on the PATH (apt-get install chromium)", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        demo = seed(f"sqlite:///{Path(scratch) / 'demo.db'}", matches=6_000)
        with served(demo.url) as base, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            for shots, viewport, mobile in (
                (DESKTOP, {"width": 1280, "height": 800}, False),
                (PHONE, {"width": 390, "height": 844}, True),
            ):
                context = browser.new_context(
                    viewport=viewport, is_mobile=mobile, device_scale_factor=1
                )
                page = context.new_page()
                for name, path, chart in shots:
                    page.goto(base + path)
                    if chart is not None:
                        page.locator(f"{chart}[data-points]").wait_for()
                    target = args.out / f"{name}.png"
                    page.screenshot(path=str(target), full_page=True)
                    print(target)
                context.close()
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
