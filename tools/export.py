"""Single-language editions of the course: notebooks, an HTML reading edition and reveal.js
lecture slides, all of which work without internet access (``make export``, ``make slides``).

Every lesson notebook holds both languages: an English markdown cell tagged ``lang-en`` and
its Chinese twin tagged ``lang-zh``. An edition for one language drops the other language's
cells with nbconvert's ``TagRemovePreprocessor`` and keeps every code cell and every output
unchanged.

    python -m tools.export notebooks       # build/en/*.ipynb, build/zh/*.ipynb (+ build/images)
    python -m tools.export html            # build/html/{index.html, en/*.html, zh/*.html}
    python -m tools.export slides          # build/slides/{index.html, en/*.slides.html, zh/...}
    python -m tools.export all --lang zh   # one language only

Offline: the pages load MathJax 2, require.js, jQuery and reveal.js from ``vendor/`` beside
them, and the course stylesheet and CJK font from ``static/`` beside them. Those scripts come
from the npm packages pinned in ``static/vendor/package-lock.json``, installed once into
``build/vendor/`` with ``npm ci`` (the only step that needs a package registry).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import filecmp
import functools
import hashlib
import html
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import nbformat

from .course import BUILD, IMAGES, NOTEBOOKS, ROOT, STATIC, lesson_paths
from .slides import OUTPUT_ONLY_TAG, SLIDE_SIZE, split_for_slides

TEMPLATES = STATIC / "templates"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# What the pages need from each npm package, relative to the package folder (MathJax 2 ships
# 73 MB; a page needs the TeX input, the CommonHTML output with its web fonts, and the
# extensions that the TeX-AMS_CHTML-full configuration loads).
VENDOR_FILES = {
    "mathjax": ["MathJax.js", "LICENSE", "config/TeX-AMS_CHTML-full.js", "config/Safe.js",
                "extensions", "jax/input/TeX", "jax/element", "jax/output/CommonHTML",
                "jax/output/PreviewHTML", "fonts/HTML-CSS/TeX/woff", "localization"],
    "requirejs": ["require.js", "README.md"],
    "jquery": ["dist/jquery.min.js", "LICENSE.txt"],
    "reveal.js": ["dist", "plugin", "LICENSE"],
}


@dataclasses.dataclass(frozen=True)
class Language:
    code: str            # "en" / "zh": folder names and the lang-* tag
    html_lang: str       # the <html lang> attribute (nbconvert takes ISO 639-1 codes only)
    index_label: str
    nav_label: str
    switch_label: str    # label of the link to this language's page from the other one


LANGUAGES = {
    "en": Language("en", "en", "Course index", "Lesson navigation", "English"),
    "zh": Language("zh", "zh", "课程目录", "课程导航", "中文"),
}
LANG_TAGS = {code: f"lang-{code}" for code in LANGUAGES}


def _log(msg: str) -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------- single-language notebooks

def _check_lang(lang: str) -> None:
    if lang not in LANG_TAGS:
        raise ValueError(f"unknown language {lang!r}; choose from {sorted(LANG_TAGS)}")


def single_language(nb: nbformat.NotebookNode, lang: str) -> nbformat.NotebookNode:
    """A copy of the bilingual notebook ``nb`` holding only ``lang``'s prose.

    The other language's markdown cells are removed by nbconvert's ``TagRemovePreprocessor``
    (``remove_cell_tags`` = the other ``lang-*`` tag); code cells and their outputs are kept as
    they are. Raises ``ValueError`` if a markdown cell carries no language tag, so that an
    untagged cell can't slip into both editions."""
    from nbconvert.preprocessors import TagRemovePreprocessor

    _check_lang(lang)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and not set(cell.metadata.get("tags", [])) & set(LANG_TAGS.values()):
            raise ValueError(f"markdown cell {i} has no lang-en / lang-zh tag")
    other = {tag for code, tag in LANG_TAGS.items() if code != lang}
    out = copy.deepcopy(nb)
    out, _ = TagRemovePreprocessor(remove_cell_tags=other, enabled=True).preprocess(out, {})
    out.metadata["language"] = LANGUAGES[lang].html_lang
    title = lesson_title(out)
    if title:
        out.metadata["title"] = title
    return out


