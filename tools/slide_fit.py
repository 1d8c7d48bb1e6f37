"""Does every slide of the reveal.js decks fit the screen? Measured in headless Chromium.

Each deck of ``make slides`` (``build/slides/{en,zh}/NN_x.slides.html``) is opened once, in
the first window size, where one script shows all of the deck's slides (``Reveal.getSlides()``)
at once, as reveal.js shows the current one, with the template's scrolling switched off, and
measures each in the deck's own units (the 1240 × 700 slide, whatever the window's scale);
``--walk`` shows each slide in turn instead, as a presenter goes through the deck (the same
reports, several times slower: see ``MEASURE_JS``). Then
the window is resized to each other size (reveal.js lays the deck out again on a resize; a
resized deck measures exactly as one loaded at that size) and the slides that came within
``NEAR_PX`` of a problem, or had one, are measured again: a slide is laid out at the deck's
size whatever the window, so only those could fare differently
(``browser_tests/test_browser.py`` checks both on a whole deck; ``--every-slide`` measures
every slide in every size and prints how far the two sizes' measures differ). What is looked
for:

* **too tall**: the slide's content reaches below the slide's height (it would be cut off);
* **cut at the right**: a code or text-output line (a ``pre`` / ``code``, or any box that
  clips or scrolls) is wider than its box, or content reaches past the slide's right edge;
* **figure shrunk**: a picture is shown narrower than it is stored (one stored pixel per CSS
  px), so its text is smaller than the 22-px body text that the course's figures are drawn
  for (``helpers.plotting.text_problems``);
* **grows after it is shown**: the slide's content is taller once everything on it has
  settled than at the moment it appeared (a formula typeset again, a picture decoded late);
* **formula broken across lines**: a formula in a table cell that MathJax broke into lines.

Every slide is measured when it has settled: after the deck's math is typeset
(``window.courseTypeset``, set by the course's MathJax configuration, then MathJax's queue),
its pictures are decoded, its fonts loaded, and (in the first window, where growth is
looked for) nothing in the slides has changed for ``QUIET_MS`` (where a slide holds math or a
picture: nothing else changes a slide once it is shown). The HTML edition (``build/html``) is checked too (:func:`measure_html`): every
formula in a table cell is whole (not broken across lines) and no table reaches past the
window or is cut off.

    python -m tools.slide_fit                      # every deck, both languages, both windows
    python -m tools.slide_fit --lessons 00 05 --lang zh --windows 1280x720
    python -m tools.slide_fit --every-slide        # every slide in the second window too
    python -m tools.slide_fit --walk               # each slide shown in turn (slower)

prints one line per deck and one per offending slide (language, lesson, slide h/v, the cell,
what overflows and by how many px), and exits 1 if any slide does not fit. Needs the
browser requirements (``make .venv/.installed-browser``) and Debian's Chromium
(``$CHROMIUM``, default ``/usr/bin/chromium``); ``browser_tests/test_browser.py`` runs the
same measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys

from .course import BUILD, lesson_paths

WINDOWS = ((1280, 720), (1920, 1080))
LANGS = ("en", "zh")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]
TOLERANCE_PX = 1  # rounding of the scaled layout
QUIET_MS = 50  # the slides have settled when nothing in them has changed for this long
SETTLE_MAX_MS = 10_000
# Past the first window size, only the slides that came within NEAR_PX of a problem there are
# measured again (a slide's "margin": how far its content's bottom and right edge are from
# the slide's edges plus TOLERANCE_PX, and its figures' shown widths from a shrunk figure).
# reveal.js lays every slide out at the deck's own size (1240 x 700) and scales the slide area
# with a CSS transform, and no style rule on a slide applies at one window size and not at the
# other (the decks' media queries change nothing between 760 and 2138 px wide but the speaker
# notes' font size and the HTML edition's contents column, neither on a slide; the only height
# in vh is the template's scrolling style, which the measurement undoes). The scroll sizes and
# line counts that the other checks read are the layout's and ignore the transform, and the
# rectangles differ between the window sizes by floating-point rounding only: the largest
# difference in a margin that `--every-slide` printed, over the 2210 slides of each language,
# was 0.000069 px (browser_tests/test_browser.py compares a whole deck in both sizes).
NEAR_PX = 0.5

# A formula broken into lines by MathJax 2's automatic line breaking: its output holds a
# stack (mjx-stack) of more than one line (mjx-block), or the browser wraps it (more than one
# line box).
BROKEN_JS = """m => [...m.querySelectorAll('.mjx-stack')].some(
    st => [...st.children].filter(c => c.classList.contains('mjx-block')).length > 1)
  || m.getClientRects().length > 1"""

# The deck template's 'slidechanged' handler (setScrollingSlide) gives a slide taller than the
# deck scrolling styles, which the measurement below undoes on every slide anyway; finding the
# tall slides costs it a jQuery height() of every slide in the stack at each change, most of
# the time a deck's walk takes (lesson 09's English deck walked without the settling waits:
# 11.0 s with the handler, 3.1 s without). This script, run before the deck's own, keeps the
# handlers that are added, so that MEASURE_JS can switch them off while it walks the deck
# (and on again after).
KEEP_SLIDECHANGED_JS = """
(() => {
  const add = EventTarget.prototype.addEventListener;
  window.courseSlideChanged = [];
  EventTarget.prototype.addEventListener = function (type, fn, options) {
    if (type === 'slidechanged') window.courseSlideChanged.push([this, fn, options]);
    return add.call(this, type, fn, options);
  };
})()
"""

# One call measures every slide of the open deck (or those named "h/v" in ``only``), all at
# once: every slide is shown as reveal.js shows the current one (its inline display: block,
# and its stack's for a vertical slide), and reveal.js lays them out together (it centres each
# shown slide). With the deck's transition "none", a slide that is not the current one differs
# from it in opacity and pointer events only, and the slides are positioned absolutely, so
# that none moves another. Going to each slide in turn instead (Reveal.slide, ``walk``) gives
# every slide the same report (``python -m tools.slide_fit --walk``; browser_tests/test_browser.py
# compares the two on a deck) but costs most of its time in reveal.js's own work at each change:
# it loads or unloads every slide of the deck, searching each for media, and lays the deck out
# again. Then: note each slide's content height as it appears, wait until the slides have
# settled (math typeset, pictures decoded, fonts loaded, no change for QUIET_MS), undo the
# template's scrolling styles (none are set while its handler is off), let reveal.js lay them
# out again and walk each slide's elements. Heights and widths are in slide units: client
# rectangles divided by the scale of the slide area.
MEASURE_JS = """
async ([tol, quietMs, settleMax, only, walkDeck]) => {
  // the template loads reveal.js with require.js: take the module it defined
  const mods = require.s.contexts._.defined;
  const Reveal = window.Reveal || mods[Object.keys(mods).find(k => k.endsWith('dist/reveal.js'))];
  const handlers = [...(window.courseSlideChanged || [])];
  for (const [target, fn, options] of handlers) target.removeEventListener('slidechanged', fn, options);
  const cfg = Reveal.getConfig();
  const W = cfg.width, H = cfg.height;
  // the controls, the progress bar, the slide number and the URL lie outside the slides: off
  // while measuring (in a walk, reveal.js searches the whole deck for them at each change)
  const ui = {};
  for (const key of ['controls', 'progress', 'slideNumber', 'hash', 'history']) ui[key] = cfg[key];
  Reveal.configure({controls: false, progress: false, slideNumber: false, hash: false, history: false});
  const area = document.querySelector('.reveal .slides');
  const brokenFormula = __BROKEN__;
  const mathIdle = async () => {
    if (window.courseTypeset) await window.courseTypeset;
    if (window.MathJax && MathJax.Hub) await new Promise(r => MathJax.Hub.Queue(() => r()));
  };
  // until nothing in el has changed for quiet ms (at most max ms)
  const quiet = (el, ms, max) => new Promise(done => {
    let timer;
    const stop = () => { obs.disconnect(); clearTimeout(timer); clearTimeout(cap); done(); };
    const obs = new MutationObserver(() => { clearTimeout(timer); timer = setTimeout(stop, ms); });
    obs.observe(el, {subtree: true, childList: true, attributes: true, characterData: true});
    timer = setTimeout(stop, ms);
    const cap = setTimeout(stop, max);
  });
  // the lowest point of the slide's content (client px)
  const contentBottom = s => {
    let bottom = s.getBoundingClientRect().top;
    const walk = el => {  // as in measure below: an element that clips hides its children's overflow
      const cs = getComputedStyle(el);
      if (cs.display === 'none') return;
      const r = el.getBoundingClientRect();
      if ((r.width > 0 || r.height > 0) && r.bottom > bottom) bottom = r.bottom;
      if (cs.overflowY === 'visible') for (const c of el.children) walk(c);
    };
    walk(s);
    return bottom;
  };
  const CODE = new Set(['PRE', 'CODE']);
  const LATE = '.MathJax_CHTML, .MathJax_Preview, .MathJax_Processing, script[type^="math/"], img, svg image, iframe, video';
  const cellOf = el => {
    const c = el.closest('.jp-Cell');
    return c ? (c.id || '').replace('cell-id=', '') : '';
  };
  const name = el => el.tagName.toLowerCase() + (el.classList.length ? '.' + el.classList[0] : '');
  // the template's scrolling styles (set only by its handler, which is off)
  const undo = s => ['height', 'overflow-y', 'margin-top'].map(p => s.style.removeProperty(p));
  // only typeset math and pictures change a slide after it is shown (the fonts are awaited),
  // so the height as it appears is needed only where growth is looked for (the first window)
  // and the slide holds one of them
  const late = s => quietMs > 0 && s.querySelector(LATE) !== null;
  const heightNow = s => (contentBottom(s) - s.getBoundingClientRect().top)
                         / (area.getBoundingClientRect().width / W);
  // until the slides' math is typeset, their pictures decoded, the fonts loaded and (where
  // growth is looked for) nothing in el has changed for quiet ms; then laid out again
  const settle = async (el, slides, waitQuiet) => {
    await mathIdle();
    await Promise.all(slides.flatMap(s => [...s.querySelectorAll('img')])
                            .map(i => i.decode().catch(() => null)));
    await document.fonts.ready;
    if (waitQuiet) await quiet(el, quietMs, settleMax);
    for (const s of slides) undo(s);
    Reveal.layout();
  };
  // one settled slide's report; shown: its content height as it appeared (or undefined)
  const measure = async (s, h, v, shown) => {
    const box = area.getBoundingClientRect();
    const scale = box.width / W;
    const top = s.getBoundingClientRect().top;
    let bottom = top, right = box.left, rightEl = null;
    const cuts = [];
    const walk = (el, clipX, clipY) => {
      const cs = getComputedStyle(el);
      if (cs.display === 'none') return;
      const r = el.getBoundingClientRect();
      if (r.width > 0 || r.height > 0) {
        if (!clipY && r.bottom > bottom) bottom = r.bottom;
        if (!clipX && r.right > right) { right = r.right; rightEl = el; }
      }
      // MathJax clips parts of a formula on purpose: check the formula as a whole only
      const inMath = !el.classList.contains('MathJax_CHTML') && el.closest('.MathJax_CHTML');
      const ox = cs.overflowX !== 'visible' && !inMath, oy = cs.overflowY !== 'visible' && !inMath;
      if (!inMath && (ox || CODE.has(el.tagName)) && el.scrollWidth > el.clientWidth + tol) {
        cuts.push({what: 'cut at the right', tag: name(el), cell: cellOf(el),
                   px: el.scrollWidth - el.clientWidth});
      }
      if (oy && el.scrollHeight > el.clientHeight + tol && el !== s) {
        cuts.push({what: 'cut at the bottom', tag: name(el), cell: cellOf(el),
                   px: el.scrollHeight - el.clientHeight});
      }
      for (const child of el.children) {
        walk(child, clipX || cs.overflowX !== 'visible', clipY || cs.overflowY !== 'visible');
      }
    };
    walk(s, false, false);
    let figureMargin = Infinity;
    // a figure shown smaller than it is stored: its text (16 pt at 100 dpi, the size of the
    // slide's body text) shrinks with it
    for (const img of s.querySelectorAll('img')) {
      if (!img.complete) await new Promise(r => { img.onload = img.onerror = r; });
      const width = img.getBoundingClientRect().width / scale;
      if (img.naturalWidth) figureMargin = Math.min(figureMargin, width - (img.naturalWidth - tol));
      if (img.naturalWidth && width < img.naturalWidth - tol) {
        cuts.push({what: 'figure shrunk', tag: name(img), cell: cellOf(img),
                   px: Math.round(img.naturalWidth - width),
                   percent: Math.round(100 * width / img.naturalWidth)});
      }
    }
    const height = (bottom - top) / scale;
    const below = (bottom - box.top) / scale - H;
    const past = (right - box.left) / scale - W;
    const problems = cuts;
    for (const m of s.querySelectorAll('td .MathJax_CHTML, th .MathJax_CHTML')) {
      if (brokenFormula(m)) {
        problems.push({what: 'formula broken across lines', tag: name(m), cell: cellOf(m),
                       px: Math.round(m.getBoundingClientRect().height / scale)});
      }
    }
    if (shown !== undefined && height - shown > tol) {
      problems.push({what: 'grows after it is shown', tag: 'section', cell: '',
                     px: Math.round(height - shown), from: Math.round(shown),
                     height: Math.round(height)});
    }
    if (below > tol) {
      problems.unshift({what: 'too tall', tag: 'section', cell: '', px: Math.round(below),
                        height: Math.round(height)});
    }
    if (past > tol) {
      problems.push({what: 'past the right edge', tag: name(rightEl),
                     cell: cellOf(rightEl), px: Math.round(past)});
    }
    const cells = {};
    for (const c of s.querySelectorAll('.jp-Cell')) {
      cells[cellOf(c)] = Math.round(c.getBoundingClientRect().height / scale);
    }
    // how far the measures that depend on the scale of the slide area (the rectangles' sizes,
    // not the layout's whole-pixel scroll sizes or line counts) are from being a problem
    const margin = Math.min(tol - below, tol - past, figureMargin);
    return {h, v, height: Math.round(height), margin: Math.round(1e6 * margin) / 1e6,
            problems, cells};
  };
  const chosen = Reveal.getSlides().map(s => ({s, ...Reveal.getIndices(s)}))
    .filter(({h, v}) => !only || only.includes(`${h}/${v}`));
  const out = [];
  if (walkDeck) {  // each slide in turn, as a presenter goes through the deck
    for (const {s, h, v} of chosen) {
      Reveal.slide(h, v);
      undo(s);
      const shown = late(s) ? heightNow(s) : undefined;
      await settle(s, [s], shown !== undefined);
      out.push(await measure(s, h, v, shown));
    }
  } else {  // every chosen slide shown at once
    const displays = new Map();  // the inline display of each element shown here, put back after
    const show = el => {
      if (!displays.has(el)) displays.set(el, el.style.display);
      el.style.display = 'block';
    };
    for (const {s} of chosen) {
      show(s);
      if (s.parentElement.tagName === 'SECTION') show(s.parentElement);  // a vertical slide's stack
      undo(s);
    }
    Reveal.layout();
    const shown = chosen.map(({s}) => late(s) ? heightNow(s) : undefined);
    await settle(area, chosen.map(({s}) => s), shown.some(x => x !== undefined));
    for (const [i, {s, h, v}] of chosen.entries()) out.push(await measure(s, h, v, shown[i]));
    for (const [el, display] of displays) el.style.display = display;
  }
  Reveal.configure(ui);
  Reveal.slide(0, 0);
  Reveal.layout();
  for (const [target, fn, options] of handlers) target.addEventListener('slidechanged', fn, options);
  window.courseSlideChanged = handlers;  // (adding them again recorded them twice)
  return {width: W, height: H, slides: out, total: Reveal.getSlides().length};
}
"""
MEASURE_JS = MEASURE_JS.replace("__BROKEN__", BROKEN_JS)


@dataclasses.dataclass
class DeckReport:
    lang: str
    deck: str
    window: tuple[int, int]
    slide_size: tuple[int, int]
    slides: list[dict]
    # the deck's number of slides where only some were measured (``slides``), else None
    of: int | None = None

    @property
    def offenders(self) -> list[dict]:
        return [s for s in self.slides if s["problems"]]

    def summary(self) -> str:
        tall = sum(any(p["what"] == "too tall" for p in s["problems"]) for s in self.slides)
        cut = sum(any(p["what"] in ("cut at the right", "cut at the bottom", "past the right edge")
                      for p in s["problems"])
                  for s in self.slides)
        shrunk = sum(any(p["what"] == "figure shrunk" for p in s["problems"]) for s in self.slides)
        grows = sum(any(p["what"] == "grows after it is shown" for p in s["problems"]) for s in self.slides)
        broken = sum(p["what"] == "formula broken across lines" for s in self.slides for p in s["problems"])
        tallest = max((s["height"] for s in self.slides), default=0)
        w, h = self.window
        if self.of is not None and not self.slides:
            return (f"{self.lang} {self.deck:<36} {w}x{h}: none of the {self.of} slides measured "
                    f"again (none within {NEAR_PX} px of a problem in the first window size)")
        count = (f"{len(self.slides):3d} slides" if self.of is None else
                 f"{len(self.slides):3d} of {self.of} slides measured again (those within "
                 f"{NEAR_PX} px of a problem in the first window size)")
        return (f"{self.lang} {self.deck:<36} {w}x{h}: {count}, "
                f"tallest {tallest}/{self.slide_size[1]} px, {tall} too tall, {grows} growing after "
                f"shown, {cut} cut at the right, {shrunk} with a shrunk figure, "
                f"{broken} formulas broken in tables")

    def offender_lines(self) -> list[str]:
        lines = []
        w, h = self.window
        for s in self.offenders:
            for p in s["problems"]:
                where = f" ({p['tag']} in cell {p['cell']})" if p["cell"] else f" ({p['tag']})"
                extra = (f": content {p['height']} px, slide {self.slide_size[1]} px"
                         if p["what"] == "too tall" else
                         f": {p['from']} px when shown, {p['height']} px once settled"
                         if p["what"] == "grows after it is shown" else
                         f" (the formula is {p['px']} px tall)"
                         if p["what"] == "formula broken across lines" else
                         f" (shown at {p['percent']} %)" if p["what"] == "figure shrunk" else "")
                size = "" if p["what"] == "formula broken across lines" else f" by {p['px']} px"
                lines.append(f"  {self.lang} {self.deck} slide {s['h']}/{s['v']} at {w}x{h}: "
                             f"{p['what']}{size}{extra}{where}")
        return lines


def deck_paths(langs=LANGS, lessons: list[str] | None = None,
               root: pathlib.Path = BUILD / "slides") -> list[tuple[str, pathlib.Path]]:
    """``(lang, path)`` of every exported deck of ``langs`` (lessons chosen as
    :func:`tools.course.lesson_paths` reads their names: 1, 01, 01_batch_norm)."""
    chosen = {p.stem for p in lesson_paths(lessons)} if lessons else None
    found = []
    for lang in langs:
        for path in sorted((root / lang).glob("[0-9][0-9]_*.slides.html")):
            if chosen is None or path.name.removesuffix(".slides.html") in chosen:
                found.append((lang, path))
    return found


def open_deck(page, path: pathlib.Path) -> None:
    """Load ``path`` in ``page`` and wait until reveal.js, MathJax and the fonts are ready."""
    page.goto(path.resolve().as_uri())
    page.wait_for_selector(".reveal.ready", timeout=60_000)
    wait_typeset(page)


def wait_typeset(page) -> None:
    """Wait until MathJax has typeset the page (``window.courseTypeset``, set by the course's
    MathJax configuration, then MathJax's own queue) and its fonts have loaded."""
    page.wait_for_function("window.MathJax && MathJax.Hub", timeout=120_000)
    page.evaluate("""async () => {
        if (window.courseTypeset) await window.courseTypeset;
        await new Promise(r => MathJax.Hub.Queue(() => r()));
        await document.fonts.ready;
        return true;
    }""")


def measure_page(page, lang: str, path: pathlib.Path, window: tuple[int, int],
                 growth: bool = True, load: bool = True,
                 only: list[str] | None = None, walk: bool = False) -> DeckReport:
    """Measure every slide of the deck at ``path`` in ``page`` at ``window`` (or only the
    slides named ``"h/v"`` in ``only``), all shown at once, or with ``walk`` each in turn as a
    presenter goes through the deck (see MEASURE_JS); with ``growth``, wait until the slides
    have settled and report one that grew after it was shown. With ``load`` the deck is
    opened here; without, ``page`` holds it already and is resized to ``window`` (reveal.js
    lays the deck out again) before it is measured."""
    if load:
        open_deck(page, path)
    if page.viewport_size != {"width": window[0], "height": window[1]}:
        page.set_viewport_size({"width": window[0], "height": window[1]})
        # reveal.js lays the deck out on the window's resize event: two frames let it run
        # (MEASURE_JS also calls Reveal.layout() before it measures)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    result = page.evaluate(MEASURE_JS, [TOLERANCE_PX, QUIET_MS if growth else 0, SETTLE_MAX_MS,
                                        only, walk])
    return DeckReport(lang, path.name.removesuffix(".slides.html"), window,
                      (result["width"], result["height"]), result["slides"],
                      None if only is None else result["total"])


