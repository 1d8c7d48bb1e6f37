"""Real-browser checks (``make test-browser``): headless Chromium, driven by Playwright.

1. JupyterLab on localhost: open a lesson, check that each explorer shows its starting
   figure once before it is run (no saved copy of the widget), run all cells from the Run
   menu, and check that every code cell ran, that only cells tagged ``raises-exception`` show an error, that the
   figures and the typeset math appear, and that an explorer's slider redraws its figure.
   The kernel starts without ipykernel's "susceptible to eavesdropping" warning (the server
   configuration of tools.lab_setup), and Chinese text is drawn in the course's bundled font
   (JupyterLab's custom CSS) on a machine with no Chinese font of its own.
2. The lesson's English copy (``build/en``) as a live RISE slideshow inside JupyterLab:
   slides render and advance, with nothing fetched from the internet.
3. One page of the HTML edition and one exported slide deck, opened from disk with every
   request off this machine refused: the math is typeset, the course font is used, no file
   is missing, and → steps through every slide of the deck.
4. Every slide of every deck (``build/slides``, both languages) fits a 1280 × 720 and a
   1920 × 1080 window, measured once its math is typeset: nothing below the slide's height,
   no slide that grows after it is shown, no code or output line cut at the right, no formula
   in a table broken across lines; and no formula in a table cell of any page of the HTML
   edition (``build/html``, both languages) is broken across lines (``tools.slide_fit``;
   ``python -m tools.slide_fit`` prints the same report).

Screenshots go to ``build/browser/``. Chromium is Debian's (``/usr/bin/chromium``, or the
path in ``$CHROMIUM``); Playwright's own browser download is never used. The lesson is
``$BROWSER_LESSON`` (default ``03_instance_and_group_norm``).
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest

import labserver  # JupyterLab as `make lab` serves it (browser_tests/labserver.py)
from conftest import SHOTS  # shared with the other browser tests (browser_tests/conftest.py)

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
LESSON = os.environ.get("BROWSER_LESSON", "03_instance_and_group_norm")
RUN_ALL_TIMEOUT_S = 300

playwright_api = pytest.importorskip("playwright.sync_api")


def _lesson_notebook() -> dict:
    path = ROOT / "notebooks" / f"{LESSON}.ipynb"
    if not path.exists():
        raise FileNotFoundError(f"BROWSER_LESSON={LESSON!r}: {path} does not exist")
    return json.loads(path.read_text(encoding="utf-8"))


def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


# ------------------------------------------------------------------ fixtures

class Offline:
    """A browser context that refuses every request off this machine and records it, and
    records every request that failed (a missing file, say)."""

    def __init__(self, browser, allow_localhost: bool):
        self.refused: list[str] = []
        self.failed: list[str] = []
        self.context = browser.new_context(viewport={"width": 1280, "height": 800},
                                           device_scale_factor=1)

        def route(r):
            url = r.request.url
            local = url.startswith(("file://", "data:", "blob:")) or (
                allow_localhost and url.startswith(("http://127.0.0.1:", "ws://127.0.0.1:")))
            if local:
                r.continue_()
            else:
                self.refused.append(url)
                r.abort()

        self.context.route("**/*", route)

    def page(self):
        page = self.context.new_page()
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        return page

    def assert_clean(self):
        assert not self.refused, f"requests off this machine: {self.refused}"
        missing = [f for f in self.failed if not f.startswith("http://127.0.0.1")]
        assert not missing, f"requests that failed: {missing}"


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 with a random token, rendering every cell (no windowing),
    serving a copy of the lesson (and the images it shows), so that nothing it saves
    touches the repository."""
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "course"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / f"{LESSON}.ipynb", root / "notebooks")
    # trusted, as tools.lab_setup makes the lessons (a trusted notebook draws saved widgets)
    import nbformat
    from nbformat.sign import NotebookNotary

    (tmp / "data").mkdir()
    lesson_copy = root / "notebooks" / f"{LESSON}.ipynb"
    NotebookNotary(data_dir=str(tmp / "data")).sign(nbformat.read(lesson_copy, as_version=4))
    shutil.copytree(ROOT / "images", root / "images")
    english = BUILD / "en" / f"{LESSON}.ipynb"  # the single-language copy, for RISE
    if not english.exists():
        pytest.fail(f"{english} is missing: run `make export` first")
    (root / "en").mkdir()
    shutil.copy(english, root / "en")
    try:
        with labserver.jupyterlab(tmp, root) as (base, token):
            yield base, token, root
    finally:
        if (tmp / "jupyterlab.log").exists():
            shutil.copy(tmp / "jupyterlab.log", SHOTS / "jupyterlab.log")