def lesson_title(nb: nbformat.NotebookNode) -> str:
    """The text of the first level-1 heading of ``nb`` ("" if none)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


MANIFEST = ".exported.json"  # what export_notebooks last wrote into a language folder


def _digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_manifest(folder: pathlib.Path) -> dict[str, str]:
    path = folder / MANIFEST
    return json.loads(path.read_text()) if path.exists() else {}


def _write(target: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``target`` whole or not at all: into a file beside it, then renamed
    over it, so that a reader at the same time (the tests of ``tests/test_editions.py``, which
    CI runs while the editions are built, or JupyterLab showing ``build/zh``) sees the old file
    or the new one, never half of it."""
    part = target.with_name(f".{target.name}.part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, target)


def record_exported(targets: list[pathlib.Path]) -> None:
    """Record ``targets`` (copies in one language folder) as written by the export, so that a
    later ``keep_edited`` export may refresh them (:func:`export_notebooks`)."""
    for folder in {t.parent for t in targets}:
        manifest = _read_manifest(folder)
        manifest.update({t.name: _digest(t) for t in targets if t.parent == folder})
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def export_notebooks(langs: list[str], lessons: list[pathlib.Path], out: pathlib.Path = BUILD,
                     keep_edited: bool = False) -> list[pathlib.Path]:
    """Write ``out/<lang>/<lesson>.ipynb`` for every language and lesson, and copy the images
    the lessons embed (``../images/...``) to ``out/images``. Returns the written paths.

    With ``keep_edited`` (``make lab LANG=..``, where learners work in these copies), a copy
    that differs from what the last export wrote there (recorded in ``out/<lang>/.exported.json``)
    holds the learner's work: it is kept, not overwritten, and said so
    (``python -m tools.restore`` replaces it, keeping a backup)."""
    written = []
    for lang in langs:
        folder = out / lang
        folder.mkdir(parents=True, exist_ok=True)
        manifest = _read_manifest(folder)
        for path in lessons:
            target = folder / path.name
            if keep_edited and target.exists() and manifest.get(path.name) != _digest(target):
                _log(f"[notebooks] {target.relative_to(out.parent)}  kept: it has your changes "
                     f"(python -m tools.restore {path.stem[:2]} --edition {lang} replaces it)")
                continue
            nb = single_language(nbformat.read(path, as_version=4), lang)
            text = nbformat.writes(nb)
            _write(target, text if text.endswith("\n") else text + "\n")  # as nbformat.write
            written.append(target)
            _log(f"[notebooks] {target.relative_to(out.parent)}  ({len(nb.cells)} cells)")
        record_exported([t for t in written if t.parent == folder])
    _copy_tree(IMAGES, out / "images")
    return written


# ---------------------------------------------------------------- offline assets

def _copy_tree(src: pathlib.Path, dst: pathlib.Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def install_vendor(build: pathlib.Path = BUILD) -> pathlib.Path:
    """``npm ci`` the pinned packages of ``static/vendor`` into ``build/vendor`` (once; again
    only when the lock file changes). Returns the ``node_modules`` folder."""
    spec = STATIC / "vendor"
    target = build / "vendor"
    modules = target / "node_modules"
    lock = target / "package-lock.json"
    if modules.is_dir() and lock.exists() and filecmp.cmp(lock, spec / "package-lock.json", shallow=False):
        return modules
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm was not found. The exported pages load MathJax and reveal.js from "
                         "files installed once with npm (Node.js): install Node.js and npm "
                         "(Debian: apt install nodejs npm), then run the export again.")
    target.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(spec / name, target / name)
    _log(f"[vendor] npm ci in {target.relative_to(build.parent)} (MathJax, reveal.js, require.js, jQuery)")
    result = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                            cwd=target, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"npm ci failed in {target}:\n{result.stdout}\n{result.stderr}")
    return modules


