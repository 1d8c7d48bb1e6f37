"""docs/interview_survey.json: well formed (spec section 3), every source cited by an https URL,
every canonical question citing a known source, every mapping naming a known canonical
question, every pool question of the repository's notebooks mapped; tools.interview_survey's
frequency, check and page against hand-built surveys."""

import json
import re

import pytest

from helpers import mock_interview as M
from tools import interview_survey as S

SURVEY = S.load()


def test_the_survey_has_the_three_tables_and_nothing_else():
    assert set(SURVEY) == {"sources", "asked", "questions"}
    assert S.problems(SURVEY) == []


def test_every_source_is_an_https_url_of_a_known_kind():
    assert len(SURVEY["sources"]) >= 12
    for sid, s in SURVEY["sources"].items():
        assert s["url"].startswith("https://"), sid
        assert re.match(r"https://[a-z0-9.-]+\.[a-z]{2,}/", s["url"]), sid
        assert s["kind"] in ("repository", "page"), sid
        assert s["title"].strip() and s["note"].strip(), sid
        if s["kind"] == "repository":
            assert s["url"].startswith("https://github.com/"), sid
            # the version read is stated
            assert re.search(r"commit [0-9a-f]{12}", s["note"]), sid
    kinds = {s["kind"] for s in SURVEY["sources"].values()}
    assert kinds == {"repository", "page"}


def test_every_canonical_question_cites_known_sources():
    for cid, a in SURVEY["asked"].items():
        assert a["question"].strip(), cid
        assert a["sources"], cid
        assert len(set(a["sources"])) == len(a["sources"]), cid
        assert set(a["sources"]) <= set(SURVEY["sources"]), cid
    # every source read asks at least one canonical question
    cited = {sid for a in SURVEY["asked"].values() for sid in a["sources"]}
    assert cited == set(SURVEY["sources"])


def test_every_mapped_canonical_id_exists():
    for key, q in SURVEY["questions"].items():
        assert re.fullmatch(r"\d\d:[A-Za-z0-9_-]+", key), key
        assert q["front"].strip(), key
        assert len(set(q["asked"])) == len(q["asked"]), key
        assert set(q["asked"]) <= set(SURVEY["asked"]), key


def test_every_pool_question_is_mapped():
    """Fails while lessons gain questions the survey has not mapped yet: run
    ``python -m tools.interview_survey`` to list them."""
    unmapped, stale = S.check(SURVEY)
    assert unmapped == [], unmapped
    assert stale == [], stale
    pool = S.pool()
    for key, front in pool.items():
        assert SURVEY["questions"][key]["front"] == front, key


def test_pool_keys_are_the_english_question_cells():
    pool = S.pool()
    questions = M.load_questions()
    assert len(pool) == len(questions)
    assert list(pool.values()) == [q.front_en for q in questions]
    for key in pool:
        lesson, cell_id = key.split(":", 1)
        (path,) = S.NOTEBOOKS.glob(f"{lesson}_*.ipynb")
        cells = {c["id"]: c for c in json.loads(path.read_text(encoding="utf-8"))["cells"]}
        tags = cells[cell_id]["metadata"]["tags"]
        assert "question" in tags and "lang-en" in tags


def _survey():
    return {
        "sources": {"a": {"title": "A", "url": "https://example.org/a", "kind": "page",
                          "note": "q1"},
                    "b": {"title": "B", "url": "https://github.com/x/y", "kind": "repository",
                          "note": "q2"},
                    "c": {"title": "C", "url": "https://example.org/c", "kind": "page",
                          "note": "q3"}},
        "asked": {"x": {"question": "X?", "sources": ["a", "b"]},
                  "y": {"question": "Y?", "sources": ["b", "c"]},
                  "z": {"question": "Z?", "sources": ["c"]}},
        "questions": {"01:p": {"front": "P?", "asked": ["x", "y"]},
                      "01:q": {"front": "Q?", "asked": ["z"]},
                      "02:r": {"front": "R?", "asked": []}},
    }


def test_frequency_counts_distinct_sources_over_canonical_ids():
    s = _survey()
    # x: {a, b}, y: {b, c} -> 3 distinct, not 4
    assert S.frequency(s, "01:p") == 3
    assert S.frequency(s, "01:q") == 1
    assert S.frequency(s, "02:r") == 0
    assert S.frequency(s, "03:missing") == 0
    assert S.ranking(s) == [("x", 2), ("y", 2), ("z", 1)]
    assert S.pool_ranking(s) == [("01:p", 3), ("01:q", 1), ("02:r", 0)]