# ------------------------------------------------------------------ JupyterLab

def test_lesson_runs_in_jupyterlab(browser, jupyterlab):
    base, token, lab_root = jupyterlab
    nb = _lesson_notebook()
    code = _code_cells(nb)
    must_raise = [i for i, c in enumerate(code) if "raises-exception" in c["metadata"].get("tags", [])]
    explorers = [i for i, c in enumerate(code)
                 if re.search(r"\b\w+_explorer\(", "".join(c["source"]))]
    # (an explorer's saved picture is drawn inside its widget once it runs)
    committed_pngs = sum(1 for i, c in enumerate(code) if i not in explorers
                         for o in c.get("outputs", []) if "image/png" in o.get("data", {}))

    offline = Offline(browser, allow_localhost=True)
    page = offline.page()
    page.goto(f"{base}/lab/tree/notebooks/{LESSON}.ipynb?token={token}")
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    try:  # every cell is in the page (windowing is off in the settings above)
        page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-CodeCell').length === {len(code)}",
                               timeout=90_000)
    finally:
        page.screenshot(path=str(SHOTS / f"lab_{LESSON}_opened.png"))
    labserver.wait_kernel_idle(page, 120)

    # before it is run, an explorer shows its starting figure once (or, where the cell above
    # holds the figure, its one line of text), not a copy of the widget with a slider that
    # moves nothing and "disconnected" marks
    page.wait_for_timeout(3000)  # time for JupyterLab to draw any saved widget
    for n, i in enumerate(explorers):
        cell = cells.nth(i)
        cell.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"lab_{LESSON}_explorer_before_run_{n}.png"))
        pictures = cell.locator(".jp-OutputArea-output img").count()
        widgets = cell.locator(".jupyter-widgets, .widget-slider, .jupyter-widgets-disconnected").count()
        assert widgets == 0 and pictures <= 1, (
            f"explorer cell {i} before it is run: {pictures} pictures, {widgets} widget parts")
        assert pictures == 1 or "needs a running kernel" in cell.locator(".jp-OutputArea").inner_text()

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()

    prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt")
    deadline = time.monotonic() + RUN_ALL_TIMEOUT_S
    quiet_since = None
    while True:  # until nothing is running or queued for 3 s
        busy = "[*]:" in [t.strip() for t in prompts.all_inner_texts()] or not page.locator(
            ".jp-Notebook-ExecutionIndicator[data-status='idle']").count()
        quiet_since = None if busy else (quiet_since or time.monotonic())
        if quiet_since and time.monotonic() - quiet_since > 3:
            break
        assert time.monotonic() < deadline, f"still running after {RUN_ALL_TIMEOUT_S} s"
        page.wait_for_timeout(500)
    # save (the copy in a temporary folder) and read back what ran: every cell, in order
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    page.wait_for_timeout(1500)
    saved = json.loads((lab_root / "notebooks" / f"{LESSON}.ipynb").read_text(encoding="utf-8"))
    counts = [c.get("execution_count") for c in _code_cells(saved)]
    assert counts == list(range(1, len(code) + 1)), f"execution counts after Run All: {counts}"
    page.screenshot(path=str(SHOTS / f"lab_{LESSON}_top.png"))

    # errors: exactly the cells written to raise
    stderr = "[data-mime-type='application/vnd.jupyter.stderr']"
    shown = [i for i in range(len(code)) if cells.nth(i).locator(stderr).count()]
    assert shown == must_raise, (f"cells showing an error or warning: {shown}; "
                                 f"cells tagged raises-exception: {must_raise}")

    # figures: every committed figure is drawn again, each a real image
    imgs = page.locator(".jp-OutputArea-output[data-mime-type='image/png'] img")
    assert imgs.count() >= committed_pngs > 0
    widths = imgs.evaluate_all("els => els.map(e => e.naturalWidth)")
    assert min(widths) > 100, f"an output image did not load: widths {widths}"
    imgs.first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"lab_{LESSON}_figure.png"))

    # math: typeset by JupyterLab's MathJax, with no TeX errors
    page.wait_for_function("document.querySelectorAll('.jp-MarkdownCell mjx-container').length > 0",
                           timeout=30_000)
    assert page.locator("mjx-merror").count() == 0, "a formula failed to typeset"

    # an explorer: its slider moves and its figure is redrawn by the kernel
    if explorers:
        cell = cells.nth(explorers[0])
        widget_img = cell.locator(".jupyter-widgets img").first
        widget_img.wait_for(timeout=30_000)
        # run, it shows its figure once: inside the widget
        assert cell.locator(".jp-OutputArea-output img").count() == 1
        before = widget_img.get_attribute("src")
        handle = cell.locator(".widget-slider .noUi-handle, .widget-slider input").first
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function("([el, src]) => el.getAttribute('src') !== src",
                               arg=[widget_img.element_handle(), before], timeout=30_000)
        cell.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"lab_{LESSON}_explorer.png"))

    offline.assert_clean()
    offline.context.close()
    # the kernel ran over an encrypted connection: ipykernel did not warn at its start
    log = (lab_root.parent / "jupyterlab.log").read_text(encoding="utf-8")
    assert "Starting the kernel" in log or "Kernel started" in log, log[-2000:]
    assert "eavesdropping" not in log, [line for line in log.splitlines() if "eavesdropping" in line]