def copy_assets(dest: pathlib.Path, modules: pathlib.Path) -> None:
    """Put what the pages load beside them: ``dest/vendor/<package>/...`` (the files of
    ``VENDOR_FILES``) and ``dest/static/`` (course.css and the CJK font with its licence)."""
    for package, parts in VENDOR_FILES.items():
        for part in parts:
            src = modules / package / part
            if not src.exists():
                raise FileNotFoundError(f"{src} is missing: is static/vendor/package-lock.json "
                                        "in step with VENDOR_FILES?")
            _copy_tree(src, dest / "vendor" / package / part)
    _copy_tree(STATIC / "course.css", dest / "static" / "course.css")
    for font in sorted((STATIC / "fonts").iterdir()):
        _copy_tree(font, dest / "static" / "fonts" / font.name)
    _copy_tree(IMAGES, dest / "images")


# ---------------------------------------------------------------- HTML and slides

_LESSON_LINK = re.compile(r"\]\((\d\d_[A-Za-z0-9_]+)\.ipynb(#[^)\s]*)?\)")


def _for_static_page(nb: nbformat.NotebookNode, suffix: str) -> nbformat.NotebookNode:
    """Prepare a single-language notebook for a static page: links between lessons point to
    the pages (``NN_x.ipynb`` → ``NN_x<suffix>``), and the saved widget state and widget views
    are dropped (rendering them would fetch the widget library from a CDN), so an explorer
    shows its text description instead."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _LESSON_LINK.sub(lambda m: f"]({m.group(1)}{suffix}{m.group(2) or ''})", cell.source)
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_VIEW, None)
    return nb


def _with_speaker_notes(nb: nbformat.NotebookNode, source: nbformat.NotebookNode, lang: str,
                        path: pathlib.Path) -> nbformat.NotebookNode:
    """``nb`` with the lesson's speaker notes (``docs/speaker_notes``, :mod:`tools.speaker_notes`);
    ``nb`` unchanged, with a message, when the lesson has none."""
    from . import speaker_notes

    if not speaker_notes.notes_path(path).exists():
        _log(f"[slides] {path.stem}: no speaker notes ({speaker_notes.notes_path(path).relative_to(ROOT)})")
        return nb
    return speaker_notes.with_notes(nb, source, lang, speaker_notes.load(path))


def _for_slides(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Prepare a notebook for the decks: a code cell tagged ``slides-output-only``
    (:data:`tools.slides.OUTPUT_ONLY_TAG`) shows its outputs without its code, and an
    error shows its last line (the exception raised) without the traceback above it."""
    from nbconvert.preprocessors import TagRemovePreprocessor

    nb, _ = TagRemovePreprocessor(remove_input_tags={OUTPUT_ONLY_TAG}, enabled=True).preprocess(
        copy.deepcopy(nb), {})
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and output.get("traceback"):
                output["traceback"] = output["traceback"][-1:]
    return nb


# What nbconvert's HTMLExporter does to a page after its template, without parsing it: an
# image without alternative text gets nbconvert's, and every cell's input and every output
# becomes focusable (tabindex). nbconvert parses the whole page with BeautifulSoup for this and
# writes it out again, and its template sanitises each code cell's highlighted source with
# bleach, whose input is Pygments' own escaped markup: the two took about two thirds of an
# export's time. The pages the course writes without them parse into the same document
# (tests/test_export.py compares a lesson's page and deck with nbconvert's, element by element).
NO_ALT = "No description has been provided for this image"  # nbconvert's text
_IMG_WITHOUT_ALT = re.compile(r"<img\b(?![^>]*\balt=)([^>]*?)(\s*/?)>")
_FOCUSABLE = re.compile(r'<div\b([^>]*\bclass="(?:[^"]*\s)?(?:jp-Cell-inputWrapper|jp-OutputArea-output)(?:\s[^"]*)?"[^>]*?)(\s*/?)>')


def _accessible(page: str) -> str:
    """``page`` with nbconvert's alternative text on every image that has none and tabindex
    0 on every cell input and output (see ``NO_ALT``)."""
    page = _IMG_WITHOUT_ALT.sub(lambda m: f'<img{m.group(1)} alt="{NO_ALT}"{m.group(2)}>', page)
    return _FOCUSABLE.sub(lambda m: (m.group(0) if re.search(r"\btabindex=", m.group(1)) else
                                     f'<div{m.group(1)} tabindex="0"{m.group(2)}>'), page)