def _context(browser, window):
    """A browser context of ``window``'s size that loads only what lies on disk."""
    context = browser.new_context(viewport={"width": window[0], "height": window[1]},
                                  device_scale_factor=1)
    # the decks and pages load everything from disk; refuse anything else
    context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
        ("file://", "data:", "blob:")) else r.abort())
    context.add_init_script(KEEP_SLIDECHANGED_JS)
    return context


def run_jobs(jobs: list, browser=None, workers: int = 1) -> list:
    """Run ``jobs`` (callables taking a function ``page(window)`` that returns a page of that
    window size, one per window, reused) and return their results in order. With
    ``workers`` > 1 the jobs are shared by that many threads, each with its own Chromium
    (Playwright's sync API belongs to the thread that started it), so that the browsers'
    renderers use as many cores; ``browser`` (one already started) serves ``workers`` = 1."""
    import queue
    import threading

    results = [None] * len(jobs)
    todo: queue.Queue = queue.Queue()
    for item in enumerate(jobs):
        todo.put(item)
    errors = []

    def drain(b) -> None:
        contexts = {}

        def page(window):
            if window not in contexts:
                contexts[window] = _context(b, window)
                contexts[window].new_page()
            return contexts[window].pages[0]

        try:
            while not errors:
                try:
                    i, job = todo.get_nowait()
                except queue.Empty:
                    return
                results[i] = job(page)
        finally:
            for context in contexts.values():
                context.close()

    def thread() -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
                try:
                    drain(b)
                finally:
                    b.close()
        except BaseException as error:  # noqa: BLE001 (re-raised in the caller)
            errors.append(error)

    if workers <= 1:
        if browser is None:
            thread()
        else:
            drain(browser)
    else:
        threads = [threading.Thread(target=thread) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return results


def near_edge(report: DeckReport, near_px: float = NEAR_PX) -> list[str]:
    """The slides (``"h/v"``) of ``report`` with a problem, or whose ``margin`` (how far the
    content's bottom and right edge and the figures' shown widths are from being reported) is
    under ``near_px``: the only ones whose verdict another window size could change (see
    ``NEAR_PX``)."""
    return [f"{s['h']}/{s['v']}" for s in report.slides
            if s["problems"] or s["margin"] < near_px]


def measure(browser, decks: list[tuple[str, pathlib.Path]], windows=WINDOWS, log=None,
            workers: int = 1, near_px: float | None = NEAR_PX,
            walk: bool = False) -> list[DeckReport]:
    """Every deck loaded once, in the first window size, and all its slides measured; then the
    page is resized to each other window size and the slides :func:`near_edge` picks from the
    first window's report (``near_px`` None: every slide) are measured again
    (:func:`measure_page`). The reports are returned window by window, decks in order.
    ``log`` gets each summary. Slides that grow after they are shown are looked for in the
    first window only (a slide's growth does not depend on the window). ``walk``: each slide
    shown in turn (:func:`measure_page`). ``workers`` > 1: that many Chromiums share the decks
    (:func:`run_jobs`; ``browser`` is then not used)."""
    import threading

    lock = threading.Lock()

    def job(lang, path):
        def run(page_of):
            page = page_of(windows[0])
            reports = []
            try:
                for window in windows:
                    first = window == windows[0]
                    only = None if first or near_px is None else near_edge(reports[0], near_px)
                    if only == []:  # nothing near a problem: nothing to resize or measure
                        report = DeckReport(lang, reports[0].deck, window, reports[0].slide_size,
                                            [], len(reports[0].slides))
                    else:
                        report = measure_page(page, lang, path, window, growth=first, load=first,
                                              only=only, walk=walk)
                    reports.append(report)
                    if log:
                        with lock:
                            log(report.summary())
                            for line in report.offender_lines():
                                log(line)
            finally:  # the next deck starts in the first window
                page.set_viewport_size({"width": windows[0][0], "height": windows[0][1]})
            return reports
        return run

    per_deck = run_jobs([job(lang, path) for lang, path in decks], browser, workers)
    return [reports[i] for i in range(len(windows)) for reports in per_deck]


# The HTML edition: every formula in a table cell, and every table, once the page's math is
# typeset (at 1280 x 720). A table may reach into the margin beside the page's column (formulas
# are never broken to make it narrower), but not past the window, and nothing may cut it off.
HTML_JS = """
() => {
  const brokenFormula = __BROKEN__;
  const cellOf = el => {
    const c = el.closest('.jp-Cell');
    return c ? (c.id || '').replace('cell-id=', '') : '';
  };
  const problems = [];
  for (const m of document.querySelectorAll('td .MathJax_CHTML, th .MathJax_CHTML')) {
    if (brokenFormula(m)) {
      const tex = m.nextElementSibling && m.nextElementSibling.tagName === 'SCRIPT'
          ? m.nextElementSibling.textContent : m.textContent;
      problems.push({what: 'formula broken across lines', cell: cellOf(m), text: tex.slice(0, 60)});
    }
  }
  // a table may reach into the margin beside the column, not past the window, and nothing
  // that holds it may cut it off
  for (const t of document.querySelectorAll('.jp-RenderedHTMLCommon table')) {
    const r = t.getBoundingClientRect();
    const past = r.right - document.documentElement.clientWidth;
    if (past > 1) problems.push({what: 'table past the window', cell: cellOf(t), px: Math.round(past)});
    for (let el = t.parentElement; el && el !== document.body; el = el.parentElement) {
      const cs = getComputedStyle(el);
      const cut = r.right - el.getBoundingClientRect().right;
      if (cs.overflowX !== 'visible' && cut > 1) {
        problems.push({what: 'table cut off', cell: cellOf(t), px: Math.round(cut)});
        break;
      }
    }
  }
  return problems;
}
""".replace("__BROKEN__", BROKEN_JS)


def page_paths(langs=LANGS, lessons: list[str] | None = None,
               root: pathlib.Path = BUILD / "html") -> list[tuple[str, pathlib.Path]]:
    """``(lang, path)`` of every exported page of the HTML edition (lessons chosen as
    :func:`tools.course.lesson_paths` reads their names)."""
    chosen = {p.stem for p in lesson_paths(lessons)} if lessons else None
    return [(lang, path) for lang in langs
            for path in sorted((root / lang).glob("[0-9][0-9]_*.html"))
            if chosen is None or path.name.removesuffix(".html") in chosen]


def measure_html(browser, pages: list[tuple[str, pathlib.Path]], window=WINDOWS[0],
                 log=None, workers: int = 1) -> list[str]:
    """Open every page of the HTML edition once (at ``window``) and return one line per
    formula broken across lines in a table cell, and per table past the window or cut off.
    ``workers`` as in :func:`measure`."""
    import threading

    lock = threading.Lock()

    def job(lang, path):
        def run(page_of):
            page = page_of(window)
            page.goto(path.resolve().as_uri())
            wait_typeset(page)
            found = page.evaluate(HTML_JS)
            formulas = sum(p["what"] == "formula broken across lines" for p in found)
            lines = []
            for p in found:
                detail = f": {p['text']}" if "text" in p else f" by {p['px']} px"
                lines.append(f"  {lang} {path.stem} (html): {p['what']} in cell {p['cell']}{detail}")
            if log:
                with lock:
                    log(f"{lang} {path.stem:<36} html: {formulas} formulas broken in tables, "
                        f"{len(found) - formulas} tables past the window or cut off")
                    for line in lines:
                        log(line)
            return lines
        return run

    return [line for lines in run_jobs([job(lang, path) for lang, path in pages], browser, workers)
            for line in lines]


def _window(text: str) -> tuple[int, int]:
    w, h = text.lower().split("x")
    return int(w), int(h)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", nargs="+", default=list(LANGS), choices=list(LANGS))
    parser.add_argument("--lessons", nargs="*", default=None, metavar="NN")
    parser.add_argument("--windows", nargs="+", type=_window, default=list(WINDOWS), metavar="WxH")
    parser.add_argument("--every-slide", action="store_true",
                        help="measure every slide in every window size (default: past the first "
                             f"size, only the slides within {NEAR_PX} px of a problem there)")
    parser.add_argument("--walk", action="store_true",
                        help="show each slide in turn, as a presenter goes through the deck "
                             "(default: all of a deck's slides shown at once; the same reports)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="Chromiums measuring side by side (default: 2, or 1 on one core)")
    parser.add_argument("--slides", type=pathlib.Path, default=BUILD / "slides",
                        help="the folder that make slides wrote (default build/slides)")
    parser.add_argument("--html", type=pathlib.Path, default=BUILD / "html",
                        help="the folder that make export wrote (default build/html; its pages "
                             "are checked when it exists)")
    args = parser.parse_args(argv)
    try:
        decks = deck_paths(args.lang, args.lessons, args.slides)
    except ValueError as error:
        parser.error(str(error))
    if not decks:
        print(f"no decks under {args.slides}: run make slides first", file=sys.stderr)
        return 2
    pages = page_paths(args.lang, args.lessons, args.html) if args.html.is_dir() else []
    log = lambda s: print(s, flush=True)  # noqa: E731
    html_lines = measure_html(None, pages, log=log, workers=args.workers)
    reports = measure(None, decks, args.windows, log=log, workers=args.workers,
                      near_px=None if args.every_slide else NEAR_PX, walk=args.walk)
    print(f"html: {len(html_lines)} problems on {len(pages)} pages "
          f"(formulas broken across lines in table cells, tables past the window or cut off)")
    first = args.windows[0]
    for window in args.windows:
        mine = [r for r in reports if r.window == window]
        bad = sum(len(r.offenders) for r in mine)
        total = sum(len(r.slides) if r.of is None else r.of for r in mine)
        measured = sum(len(r.slides) for r in mine)
        again = ("" if measured == total else
                 f"; {measured} measured at this size, those within {NEAR_PX} px of a problem "
                 f"or with one at {first[0]}x{first[1]}")
        print(f"{window[0]}x{window[1]}: {bad} of {total} slides do not fit "
              f"({len(mine)} decks{again})")
    if args.every_slide and len(args.windows) > 1:
        by_deck = {}
        for r in reports:
            by_deck.setdefault((r.lang, r.deck), []).append(r)
        diff = {"height": 0, "margin": 0.0}
        for first_report, *others in by_deck.values():
            for other in others:
                for a, b in zip(first_report.slides, other.slides):
                    for key in diff:
                        diff[key] = max(diff[key], abs(a[key] - b[key]))
        print(f"largest difference between the window sizes, slide by slide: height "
              f"{diff['height']} px (rounded to whole px), margin {diff['margin']:.6f} px "
              f"(NEAR_PX = {NEAR_PX})")
    return 1 if html_lines or any(r.offenders for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