def _system_has_chinese_font() -> bool:
    fc = shutil.which("fc-list")
    return bool(fc and subprocess.run([fc, ":lang=zh", "family"], capture_output=True,
                                      text=True).stdout.strip())


def test_chinese_cells_use_the_course_font_in_jupyterlab(browser, jupyterlab):
    """JupyterLab loads the course's custom.css (tools.lab_setup), so Chinese text has a font
    even on a machine without a Chinese font of its own (``fc-list :lang=zh`` empty): then
    the course's bundled font draws it. The screenshot shows a Chinese cell."""
    base, token, _ = jupyterlab
    offline = Offline(browser, allow_localhost=True)
    page = offline.page()
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{base}/lab/tree/notebooks/{LESSON}.ipynb?token={token}")
    page.wait_for_selector(".jp-MarkdownCell .jp-RenderedMarkdown", timeout=90_000)
    assert page.locator("link[href$='custom/custom.css']").count() == 1, "custom.css not loaded"
    cell = page.locator(".jp-MarkdownCell .jp-RenderedMarkdown p", has_text=re.compile("[\u4e00-\u9fff]{4}")).first
    cell.scroll_into_view_if_needed()
    page.wait_for_function("() => document.fonts.check('16px \"Course Noto Sans CJK SC\"', '中文')",
                           timeout=30_000)
    page.evaluate("document.fonts.ready.then(() => true)")
    page.wait_for_timeout(300)
    system_font = _system_has_chinese_font()
    page.screenshot(path=str(SHOTS / f"lab_{LESSON}_chinese{'' if system_font else '_no_system_font'}.png"))
    offline.assert_clean()
    cell.evaluate("el => el.id = 'course-font-probe'")
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "#course-font-probe"})["nodeId"]
    fonts = {f["familyName"]: f["glyphCount"] for f in cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]}
    if not system_font:
        assert fonts.get("Course Noto Sans CJK SC", 0) > 0, f"Chinese drawn with {fonts}"
    offline.context.close()


def test_rise_slideshow_in_jupyterlab(browser, jupyterlab):
    base, token, _ = jupyterlab
    offline = Offline(browser, allow_localhost=True)
    page = offline.page()
    page.goto(f"{base}/rise/en/{LESSON}.ipynb?token={token}")
    page.wait_for_selector(".reveal .slides section", timeout=90_000)
    page.wait_for_selector(".reveal .slides section.present", timeout=30_000)
    first = page.locator(".reveal .slides section.present").first.inner_text()
    page.screenshot(path=str(SHOTS / f"rise_{LESSON}_1.png"))
    page.locator(".reveal").click()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("t => document.querySelector('.reveal .slides section.present')"
                           ".innerText !== t", arg=first, timeout=15_000)
    page.screenshot(path=str(SHOTS / f"rise_{LESSON}_2.png"))
    offline.assert_clean()
    offline.context.close()


