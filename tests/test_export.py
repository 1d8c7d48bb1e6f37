"""tools.export: single-language notebooks, the HTML edition and the slides.

The references are the raw notebook JSON (which cells carry which tag and which slide type)
and the files on disk (every page-relative script, stylesheet and image must exist); the
page export runs against a stand-in ``node_modules`` tree so that these tests need no npm.
"""

import html.parser
import json
import pathlib

import nbformat
import pytest

from tools import export

ROOT = pathlib.Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "03_instance_and_group_norm.ipynb"


def raw(path=LESSON):
    return json.loads(path.read_text(encoding="utf-8"))


def joined(value):
    """The notebook format stores long strings as lists of lines: join them, recursively."""
    if isinstance(value, dict):
        return {k: joined(v) for k, v in value.items()}
    if isinstance(value, list):
        return "".join(value) if all(isinstance(v, str) for v in value) and value else [joined(v) for v in value]
    return value


@pytest.mark.parametrize("lang,other", [("en", "lang-zh"), ("zh", "lang-en")])
def test_single_language_keeps_own_prose_and_every_code_output(lang, other):
    source = raw()
    nb = export.single_language(nbformat.read(LESSON, as_version=4), lang)
    kept = [c for c in source["cells"] if other not in c["metadata"].get("tags", [])]
    assert len(nb.cells) == len(kept) < len(source["cells"])
    for mine, theirs in zip(nb.cells, kept):
        assert mine.cell_type == theirs["cell_type"]
        assert mine.source == "".join(theirs["source"])
        if mine.cell_type == "markdown":
            assert f"lang-{lang}" in mine.metadata["tags"]
        else:
            assert joined(json.loads(json.dumps(mine.outputs))) == joined(theirs["outputs"])
    assert nb.metadata["language"] == lang
    assert nb.metadata["title"].startswith("03 ·")


def test_single_language_rejects_bad_input():
    nb = nbformat.read(LESSON, as_version=4)
    with pytest.raises(ValueError, match="unknown language"):
        export.single_language(nb, "fr")
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("untagged"))
    with pytest.raises(ValueError, match="markdown cell 1 has no lang-en / lang-zh tag"):
        export.single_language(nb, "en")


def test_lesson_paths_select_by_prefix():
    assert [p.name for p in export.lesson_paths(["03", "01_batch"])] == [
        "03_instance_and_group_norm.ipynb", "01_batch_norm.ipynb"]
    assert len(export.lesson_paths()) == len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    with pytest.raises(ValueError, match="no lesson matches '42'"):
        export.lesson_paths(["42"])


def test_static_page_links_lessons_and_drops_widget_views():
    nb = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}})
    nb.cells = [
        nbformat.v4.new_markdown_cell("see [02](02_layer_norm.ipynb#the-math) and "
                                      "[x](https://example.org/a.ipynb)"),
        nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output(
            "display_data", data={export.WIDGET_VIEW: {"model_id": "abc"}, "text/plain": "Explorer"})]),
    ]
    page = export._for_static_page(nb, ".html")
    assert page.cells[0].source == ("see [02](02_layer_norm.html#the-math) and "
                                    "[x](https://example.org/a.ipynb)")
    assert page.cells[1].outputs[0].data == {"text/plain": "Explorer"}
    assert "widgets" not in page.metadata
    assert export.WIDGET_VIEW in nb.cells[1].outputs[0].data  # the source is left alone


class _Refs(html.parser.HTMLParser):
    """Every URL a page loads by itself: script src, stylesheet href, img src."""

    def __init__(self):
        super().__init__()
        self.urls, self.lang, self.sections = [], None, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.lang = a.get("lang")
        if tag == "script" and a.get("src"):
            self.urls.append(a["src"])
        if tag == "link" and "stylesheet" in (a.get("rel") or ""):
            self.urls.append(a["href"])
        if tag == "img" and not a.get("src", "").startswith("data:"):
            self.urls.append(a["src"])
        if tag == "section":
            self.sections += 1


@pytest.fixture(scope="module")
def fake_modules(tmp_path_factory):
    """A stand-in for build/vendor/node_modules holding every path the pages ask for."""
    modules = tmp_path_factory.mktemp("node_modules")
    for package, parts in export.VENDOR_FILES.items():
        for part in parts:
            target = modules / package / part
            if target.suffix:  # a file; the other parts are folders
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("/* stand-in */")
            else:
                target.mkdir(parents=True, exist_ok=True)
    for extra in ("reveal.js/dist/reveal.js", "reveal.js/dist/reveal.css",
                  "reveal.js/dist/theme/white.css", "reveal.js/plugin/notes/notes.js"):
        (modules / extra).parent.mkdir(parents=True, exist_ok=True)
        (modules / extra).write_text("/* stand-in */")
    return modules