@functools.cache
def _exporter_class(kind: str):
    """nbconvert's HTMLExporter (``kind="html"``) or SlidesExporter, writing the page its
    template renders with :func:`_accessible` applied instead of its BeautifulSoup pass (the
    course's templates highlight code without bleach)."""
    from nbconvert import HTMLExporter, SlidesExporter
    from nbconvert.exporters.templateexporter import TemplateExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

    class Exporter(HTMLExporter if kind == "html" else SlidesExporter):
        def from_notebook_node(self, nb, resources=None, **kw):
            # HTMLExporter.from_notebook_node (nbconvert 7.17) up to its template, then
            # _accessible where it parses the page
            langinfo = nb.metadata.get("language_info", {})
            lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
            highlight_code = self.filters.get(
                "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
            resources = self._init_resources(resources)
            filter_data_type = WidgetsDataTypeFilter(
                notebook_metadata=self._nb_metadata, parent=self, resources=resources)
            self.register_filter("highlight_code", highlight_code)
            self.register_filter("filter_data_type", filter_data_type)
            page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
            return _accessible(page), resources

    return Exporter


def _exporter(kind: str, lang: str):
    """The exporter of ``kind`` ("html" or "slides", :func:`_exporter_class`) in ``lang``,
    with the course's settings."""
    common = dict(
        extra_template_basedirs=[str(TEMPLATES)],
        extra_template_paths=[str(TEMPLATES)],  # course_mathjax.html.j2, shared by both templates
        mathjax_url="../vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
        require_js_url="../vendor/requirejs/require.js",
        jquery_url="../vendor/jquery/dist/jquery.min.js",
        language_code=LANGUAGES[lang].html_lang,
    )
    cls = _exporter_class(kind)
    if kind == "html":
        return cls(template_name="course_html", **common)
    return cls(template_name="course_slides", reveal_url_prefix="../vendor/reveal.js",
                          reveal_scroll=True, reveal_number="c/t", reveal_transition="none", reveal_theme="white",
                          reveal_width=str(SLIDE_SIZE[0]), reveal_height=str(SLIDE_SIZE[1]), **common)


def _page_name(path: pathlib.Path, kind: str) -> str:
    return path.stem + (".html" if kind == "html" else ".slides.html")


def _export_page(job: tuple) -> tuple[pathlib.Path, str]:
    """Write one page of :func:`export_pages` (top level, so a worker process can run it):
    ``(kind, lang, lesson path, out)`` -> (the page written, its log line)."""
    kind, lang, path, out = job
    root = out / kind
    all_lessons = lesson_paths()
    exporter = _exporter(kind, lang)
    (other,) = (code for code in LANGUAGES if code != lang)
    folder = root / lang
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    source = nbformat.read(path, as_version=4)
    if kind == "slides":
        source = split_for_slides(source)
    nb = single_language(source, lang)
    if kind == "slides":  # the presenter's notes, in reveal.js's speaker view (S)
        nb = _with_speaker_notes(nb, source, lang, path)
    nb = _for_static_page(nb, ".html" if kind == "html" else ".slides.html")
    if kind == "slides":
        nb = _for_slides(nb)
    i = all_lessons.index(path)
    neighbours = {}
    for key, j in (("prev", i - 1), ("next", i + 1)):
        if 0 <= j < len(all_lessons):
            neighbours[key] = {"href": _page_name(all_lessons[j], kind),
                               "title": all_lessons[j].stem[:2]}
    resources = {
        "metadata": {"name": lesson_title(nb) or path.stem, "path": str(folder)},
        "course": {
            "static": "../static",
            "index": "../index.html",
            "index_label": LANGUAGES[lang].index_label,
            "nav_label": LANGUAGES[lang].nav_label,
            "toc_label": {"en": "Contents", "zh": "本课目录"}[lang],
            "other_lang": LANGUAGES[other].html_lang,
            "other_href": f"../{other}/{_page_name(path, kind)}",
            "other_label": LANGUAGES[other].switch_label,
            **neighbours,
        },
    }
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    target = folder / _page_name(path, kind)
    _write(target, body)
    return target, (f"[{kind}] {target.relative_to(out.parent)}  ({len(body) / 1e6:.1f} MB, "
                    f"{time.perf_counter() - start:.1f} s)")


def export_pages(kind: str, langs: list[str], lessons: list[pathlib.Path], out: pathlib.Path = BUILD,
                 modules: pathlib.Path | None = None, workers: int = 1) -> list[pathlib.Path]:
    """Write the HTML edition (``kind="html"``: ``out/html/<lang>/NN_x.html``) or the slides
    (``kind="slides"``: ``out/slides/<lang>/NN_x.slides.html``), with their assets, and the
    index page ``out/<kind>/index.html`` (slides also refresh the HTML index, which links the
    decks). ``workers`` > 1: the pages are written by that many processes. Returns the
    written pages, in the order of ``langs`` and ``lessons``."""
    if kind not in ("html", "slides"):
        raise ValueError(f"kind must be 'html' or 'slides', not {kind!r}")
    root = out / kind
    modules = modules or install_vendor(out)
    copy_assets(root, modules)
    jobs = [(kind, lang, path, out) for lang in langs for path in lessons]
    written = []
    with contextlib.ExitStack() as stack:
        if workers > 1 and len(jobs) > 1:
            import concurrent.futures

            pool = stack.enter_context(concurrent.futures.ProcessPoolExecutor(min(workers, len(jobs))))
            done = pool.map(_export_page, jobs)
        else:
            done = map(_export_page, jobs)
        for target, line in done:  # in order, each as soon as it and those before it are written
            written.append(target)
            _log(line)
    write_index(root, kind)
    if kind == "slides" and (out / "html").is_dir():
        write_index(out / "html", "html")  # link the new decks from the reading edition
    return written


def course_map(lang: str) -> str:
    """Lesson 00's course-map table in ``lang`` (the first markdown table that links to the
    lessons), as markdown. Raises ``ValueError`` if lesson 00 has none."""
    intro = single_language(nbformat.read(lesson_paths(["00"])[0], as_version=4), lang)
    for cell in intro.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        rows = [i for i, line in enumerate(lines) if line.startswith("|")]
        if rows and any(_LESSON_LINK.search(lines[i]) for i in rows):
            start = rows[0]
            end = start
            while end + 1 < len(lines) and lines[end + 1].startswith("|"):
                end += 1
            return "\n".join(lines[start:end + 1])
    raise ValueError(f"lesson 00 ({lang}) has no course-map table")


def _link_every_lesson(table: str) -> str:
    """The course-map ``table`` with a link in every lesson's row: lesson 00's own map does
    not link lesson 00, so its title (the topic up to the first colon) becomes the link."""
    stems = {p.stem[:2]: p.stem for p in lesson_paths()}
    lines = []
    for line in table.splitlines():
        cells = line.split("|")
        number = cells[1].strip() if len(cells) > 3 else ""
        if number in stems and not _LESSON_LINK.search(line):
            title, colon, rest = (re.split(r"([:：])", cells[2].strip(), maxsplit=1) + ["", ""])[:3]
            cells[2] = f" [{title.strip()}]({stems[number]}.ipynb){colon}{rest} "
            line = "|".join(cells)
        lines.append(line)
    return "\n".join(lines)


def _course_map_html(root: pathlib.Path, kind: str, lang: str) -> str:
    """:func:`course_map` as HTML, its lesson links pointing to the pages under ``root`` (a
    lesson not exported keeps its name as plain text)."""
    import mistune

    def link(m: re.Match) -> str:
        page = f"{lang}/{_page_name(pathlib.Path(m.group(1)), kind)}"
        return f"]({page})" if (root / page).exists() else "]()"

    table = _LESSON_LINK.sub(link, _link_every_lesson(course_map(lang)))
    html_table = mistune.create_markdown(plugins=["table"])(table)
    return re.sub(r'<a href="">(.*?)</a>', r"\1", html_table)


def write_index(root: pathlib.Path, kind: str) -> pathlib.Path:
    """``root/index.html``: the course map, one row per lesson, with a link to each language's
    page (or deck) that exists under ``root``; the HTML index also links the slide decks when
    ``build/slides`` exists beside it."""
    slides = root.parent / "slides"
    rows = []
    for path in lesson_paths():
        cells = [f'<td class="num">{path.stem[:2]}</td>']
        for lang in LANGUAGES:
            page = root / lang / _page_name(path, kind)
            title = lesson_title(single_language(nbformat.read(path, as_version=4), lang))
            title = html.escape(title.split("·", 1)[-1].strip())
            cells.append(f'<td><a href="{lang}/{page.name}" lang="{LANGUAGES[lang].html_lang}">{title}</a></td>'
                         if page.exists() else f"<td>{title}</td>")
        if kind == "html":
            decks = [f'<a href="../slides/{lang}/{_page_name(path, "slides")}">{lang}</a>'
                     for lang in LANGUAGES if (slides / lang / _page_name(path, "slides")).exists()]
            cells.append(f"<td>{' · '.join(decks) or '—'}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    what = {"html": ("reading edition", "阅读版"), "slides": ("lecture slides", "课堂幻灯片")}[kind]
    head = "<th>#</th><th>English</th><th>中文</th>" + ("<th>Slides / 幻灯片</th>" if kind == "html" else "")
    keys = ("" if kind == "html" else
            "<p>Keys: → or Space next, ← previous, Esc overview, F full screen, S speaker view. "
            '<span lang="zh">按键：→ 或空格 下一页，← 上一页，Esc 总览，F 全屏，S 演讲者视图。</span></p>')
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Normalisation layers in deep learning · 深度学习中的归一化层 — {what[0]}</title>
<link rel="stylesheet" href="static/course.css">
</head>
<body>
<main class="course-index">
<h1>Normalisation layers in deep learning<br><span lang="zh">深度学习中的归一化层</span></h1>
<p>{what[0].capitalize()} · <span lang="zh">{what[1]}</span>. Every page works offline: scripts, styles and fonts are in the <code>vendor/</code> and <code>static/</code> folders next to this page (copy the whole folder).
<span lang="zh">所有页面均可离线使用：脚本、样式和字体都在本页所在目录下的 <code>vendor/</code> 与 <code>static/</code> 文件夹中（请整个文件夹一起拷贝）。</span></p>
{keys}
<p><img src="images/norm_map.png" alt="Which elements share statistics in each norm / 各种归一化中哪些元素共享统计量"></p>
<h2>Course map</h2>
{_course_map_html(root, kind, "en")}
<h2 lang="zh">课程地图</h2>
<div lang="zh">
{_course_map_html(root, kind, "zh")}
</div>
<h2>{"Pages" if kind == "html" else "Decks"} · <span lang="zh">{"页面" if kind == "html" else "幻灯片"}</span></h2>
<table class="course-pages">
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>
</main>
</body>
</html>
"""
    target = root / "index.html"
    _write(target, page)
    _log(f"[{kind}] {target.relative_to(root.parent.parent)}")
    return target


# ---------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="+", choices=["notebooks", "html", "slides", "all"])
    parser.add_argument("--lang", nargs="+", default=list(LANG_TAGS), choices=list(LANG_TAGS))
    parser.add_argument("--lessons", nargs="*", default=None, metavar="NN",
                        help="lesson prefixes, e.g. 01 05 (default: all)")
    parser.add_argument("--out", type=pathlib.Path, default=BUILD)
    parser.add_argument("--keep-edited", action="store_true",
                        help="notebooks: keep a copy that holds the learner's changes")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes writing the HTML pages and decks (default: 2, or 1 on one core)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    try:
        lessons = lesson_paths(args.lessons)
    except ValueError as err:
        parser.error(str(err))
    what = {"notebooks", "html", "slides"} if "all" in args.what else set(args.what)
    out = args.out.resolve()
    start = time.perf_counter()
    if "notebooks" in what:
        export_notebooks(args.lang, lessons, out, keep_edited=args.keep_edited)
    for kind in ("html", "slides"):
        if kind in what:
            export_pages(kind, args.lang, lessons, out, workers=args.jobs)
    _log(f"done in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
