"""The documentation site builds without a warning, and every page opens in a real browser.

The site is built with ``make docs``' command (Sphinx, ``-W``) into a temporary folder and
served by a private ``http.server`` on a free 127.0.0.1 port. Then:

- every internal link of every page (``href`` and ``src``) must reach a file of the build, and
  a ``#fragment`` an element of that page with that id;
- Debian's Chromium, headless, loads a harness page that opens each page of the site in turn
  in a same-origin frame and reports what it rendered: the page's title heading, its article
  text, and whether each image decoded (``naturalWidth > 0``); the test reads the report from
  ``--dump-dom``. The server records every request the browser makes, so a stylesheet, script,
  font or picture that answers 404 fails the test too.

``DOCS_SCREENSHOTS=1`` also writes screenshots of the getting-started and evaluator pages to
``build/docs-screenshots/`` (ignored by git), to look at after a local run.
"""

from __future__ import annotations

import functools
import html
import html.parser
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = ROOT / "build" / "docs-screenshots"
# the flags of a browser that starts fast and talks to nothing but the test's server
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                  "--disable-dev-shm-usage"]

HARNESS = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>docs harness</title></head>
<body><pre id="report">pending</pre>
<script>
const pages = %s;
function visit(url) {
  return new Promise((resolve) => {
    const frame = document.createElement("iframe");
    frame.style.width = "1200px"; frame.style.height = "900px";
    const timer = setTimeout(() => resolve({url, error: "timeout"}), 20000);
    frame.onload = () => {
      clearTimeout(timer);
      const doc = frame.contentDocument;
      const h1 = doc.querySelector("main h1, article h1, h1");
      const article = doc.querySelector("article") || doc.body;
      const images = Array.from(doc.images).map((img) => ({
        src: img.getAttribute("src"), ok: img.complete && img.naturalWidth > 0}));
      resolve({url, title: h1 ? h1.textContent.trim() : "",
               text: article ? article.innerText.trim().length : 0,
               theme: !!doc.querySelector(".bd-main, .bd-content"), images});
      frame.remove();
    };
    frame.src = url;
    document.body.appendChild(frame);
  });
}
(async () => {
  const results = [];
  for (const url of pages) { results.push(await visit(url)); }
  document.getElementById("report").textContent = JSON.stringify(results);
})();
</script></body></html>
"""


class _Links(html.parser.HTMLParser):
    """The ids of a page and its internal ``href``/``src`` targets."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            elif name in ("href", "src") and value:
                self.targets.append(value)


def _internal(target: str) -> bool:
    scheme = urllib.parse.urlsplit(target).scheme
    return not scheme and not target.startswith("//")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built as ``make docs`` builds it (``-W``: any warning fails)."""
    out = tmp_path_factory.mktemp("docs")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return out / "html"


@pytest.fixture(scope="module")
def server(site):
    """A private HTTP server of the site on a free 127.0.0.1 port; records every request."""
    requests: list[tuple[str, int]] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_request(self, code="-", size="-"):
            requests.append((self.path, int(code) if str(code).isdigit() else 0))

        def log_message(self, *args):  # quiet: the test reads `requests`
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=site))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def _pages(site: Path) -> list[Path]:
    """Every page of the build (Sphinx's search and index pages included)."""
    return sorted(p for p in site.rglob("*.html")
                  if not p.relative_to(site).parts[0].startswith("_"))


def _source_pages(site: Path) -> list[Path]:
    """The pages written in docs/ (guides, reference), which must show real content."""
    names = {p.stem for p in (ROOT / "docs").glob("*.md")}
    return [p for p in _pages(site) if p.relative_to(site).with_suffix("").as_posix() in names]


def _chromium(args: list[str], profile: Path, timeout: float = 120) -> str:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: apt-get install -y chromium (.ci/run installs it)")
    proc = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_site_has_every_guide_and_every_docs_page(site):
    names = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {p.relative_to(site).with_suffix("").as_posix() for p in _pages(site)}
    assert names <= built, f"pages not built: {sorted(names - built)}"
    for guide in ("getting-started", "evaluator", "monitor", "configuration", "alerting",
                  "statistics", "metrics", "spark-and-rollups", "reliability", "api",
                  "benchmarks"):
        assert guide in built
    index = (site / "index.html").read_text(encoding="utf-8")
    for name in names - {"index"}:  # every page is reachable from the navigation
        assert f'href="{name}.html"' in index, name


def test_every_internal_link_and_anchor_resolves(site):
    parsed: dict[Path, _Links] = {}
    for page in site.rglob("*.html"):
        links = _Links()
        links.feed(page.read_text(encoding="utf-8"))
        parsed[page] = links
    broken = []
    for page in _pages(site):
        for target in parsed[page].targets:
            if not _internal(target) or target.startswith(("mailto:", "javascript:")):
                continue
            split = urllib.parse.urlsplit(target)
            path = (page.parent / urllib.parse.unquote(split.path)).resolve() \
                if split.path else page
            if path.is_dir():
                path = path / "index.html"
            if not path.exists():
                broken.append(f"{page.relative_to(site)}: {target} (no such file)")
            elif split.fragment and path.suffix == ".html" and path in parsed \
                    and urllib.parse.unquote(split.fragment) not in parsed[path].ids:
                broken.append(f"{page.relative_to(site)}: {target} (no such anchor)")
    assert not broken, "\n".join(broken)


def test_every_page_renders_in_chromium(site, server, tmp_path):
    base, requests = server
    pages = [p.relative_to(site).as_posix() for p in _source_pages(site)]
    (site / "_harness.html").write_text(HARNESS % json.dumps(pages), encoding="utf-8")
    dom = _chromium(["--virtual-time-budget=120000", "--run-all-compositor-stages-before-draw",
                     "--dump-dom", f"{base}/_harness.html"], tmp_path / "profile", timeout=240)
    start = dom.index('<pre id="report">') + len('<pre id="report">')
    report = dom[start:dom.index("</pre>", start)]
    assert report != "pending", "the harness did not finish within the time budget"
    results = json.loads(html.unescape(report))
    assert [r["url"] for r in results] == pages
    problems = []
    for r in results:
        if r.get("error"):
            problems.append(f"{r['url']}: {r['error']}")
            continue
        if not r["title"] or r["text"] < 200 or not r["theme"]:
            problems.append(f"{r['url']}: not rendered (title {r['title']!r}, "
                            f"{r['text']} characters, theme {r['theme']})")
        problems += [f"{r['url']}: image {img['src']} did not load"
                     for img in r["images"] if not img["ok"]]
    # the browser asks for /favicon.ico by itself; every other request comes from a page
    missing = sorted({path for path, code in requests if code >= 400} - {"/favicon.ico"})
    problems += [f"the browser requested {path}: not found" for path in missing]
    assert not problems, "\n".join(problems)
    # the metric pictures are on the metrics page, and decoded
    metrics = next(r for r in results if r["url"] == "metrics.html")
    assert sum(img["ok"] for img in metrics["images"]) >= 3
    if os.environ.get("DOCS_SCREENSHOTS"):
        _screenshots(base, tmp_path)


def _screenshots(base: str, tmp_path: Path) -> None:
    """The getting-started and evaluator pages as PNGs in build/docs-screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for page in ("getting-started", "evaluator"):
        target = SCREENSHOTS / f"{page}.png"
        target.unlink(missing_ok=True)
        _chromium(["--window-size=1280,2400", f"--screenshot={target}",
                   f"{base}/{page}.html"], tmp_path / f"profile-{page}")
        assert target.stat().st_size > 10_000