@pytest.fixture(scope="module")
def exported(tmp_path_factory, fake_modules):
    """Lesson 03 exported once, as HTML and as slides, in both languages."""
    out = tmp_path_factory.mktemp("build")
    pages = {kind: export.export_pages(kind, ["en", "zh"], [LESSON], out=out, modules=fake_modules)
             for kind in ("html", "slides")}
    return out, pages


@pytest.mark.parametrize("kind", ["html", "slides"])
def test_pages_load_only_files_beside_them(exported, kind):
    out, pages = exported
    pages = pages[kind]
    assert [p.relative_to(out).as_posix() for p in pages] == [
        f"{kind}/{lang}/03_instance_and_group_norm{'.html' if kind == 'html' else '.slides.html'}"
        for lang in ("en", "zh")]
    for page in pages + [out / kind / "index.html"]:
        refs = _Refs()
        refs.feed(page.read_text(encoding="utf-8"))
        assert refs.urls, page
        for url in refs.urls:
            assert "://" not in url and not url.startswith("//"), f"{page.name} loads {url}"
            assert (page.parent / url.split("?")[0]).resolve().is_file(), f"{page.name}: {url} missing"
    zh = _Refs()
    zh.feed(pages[1].read_text(encoding="utf-8"))
    assert zh.lang == "zh"
    font = out / kind / "static" / "fonts" / "NotoSansCJKsc-Regular-subset.otf"
    assert font.read_bytes() == (ROOT / "static" / "fonts" / font.name).read_bytes()


def test_pages_parse_as_nbconverts_own(exported, tmp_path, monkeypatch):
    """The course's exporter leaves out two steps of nbconvert's (tools/export.py, _accessible;
    static/templates/course_code.html.j2): the English page and deck of lesson 03 it wrote
    parse into the same document as the ones nbconvert's own HTMLExporter and SlidesExporter
    write with both steps (BeautifulSoup's pass over the page, and bleach over every code
    cell's highlighted source, as nbconvert's lab template does)."""
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter, SlidesExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.strings import clean_html

    def stock(kind):
        class Stock(HTMLExporter if kind == "html" else SlidesExporter):
            def from_notebook_node(self, nb, resources=None, **kw):
                info = nb.metadata.get("language_info", {})
                highlight = Highlight2HTML(pygments_lexer=info.get("pygments_lexer"), parent=self)
                self.filters = {**self.filters, "highlight_code": lambda source, metadata=None:
                                clean_html(highlight(source, metadata=metadata))}
                return super().from_notebook_node(nb, resources, **kw)
        return Stock

    monkeypatch.setattr(export, "_exporter_class", stock)
    _, pages = exported
    for kind in ("html", "slides"):
        theirs, _ = export._export_page((kind, "en", LESSON, tmp_path))
        ours = pages[kind][0]
        assert ours.name == theirs.name and ours.parts[-2] == "en"
        ours, theirs = ours.read_text(encoding="utf-8"), theirs.read_text(encoding="utf-8")
        assert ours != theirs and theirs.count(export.NO_ALT) > 0
        assert str(BeautifulSoup(ours, "html.parser")) == str(BeautifulSoup(theirs, "html.parser"))


def test_accessible_marks_what_nbconverts_pass_marks():
    page = ('<div class="jp-Cell-inputWrapper"><img src="a.png"><img src="b.png" alt="b"/></div>'
            '<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="text/plain">x</div>'
            '<div class="jp-OutputArea-output-x"></div><div class="jp-OutputArea-output" tabindex="-1">'
            '<img\nsrc="c.png" />')
    assert export._accessible(page) == (
        '<div class="jp-Cell-inputWrapper" tabindex="0"><img src="a.png" alt="{0}">'
        '<img src="b.png" alt="b"/></div>'
        '<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="text/plain" tabindex="0">x</div>'
        '<div class="jp-OutputArea-output-x"></div><div class="jp-OutputArea-output" tabindex="-1">'
        '<img\nsrc="c.png" alt="{0}" />').format(export.NO_ALT)


def test_slides_follow_the_slide_metadata(exported):
    """reveal.js: a `slide` cell starts a horizontal stack (an outer <section>), a `subslide`
    a vertical slide (an inner <section>); so outer + inner sections = slides + subslides +
    slides (each stack holds its first slide as an inner section too). The decks hold the
    cells as tools.slides.split_for_slides cuts them (a cell taller than a slide continues
    on sub-slides)."""
    from tools.slides import split_for_slides

    out, pages = exported
    split = split_for_slides(nbformat.reads(json.dumps(raw()), as_version=4))
    cells = [c for c in split.cells if "lang-zh" not in c["metadata"].get("tags", [])]
    types = [c["metadata"].get("slideshow", {}).get("slide_type", "-") for c in cells]
    refs = _Refs()
    refs.feed(pages["slides"][0].read_text(encoding="utf-8"))
    assert refs.sections == 2 * types.count("slide") + types.count("subslide")


