"""The documentation site works where it lands: opened from ``site/`` as files.

A newcomer opens ``site/index.html`` from the file manager, not through a web server.
Every navigation link must then open a page (not the browser's listing of a directory),
search must run without a server, and the API reference must show what a caller gets.
The site is built here as ``make docs`` builds it, and read by headless Chromium
(Debian's ``chromium``, installed for ``make test`` by scripts/ensure-system-deps.sh).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAV_LINK = re.compile(r'<a[^>]*class="md-nav__link[^"]*"[^>]*>|<a[^>]*href=[^>]*md-nav__link')
HREF = re.compile(r'href="([^"]*)"')


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
        capture_output=True,
        timeout=300,
    )
    yield out


def rendered(page: Path, *flags: str, settle_ms: int = 3000) -> str:
    """The page's DOM after Chromium loaded it from file:// and ran its scripts.

    Headless Chromium with a virtual-time budget now and then never exits (about one run
    in six of the harness below, on a loaded machine; the page itself is static). That is
    the browser's hang, not the site's: such a run is killed, with every process Chromium
    started, and tried again, at most three times in all."""
    chromium = shutil.which("chromium")
    assert chromium is not None, "chromium is missing: scripts/ensure-system-deps.sh chromium"
    command = [
        chromium,
        "--headless",
        "--no-sandbox",  # as root in a container
        "--disable-gpu",
        f"--virtual-time-budget={settle_ms}",  # let the page's scripts settle
        *flags,
        "--dump-dom",
        page.as_uri(),
    ]
    for _attempt in range(3):
        browser = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its renderers too, for the kill below
        )
        try:
            out, _ = browser.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(browser.pid, signal.SIGKILL)
            browser.communicate()
            continue
        assert browser.returncode == 0, f"chromium exited with {browser.returncode}"
        return out
    raise AssertionError("headless Chromium hung three times in a row (40 s each)")


def nav_targets(dom: str) -> set[str]:
    links = set()
    for tag in NAV_LINK.findall(dom):
        href = HREF.search(tag)
        if href and not href.group(1).startswith("#"):
            links.add(unescape(href.group(1)).split("#")[0])
    return links


@pytest.mark.parametrize("start", ["index.html", "reference/zklocks.html"])
def test_every_navigation_link_opens_a_page_from_file_urls(site: Path, start: str) -> None:
    page = site / start
    targets = nav_targets(rendered(page))
    assert len(targets) >= 15, f"the navigation of {start} lists only {sorted(targets)}"
    for target in targets:
        opened = (page.parent / target).resolve()
        assert opened.is_file() and opened.suffix == ".html", (
            f"{start} links to {target!r}: from file:// that is {opened}, "
            + ("a directory listing" if opened.is_dir() else "not a page")
        )


def test_a_guide_page_opens_and_links_back(site: Path) -> None:
    dom = rendered(site / "locks.html")
    assert "Index of" not in dom
    assert re.search(r"<h1[^>]*>The locks", dom)
    assert "index.html" in nav_targets(dom)


def test_search_runs_without_a_server(site: Path) -> None:
    """Material's search runs in a Web Worker, which file:// refuses; the offline plugin
    loads a shim that runs it in an iframe instead, with the index as a script beside the
    pages. (Typing a query is not driven here: ``--dump-dom`` cannot type.)"""
    assert (site / "search" / "search_index.js").is_file()
    dom = rendered(site / "index.html")
    assert 'data-md-component="search"' in dom
    assert "iframe-worker" in dom, "search would need a server (no offline worker shim)"


def test_the_reference_shows_what_a_caller_gets(site: Path) -> None:
    text = re.sub(
        r"\s+",
        " ",
        unescape(re.sub(r"<[^>]+>", "", (site / "reference" / "zklocks.html").read_text())),
    )
    assert not re.search(r"\b(LockT|ReadWriteT)\b", text), "a private TypeVar is shown"
    assert "Client( hosts: str" in text  # the constructor's signature, at the class
    assert re.search(r" lock\( path: str, .*?\) -> Lock ", text)
    assert re.search(r" lock\( path: str, .*?\) -> AsyncLock ", text)
    assert text.count("@overload") == 0


# Loads each page in a 1280 px frame (the width the newcomer's screenshots had) and
# reports code that overflows its box (clipped) and identifiers in tables that the layout
# broke across lines. Reading the frame needs --allow-file-access-from-files.
MEASURE = """<!doctype html><html><body>
<iframe id="page" style="width:1280px;height:1600px;border:0"></iframe>
<pre id="report">pending</pre>
<script>
const pages = PAGES, report = {};
const frame = document.getElementById("page");
frame.addEventListener("load", () => {
  const doc = frame.contentDocument, name = pages[Object.keys(report).length];
  report[name] = {
    clipped: [...doc.querySelectorAll(".md-typeset pre > code")]
      .filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.slice(0, 60)),
    broken: [...doc.querySelectorAll(".md-typeset table code")]
      .filter(c => c.getClientRects().length > 1).map(c => c.textContent),
  };
  const next = pages[Object.keys(report).length];
  if (next) frame.src = next;
  else document.getElementById("report").textContent = JSON.stringify(report);
});
frame.src = pages[0];
</script></body></html>"""


@pytest.mark.timeout(150)  # room for a retried Chromium hang (see rendered)
def test_code_is_not_clipped_and_table_identifiers_are_not_broken(site: Path) -> None:
    pages = sorted(p.name for p in site.glob("*.html") if p.name != "404.html")
    harness = site / "measure.html"
    harness.write_text(MEASURE.replace("PAGES", json.dumps(pages)))
    dom = rendered(harness, "--allow-file-access-from-files", settle_ms=5000)
    found = re.search(r'<pre id="report">([^<]*)</pre>', dom)
    assert found is not None and found.group(1) != "pending", "the pages did not all load"
    report = json.loads(unescape(found.group(1)))
    assert sorted(report) == pages
    problems = {page: seen for page, seen in report.items() if seen["clipped"] or seen["broken"]}
    assert problems == {}
