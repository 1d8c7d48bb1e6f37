"""The reading edition's contents and nav bar, and the decks' speaker view, in headless
Chromium (run by `make test-browser` after `tools.export all`; screenshots in build/browser/)."""

import base64
import json
import re

import pytest
from test_browser import BUILD, LESSON, SHOTS, ROOT, Offline, _exported, browser  # noqa: F401

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
    assert len(with_notes) == _sections(lang)
    assert all(label in notes for _, notes in with_notes)
    # go to the second section's slide and open the speaker view (S)
    index = with_notes[1][0]
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