def test_index_lists_every_lesson_in_both_languages(exported):
    out, _ = exported
    index = (out / "html" / "index.html").read_text(encoding="utf-8")
    pages = index.split('<table class="course-pages">')[1]
    assert pages.count("<tr>") == 1 + len(export.lesson_paths())
    assert 'href="en/03_instance_and_group_norm.html"' in index
    assert 'href="zh/03_instance_and_group_norm.html"' in index
    assert 'href="en/01_batch_norm.html"' not in index  # not exported: no dead link
    assert 'href="../slides/en/03_instance_and_group_norm.slides.html"' in index
    # lesson 00's course map, in each language, linking the exported page only
    maps = index.split('<table class="course-pages">')[0]
    assert maps.count('href="en/03_instance_and_group_norm.html"') == 1
    assert maps.count('href="zh/03_instance_and_group_norm.html"') == 1
    assert ".ipynb" not in maps and 'href=""' not in maps
    assert "实例归一化与组归一化" in maps and "InstanceNorm and GroupNorm" in maps


def test_course_map_is_lesson_00s_table():
    source = "".join(c for cell in raw(ROOT / "notebooks" / "00_introduction.ipynb")["cells"]
                     for c in cell["source"])
    for lang in ("en", "zh"):
        table = export.course_map(lang)
        assert table in source
        rows = table.splitlines()
        assert rows[1].startswith("|---") and len(rows) == 2 + len(export.lesson_paths())


def test_export_pages_rejects_unknown_kind(tmp_path):
    with pytest.raises(ValueError, match="kind must be 'html' or 'slides'"):
        export.export_pages("pdf", ["en"], [LESSON], out=tmp_path)


def test_index_links_lesson_00_in_both_course_maps(tmp_path, fake_modules):
    """Lesson 00's own course map does not link lesson 00; the index's maps do."""
    intro = export.lesson_paths(["00"])
    export.export_pages("html", ["en", "zh"], intro, out=tmp_path, modules=fake_modules)
    maps = (tmp_path / "html" / "index.html").read_text(encoding="utf-8").split('<table class="course-pages">')[0]
    assert maps.count('href="en/00_introduction.html"') == 1
    assert maps.count('href="zh/00_introduction.html"') == 1
    assert '>Introduction</a>: why normalise' in maps and ">导论</a>：为什么要归一化" in maps
    table = "| # | topic |\n|---|---|\n| 00 | Intro: why | x |\n| 01 | [BN](01_batch_norm.ipynb) | y |"
    assert export._link_every_lesson(table).splitlines()[2:] == [
        "| 00 | [Intro](00_introduction.ipynb): why | x |", "| 01 | [BN](01_batch_norm.ipynb) | y |"]


def test_html_pages_have_contents_and_a_nav_bar(exported):
    out, pages = exported
    for page, label in zip(pages["html"], ("Contents", "本课目录")):
        text = page.read_text(encoding="utf-8")
        assert text.count('<ol class="course-toc">') == 2  # the side column and the nav bar's menu
        assert f"<summary>{label}</summary>" in text and "course-toc-side" in text
        assert text.count("<nav ") == 2 and text.count("course-nav-end") == 1  # top (sticky), end


def test_slides_carry_the_speaker_notes(exported):
    """Notes on every slide of each language's deck, the sections' timed notes on their heading
    slides (docs/speaker_notes/, tools/speaker_notes.py)."""
    from tools import slides, speaker_notes

    out, pages = exported
    first = next(s for s in speaker_notes.load(LESSON) if s.heading is not None)  # the first section
    deck = slides.split_for_slides(nbformat.read(LESSON, as_version=4))
    for page, lang in zip(pages["slides"], ("en", "zh")):
        text = page.read_text(encoding="utf-8")
        shown = export.single_language(deck, lang)
        assert text.count('<aside class="notes">') == len(speaker_notes.slide_starts(shown, lang))
        # (a heading slide cut in pieces shows its notes, time included, on each piece)
        assert text.count(speaker_notes.TIME_LABEL[lang].split("{")[0]) >= len(speaker_notes.sections(shown, lang))
        label = speaker_notes.TIME_LABEL[lang].format(first.minutes)
        assert label in text
        other = speaker_notes.TIME_LABEL["zh" if lang == "en" else "en"].format(first.minutes)
        assert other not in text