# ------------------------------------------------------------------ exported pages, offline

def _exported(path: pathlib.Path) -> str:
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make export slides` first")
    return path.as_uri()


def _wait_mathjax2(page) -> None:
    page.wait_for_function("window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 "
                           "&& document.querySelectorAll('.MathJax_CHTML').length > 0",
                           timeout=60_000)
    page.evaluate("document.fonts.ready.then(() => true)")


def _uses_course_font(page, selector: str) -> bool:
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return any(f["familyName"] == "Course Noto Sans CJK SC" for f in fonts)


def test_html_page_offline(browser):
    offline = Offline(browser, allow_localhost=False)
    page = offline.page()
    page.goto(_exported(BUILD / "html" / "zh" / f"{LESSON}.html"))
    _wait_mathjax2(page)
    assert page.locator(".MathJax_Error, .mjx-merror").count() == 0
    assert page.locator("html").get_attribute("lang") == "zh"
    assert page.locator(".jp-OutputArea-output img").count() > 0
    assert page.locator(".course-nav a[hreflang='en']").count() > 0
    page.screenshot(path=str(SHOTS / f"html_zh_{LESSON}.png"))
    index = offline.page()
    index.goto(_exported(BUILD / "html" / "index.html"))
    lessons = len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    assert index.locator("table.course-pages tbody tr").count() == lessons
    assert index.locator("table").count() == 3  # course map in English, in Chinese, and the pages
    index.screenshot(path=str(SHOTS / "html_index.png"))
    offline.assert_clean()
    # last: DevTools' CSS inspection itself makes a request that the check above would see
    assert _uses_course_font(page, ".jp-MarkdownCell h1"), "the heading is not in the course font"
    offline.context.close()


def test_slides_offline(browser):
    offline = Offline(browser, allow_localhost=False)
    page = offline.page()
    page.goto(_exported(BUILD / "slides" / "en" / f"{LESSON}.slides.html"))
    page.wait_for_selector(".reveal.ready .slide-number", timeout=60_000)
    _wait_mathjax2(page)
    assert page.locator(".MathJax_Error, .mjx-merror").count() == 0
    first = page.locator(".slide-number").inner_text()
    assert re.fullmatch(r"1 / \d+", first.strip()), first
    total = int(first.split("/")[1])
    assert total > 5
    page.screenshot(path=str(SHOTS / f"slides_en_{LESSON}_1.png"))
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('.slide-number').innerText.trim().startsWith('2 ')",
                           timeout=10_000)
    # jump to the first slide after the second whose content holds typeset math
    with_math = page.evaluate("""() => {
        const tops = [...document.querySelectorAll('.reveal .slides > section')];
        return tops.findIndex((s, i) => i >= 2 && s.querySelector('.MathJax_CHTML'));
    }""")
    assert with_math >= 2, "no slide holds typeset math"
    # → steps through every slide, sub-slides and fragments included, to the last one
    steps = total + page.locator(".reveal .slides .fragment").count()
    for _ in range(steps):
        if page.locator(".slide-number").inner_text().strip() == f"{total} / {total}":
            break
        page.keyboard.press("ArrowRight")
    assert page.locator(".slide-number").inner_text().strip() == f"{total} / {total}"
    page.evaluate(f"location.hash = '#/{with_math}'")
    page.wait_for_function(f"() => document.querySelectorAll('.reveal .slides > section')[{with_math}]"
                           ".classList.contains('present')", timeout=10_000)
    page.wait_for_timeout(500)
    page.screenshot(path=str(SHOTS / f"slides_en_{LESSON}_math.png"))
    offline.assert_clean()
    offline.context.close()


# ------------------------------------------------------------------ every slide fits

def test_every_slide_fits_the_screen(browser):
    """Each deck of each language is loaded once (by two Chromiums side by side,
    tools.slide_fit.run_jobs) and all its slides are shown at once and measured in one script
    (tools.slide_fit.MEASURE_JS) at 1280 x 720, once they have settled (their math typeset);
    then, the page resized to 1920 x 1080, the slides that came within
    tools.slide_fit.NEAR_PX of a problem are measured again (the next test shows why the
    others need not be). No slide may be taller than the deck, grow after it is shown, or hold a
    formula broken across lines in a table. Every page of the HTML edition, in both languages, is
    opened once: no formula in a table cell may be broken across lines (tools.slide_fit.HTML_JS)."""
    from tools import slide_fit
    from tools.course import lessons

    decks = slide_fit.deck_paths()
    expected = {(lang, p.stem) for lang in slide_fit.LANGS for p in lessons()}
    found = {(lang, p.name.removesuffix(".slides.html")) for lang, p in decks}
    missing = sorted(expected - found)
    assert not missing, f"decks missing (run make slides): {missing}"
    stale = [str(p) for lang, p in decks
             if p.stat().st_mtime < (ROOT / "notebooks" / p.name.replace(".slides.html", ".ipynb")).stat().st_mtime]
    assert not stale, f"decks older than their notebooks (run make slides): {stale}"
    pages = slide_fit.page_paths()
    found = {(lang, p.stem) for lang, p in pages}
    missing = sorted(expected - found)
    assert not missing, f"HTML pages missing (run make export): {missing}"
    summaries = []
    # two Chromiums side by side (one per core on a 2-core machine), each with its own thread
    workers = min(2, os.cpu_count() or 1)
    html_lines = slide_fit.measure_html(None, pages, log=summaries.append, workers=workers)
    reports = slide_fit.measure(None, decks, workers=workers)
    lines = html_lines + [line for r in reports for line in r.offender_lines()]
    (SHOTS / "slide_fit.txt").write_text(
        "\n".join([s for s in summaries if not s.startswith("  ")] + [r.summary() for r in reports])
        + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    assert len(reports) == len(decks) * len(slide_fit.WINDOWS)
    first = [r for r in reports if r.window == slide_fit.WINDOWS[0]]
    assert len(first) == len(decks) and all(r.slides and r.of is None for r in first)
    for r, again in zip(first, [r for r in reports if r.window != slide_fit.WINDOWS[0]]):
        assert [(s["h"], s["v"]) for s in again.slides] == [
            tuple(map(int, hv.split("/"))) for hv in slide_fit.near_edge(r)]
    assert not lines, (f"{len(lines)} problems (HTML pages: formulas broken in table cells; decks: "
                       f"slide h/v, window):\n" + "\n".join(lines))


def test_a_resized_deck_measures_as_one_loaded_at_that_size(browser):
    """tools.slide_fit loads each deck once and measures the second window size by resizing
    the page: on a deck, every slide's height, cell heights and problems are the same as on a
    page that loaded the deck at that size. The deck's own slidechanged handler is switched
    off while a deck is measured and is back afterwards, as are reveal.js's controls, progress
    bar, slide number and URL, and every slide's inline display (the slide fit shows all the
    slides at once). Shown at once, every slide measures as when the deck is walked slide by
    slide, as a presenter goes through it (``walk``), growth after it is shown included. And a
    slide measures the same in both
    window sizes but for the rounding of the scaled rectangles (its margin to a problem within
    a tenth of tools.slide_fit.NEAR_PX, its height within the 1 px of rounding to whole px,
    its problems the same), which is why the slide fit measures again in the second size only
    the slides near a problem; those it names measure as when the whole deck is measured."""
    from tools import slide_fit

    (lang, path), = slide_fit.deck_paths(["zh"], ["14"])
    small, large = slide_fit.WINDOWS
    fresh_context = slide_fit._context(browser, large)
    resized_context = slide_fit._context(browser, small)
    try:
        fresh = slide_fit.measure_page(fresh_context.new_page(), lang, path, large, growth=False)
        page = resized_context.new_page()
        slide_fit.open_deck(page, path)
        displays = "() => [...document.querySelectorAll('.reveal .slides section')].map(s => s.style.display)"
        before = page.evaluate(displays)
        first = slide_fit.measure_page(page, lang, path, small, growth=False, load=False)
        assert page.evaluate(displays) == before and before.count("block") < len(before) / 2
        walked = slide_fit.measure_page(page, lang, path, small, load=False, walk=True)
        at_once = slide_fit.measure_page(page, lang, path, small, load=False)
        resized = slide_fit.measure_page(page, lang, path, large, growth=False, load=False)
        assert page.viewport_size == {"width": large[0], "height": large[1]}
        assert page.evaluate("window.courseSlideChanged.length") == 1
        # the controls, progress bar, slide number and URL, off while walking, are back
        assert page.evaluate("""() => {
            const mods = require.s.contexts._.defined;
            const R = window.Reveal || mods[Object.keys(mods).find(k => k.endsWith('dist/reveal.js'))];
            const c = R.getConfig();
            return [c.controls, c.progress, c.slideNumber, c.hash, c.history];
        }""") == [True, True, "c/t", False, True]
        some = [f"{s['h']}/{s['v']}" for s in first.slides[::9]]
        again = slide_fit.measure_page(page, lang, path, large, growth=False, load=False,
                                       only=some)
    finally:
        fresh_context.close()
        resized_context.close()
    assert len(fresh.slides) == len(first.slides) > 20
    assert at_once.slides == walked.slides
    assert at_once.slides == first.slides  # (none grows after it is shown)
    assert resized.slides == fresh.slides
    assert again.of == len(first.slides) and len(again.slides) == len(some) > 2
    assert again.slides == [s for s in resized.slides if f"{s['h']}/{s['v']}" in some]
    for small_slide, large_slide in zip(first.slides, fresh.slides):
        assert (small_slide["h"], small_slide["v"]) == (large_slide["h"], large_slide["v"])
        assert abs(small_slide["height"] - large_slide["height"]) <= slide_fit.TOLERANCE_PX
        assert abs(small_slide["margin"] - large_slide["margin"]) < slide_fit.NEAR_PX / 10
        assert small_slide["cells"].keys() == large_slide["cells"].keys()
        assert all(abs(small_slide["cells"][c] - large_slide["cells"][c]) <= slide_fit.TOLERANCE_PX
                   for c in small_slide["cells"])
        assert ([p["what"] for p in small_slide["problems"]]
                == [p["what"] for p in large_slide["problems"]])


# ------------------------------------------------------------------ the reading edition's contents, the speaker view

HEADINGS = "main h2[id], main h3[id]"


def _open(browser, path, width, height):
    offline = Offline(browser, allow_localhost=False)
    offline.context.set_default_timeout(60_000)
    page = offline.page()
    page.set_viewport_size({"width": width, "height": height})
    page.goto(_exported(path))
    page.wait_for_load_state("load")
    return offline, page


def test_contents_column_and_nav_bar_stay_in_view(browser):
    offline, page = _open(browser, BUILD / "html" / "en" / f"{LESSON}.html", 1600, 900)
    side = page.locator(".course-toc-side")
    assert side.is_visible() and not page.locator(".course-toc-menu").is_visible()
    n_headings = page.locator(HEADINGS).count()
    assert n_headings >= 5
    assert side.locator("li").count() == n_headings
    page.evaluate("window.scrollTo(0, document.body.scrollHeight * 0.6)")
    page.wait_for_timeout(500)
    box = side.bounding_box()
    assert 0 <= box["y"] and box["y"] + 40 < 900, box  # still on screen after scrolling
    nav = page.locator("nav.course-nav").first.bounding_box()
    assert abs(nav["y"]) < 2, nav  # the nav bar sits at the top of the window
    current = side.locator("a.current")
    assert current.count() == 1  # the section being read is marked
    page.screenshot(path=str(SHOTS / f"html_contents_wide_{LESSON}.png"))
    offline.assert_clean()
    offline.context.close()


def test_contents_menu_in_the_nav_bar(browser):
    offline, page = _open(browser, BUILD / "html" / "zh" / f"{LESSON}.html", 1280, 800)
    assert not page.locator(".course-toc-side").is_visible()
    page.evaluate("window.scrollTo(0, document.body.scrollHeight * 0.5)")
    menu = page.locator("nav.course-nav").first.locator(".course-toc-menu")
    assert menu.is_visible()
    menu.locator("summary").click()
    entries = menu.locator("li a")
    assert entries.count() == page.locator(HEADINGS).count()
    page.screenshot(path=str(SHOTS / f"html_contents_menu_{LESSON}.png"))
    target = entries.nth(2)
    href = target.get_attribute("href")
    target.click()
    page.wait_for_timeout(500)
    heading = page.locator(f"[id='{href[1:]}']").bounding_box()
    nav = page.locator("nav.course-nav").first.bounding_box()
    assert nav["y"] + nav["height"] <= heading["y"] < 800, (nav, heading)  # not under the bar
    assert not menu.locator("ol").is_visible()  # the menu closed
    offline.assert_clean()
    offline.context.close()


def _sections(lang):
    nb = json.loads((ROOT / "notebooks" / f"{LESSON}.ipynb").read_text(encoding="utf-8"))
    return sum(1 for c in nb["cells"] if c["cell_type"] == "markdown"
               and f"lang-{lang}" in c["metadata"].get("tags", [])
               and "".join(c["source"]).startswith("## "))


@pytest.mark.parametrize("lang, label", [("en", "Time for this section"), ("zh", "本节用时")])
def test_speaker_view_shows_the_sections_notes(browser, lang, label):
    # a plain context: requests of the view's document.write()n window do not pass through
    # Offline's routing (test_slides_offline proves that the decks stay offline)
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(_exported(BUILD / "slides" / lang / f"{LESSON}.slides.html"))
    page.wait_for_selector(".reveal.ready", timeout=60_000)
    # the deck loads reveal.js as a require.js module: fetch the same (initialised) instance
    page.evaluate("""() => new Promise(done => require(["../vendor/reveal.js/dist/reveal.js"],
                                                     R => { window.Reveal = R; done(); }))""")
    with_notes = page.evaluate("""() => Reveal.getSlides()
        .map((s, i) => [i, Reveal.getSlideNotes(s) || ''])
        .filter(([i, n]) => n.trim().length > 0)
        .map(([i, n]) => [i, n])""")
    n_slides = page.evaluate("() => Reveal.getSlides().length")
    assert len(with_notes) == n_slides  # every slide carries notes
    # the section's time line is on each section's heading slide (on each piece of one that the
    # deck cuts in two), not on every slide
    timed = [i for i, notes in with_notes if label in notes]
    assert _sections(lang) <= len(timed) < len(with_notes)
    # go to a section's heading slide and open the speaker view (S)
    index = timed[1]
    page.evaluate(f"() => {{ const s = Reveal.getSlides()[{index}]; "
                  "const i = Reveal.getIndices(s); Reveal.slide(i.h, i.v); }")
    with page.context.expect_page(timeout=30_000) as popup:
        page.keyboard.press("s")
    speaker = popup.value
    speaker.wait_for_function("() => document.querySelector('.speaker-controls-notes') && "
                              "document.querySelector('.speaker-controls-notes').innerText.length > 20",
                              timeout=30_000, polling=250)
    text = speaker.locator(".speaker-controls-notes").inner_text()
    assert label in text
    assert re.search(r"\b\d+\b", text)
    speaker.set_viewport_size({"width": 1280, "height": 720})
    # the notes bring the course's Chinese font with them (tools.speaker_notes.NOTES_STYLE)
    speaker.wait_for_function("() => document.fonts.check('16px \"Course Noto Sans CJK SC\"', '中')",
                              timeout=30_000, polling=250)
    # math: the browser's own MathML, once per formula (MathJax's HTML rendering is hidden)
    assert speaker.evaluate("""() => [...document.querySelectorAll('.speaker-controls-notes .mjx-math')]
        .every(e => getComputedStyle(e).display === 'none')""")
    speaker.wait_for_timeout(800)
    # (the view is a document.write()n window whose document.fonts.ready never settles once
    # the notes' font has loaded, so Playwright's screenshot would wait for ever: ask Chromium)
    cdp = speaker.context.new_cdp_session(speaker)
    shot = cdp.send("Page.captureScreenshot", {"format": "png"})["data"]
    (SHOTS / f"speaker_view_{lang}_{LESSON}.png").write_bytes(base64.b64decode(shot))
    speaker.close()
    context.close()
