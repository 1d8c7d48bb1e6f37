"""The single-language editions keep every code cell and output of the bilingual lessons.

`make export` writes `build/en/` and `build/zh/` by removing the other language's markdown
cells (nbconvert's TagRemovePreprocessor). Nothing else may change: then the strict nbval run
over `notebooks/` already proves that the editions' outputs reproduce, and CI need not execute
every lesson twice more. These tests hold the editions to that, cell by cell, against the raw
JSON of the lessons: in memory for every lesson (always), and on disk after `make export`
(`make test-exports`).
"""

import json

import nbformat
import pytest

from tools import course, export

LESSONS = course.lessons()
LANGS = ("en", "zh")


def _joined(value):
    """The notebook format stores strings as lists of lines: join them, recursively."""
    if isinstance(value, dict):
        return {k: _joined(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return "".join(value)
        return [_joined(v) for v in value]
    return value


def assert_same_code_and_outputs(edition: dict, lesson: dict, lang: str) -> None:
    """``edition`` (notebook JSON) has exactly ``lesson``'s code cells, in order, with the same
    source, outputs, execution counts and tags, and exactly its ``lang`` prose cells."""
    other = {"en": "lang-zh", "zh": "lang-en"}[lang]
    kept = [c for c in lesson["cells"] if other not in c["metadata"].get("tags", [])]
    cells = edition["cells"]
    assert len(cells) == len(kept), f"{len(cells)} cells, expected {len(kept)}"
    for i, (mine, theirs) in enumerate(zip(cells, kept)):
        assert mine["cell_type"] == theirs["cell_type"], f"cell {i}"
        assert _joined(mine["source"]) == _joined(theirs["source"]), f"cell {i}: source differs"
        if mine["cell_type"] == "code":
            assert _joined(mine["outputs"]) == _joined(theirs["outputs"]), f"cell {i}: outputs differ"
            assert mine["execution_count"] == theirs["execution_count"], f"cell {i}"
            assert (mine["metadata"].get("tags", []) == theirs["metadata"].get("tags", [])), f"cell {i}"
        else:
            assert f"lang-{lang}" in mine["metadata"]["tags"], f"cell {i}: not {lang} prose"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_every_edition_keeps_code_and_outputs(path, lang):
    lesson = json.loads(path.read_text(encoding="utf-8"))
    edition = export.single_language(nbformat.read(path, as_version=4), lang)
    assert_same_code_and_outputs(json.loads(nbformat.writes(edition)), lesson, lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_built_edition_on_disk(path, lang):
    built = course.BUILD / lang / path.name
    if not built.exists():
        pytest.skip(f"{built} not built (make export)")
    assert_same_code_and_outputs(json.loads(built.read_text(encoding="utf-8")),
                                 json.loads(path.read_text(encoding="utf-8")), lang)


def test_the_comparison_can_fail():
    lesson = json.loads(LESSONS[0].read_text(encoding="utf-8"))
    edition = json.loads(nbformat.writes(export.single_language(
        nbformat.read(LESSONS[0], as_version=4), "en")))
    code = next(c for c in edition["cells"] if c["cell_type"] == "code" and c["outputs"])
    code["outputs"] = []
    with pytest.raises(AssertionError, match="outputs differ"):
        assert_same_code_and_outputs(edition, lesson, "en")
    with pytest.raises(AssertionError, match="cells, expected"):
        assert_same_code_and_outputs({"cells": edition["cells"][1:]}, lesson, "en")