@pytest.mark.parametrize("breakage, message", [
    (lambda s: s["sources"]["a"].update(url="http://example.org/a"), "not https"),
    (lambda s: s["sources"]["a"].update(kind="blog"), "kind"),
    (lambda s: s["asked"]["z"].update(sources=[]), "cites no source"),
    (lambda s: s["asked"]["z"].update(sources=["d"]), "unknown source"),
    (lambda s: s["asked"]["z"].update(sources=["c", "c"]), "twice"),
    (lambda s: s["questions"]["02:r"].update(asked=["w"]), "unknown canonical id"),
    (lambda s: s.pop("asked"), "top-level keys"),
    (lambda s: s["questions"]["02:r"].pop("front"), "fields"),
])
def test_problems_names_each_breakage(breakage, message):
    s = _survey()
    assert S.problems(s) == []
    breakage(s)
    found = S.problems(s)
    assert len(found) == 1 and message in found[0], found


def test_check_finds_unmapped_and_stale_questions(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "id": "t", "metadata": {"tags": ["lang-en"]},
         "source": "# 01 · Topic: x"},
        {"cell_type": "markdown", "id": "t-zh", "metadata": {"tags": ["lang-zh"]},
         "source": "# 01 · 主题：x"},
        {"cell_type": "markdown", "id": "q1", "metadata": {"tags": ["lang-en", "question"]},
         "source": "**Question 1. P?**\n\nAnswer."},
        {"cell_type": "markdown", "id": "q1-zh", "metadata": {"tags": ["lang-zh", "question"]},
         "source": "**问 1：P？**\n\n答。"},
        {"cell_type": "markdown", "id": "q2", "metadata": {"tags": ["lang-en", "question"]},
         "source": "**Question 2. New?**\n\nAnswer."},
        {"cell_type": "markdown", "id": "q2-zh", "metadata": {"tags": ["lang-zh", "question"]},
         "source": "**问 2：新？**\n\n答。"},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "01_topic.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    assert S.pool(tmp_path) == {"01:q1": "P?", "01:q2": "New?"}
    s = _survey()
    s["questions"] = {"01:q1": {"front": "P?", "asked": ["x"]},
                      "01:gone": {"front": "Gone?", "asked": []}}
    assert S.check(s, tmp_path) == (["01:q2"], ["01:gone"])
    path = tmp_path / "survey.json"
    path.write_text(json.dumps(s), encoding="utf-8")
    assert S.main(["--survey", str(path), "--notebooks", str(tmp_path)]) == 1
    s["questions"]["01:q2"] = {"front": "New?", "asked": []}
    s["questions"]["01:q1"]["front"] = "P, as first worded?"
    path.write_text(json.dumps(s), encoding="utf-8")
    assert S.main(["--survey", str(path), "--notebooks", str(tmp_path)]) == 0
    # --sync: the pool's fronts, pool order, the stale entry gone, the mappings kept
    page = tmp_path / "page.md"
    assert S.main(["--survey", str(path), "--notebooks", str(tmp_path), "--sync",
                   "--markdown", "--page", str(page)]) == 0
    synced = S.load(path)
    assert synced["questions"] == {"01:q1": {"front": "P?", "asked": ["x"]},
                                   "01:q2": {"front": "New?", "asked": []}}
    assert synced["sources"] == s["sources"] and synced["asked"] == s["asked"]
    assert page.read_text(encoding="utf-8") == S.markdown(synced)
    # an unmapped question is not mapped by --sync
    del synced["questions"]["01:q2"]
    S.dump(synced, path)
    assert S.main(["--survey", str(path), "--notebooks", str(tmp_path), "--sync"]) == 1
    assert "01:q2" not in S.load(path)["questions"]


def test_the_page_is_the_json_rendered():
    page = (S.ROOT / "docs" / "interview_survey.md").read_text(encoding="utf-8")
    assert page == S.markdown(SURVEY), "run python -m tools.interview_survey --markdown"
    for sid, s in SURVEY["sources"].items():
        assert f"]({s['url']})" in page, sid
    for heading in ("## Method", "## Sources", "## Canonical questions",
                    "## The 20 most asked", "## Caveats"):
        assert heading in page
