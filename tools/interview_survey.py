r"""The interview survey: how often public interview collections ask each course question.

``docs/interview_survey.json`` holds three tables:

- ``sources``: every collection read (title, https URL, ``repository`` or ``page``, and where
  in it the normalisation questions are);
- ``asked``: the canonical questions found there, each with the sources that ask it
  (rewordings of one question merged);
- ``questions``: every question of the course's pool, keyed ``"<NN>:<English cell id>"``,
  with its English front and the canonical questions it answers (``[]`` when no surveyed
  collection asks it).

A pool question's frequency is the number of distinct sources asking any of its canonical
questions (:func:`frequency`); helpers.mock_interview weights the mock interview's draw and
orders the flashcards by it.

Command line (from the repository root)::

    python -m tools.interview_survey                      # check: pool questions lacking a mapping
    python -m tools.interview_survey --notebooks DIR      # the same against another notebooks folder
    python -m tools.interview_survey --markdown           # rewrite docs/interview_survey.md
    python -m tools.interview_survey --sync --markdown    # after lessons changed: fronts and page

The check prints the pool questions with no entry under ``questions`` (and entries that are no
longer in the pool, and fronts that were reworded) and exits with status 1 if any pool question
is unmapped. ``--sync`` rewrites the JSON with the pool's current English fronts and without the
entries no longer in the pool; it maps nothing: an unmapped question needs a person to read it.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections import Counter
from typing import Sequence

from helpers.mock_interview import QUESTION_CELL, load_questions, _unnumbered

ROOT = pathlib.Path(__file__).resolve().parents[1]
SURVEY = ROOT / "docs" / "interview_survey.json"
MARKDOWN = ROOT / "docs" / "interview_survey.md"
NOTEBOOKS = ROOT / "notebooks"

KINDS = ("repository", "page")


def load(path: pathlib.Path = SURVEY) -> dict:
    """The survey as a dict (``sources``, ``asked``, ``questions``)."""
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def problems(survey: dict) -> list[str]:
    """Everything malformed in ``survey``: missing tables or fields, a URL that is not https,
    an unknown kind, a canonical question citing no source or an unknown one, a pool question
    naming an unknown canonical id. Empty when the survey is well formed."""
    out = []
    if set(survey) != {"sources", "asked", "questions"}:
        out.append(f"top-level keys {sorted(survey)} are not sources, asked, questions")
        return out
    for sid, s in survey["sources"].items():
        if set(s) != {"title", "url", "kind", "note"}:
            out.append(f"source {sid}: fields {sorted(s)}")
            continue
        if not s["url"].startswith("https://"):
            out.append(f"source {sid}: URL {s['url']!r} is not https")
        if s["kind"] not in KINDS:
            out.append(f"source {sid}: kind {s['kind']!r}")
        if not s["title"].strip() or not s["note"].strip():
            out.append(f"source {sid}: empty title or note")
    for cid, a in survey["asked"].items():
        if set(a) != {"question", "sources"}:
            out.append(f"asked {cid}: fields {sorted(a)}")
            continue
        if not a["sources"]:
            out.append(f"asked {cid}: cites no source")
        if len(set(a["sources"])) != len(a["sources"]):
            out.append(f"asked {cid}: a source listed twice")
        for sid in a["sources"]:
            if sid not in survey["sources"]:
                out.append(f"asked {cid}: unknown source {sid!r}")
    for key, q in survey["questions"].items():
        if set(q) != {"front", "asked"}:
            out.append(f"question {key}: fields {sorted(q)}")
            continue
        for cid in q["asked"]:
            if cid not in survey["asked"]:
                out.append(f"question {key}: unknown canonical id {cid!r}")
    return out


def frequency(survey: dict, key: str) -> int:
    """Distinct sources asking any canonical question of pool question ``key`` (0 if none)."""
    cids = survey["questions"].get(key, {}).get("asked", [])
    return len({sid for cid in cids for sid in survey["asked"][cid]["sources"]})


def pool(notebooks: pathlib.Path = NOTEBOOKS) -> dict[str, str]:
    """The course's pool (helpers.mock_interview.load_questions over ``notebooks``) as
    ``{"<NN>:<English cell id>": English front}``, in pool order."""
    notebooks = pathlib.Path(notebooks)
    paths = sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))
    cells: dict[str, dict[str, str]] = {}
    for path in paths:
        ids = cells.setdefault(path.name[:2], {})
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            tags = cell.get("metadata", {}).get("tags", [])
            if cell.get("cell_type") != "markdown" or "question" not in tags or "lang-en" not in tags:
                continue
            source = cell.get("source", "")
            m = QUESTION_CELL.match("".join(source) if isinstance(source, list) else source)
            if m:
                ids.setdefault(_unnumbered(m["front"]), cell["id"])
    try:  # frequencies are not wanted here, and must not depend on the survey being read
        questions = load_questions(paths, survey=None)
    except TypeError:  # a load_questions without the survey argument
        questions = load_questions(paths)
    return {f"{q.lesson}:{getattr(q, 'cell_id', '') or cells[q.lesson][q.front_en]}": q.front_en
            for q in questions}


def check(survey: dict, notebooks: pathlib.Path = NOTEBOOKS) -> tuple[list[str], list[str]]:
    """``(unmapped, stale)``: pool keys with no entry under ``questions``, and entries under
    ``questions`` whose key is not in the pool of ``notebooks``."""
    keys = pool(notebooks)
    unmapped = [k for k in keys if k not in survey["questions"]]
    stale = [k for k in survey["questions"] if k not in keys]
    return unmapped, stale


def sync(survey: dict, notebooks: pathlib.Path = NOTEBOOKS) -> dict:
    """``survey`` with the pool's English fronts, its entries in pool order, and without the
    entries whose key is no longer in the pool of ``notebooks``. Unmapped questions stay
    unmapped."""
    keys = pool(notebooks)
    questions = {k: {"front": front, "asked": survey["questions"][k]["asked"]}
                 for k, front in keys.items() if k in survey["questions"]}
    return {"sources": survey["sources"], "asked": survey["asked"], "questions": questions}


def dump(survey: dict, path: pathlib.Path = SURVEY) -> None:
    """Write ``survey`` as the repository keeps it (UTF-8, indented, final newline)."""
    pathlib.Path(path).write_text(json.dumps(survey, ensure_ascii=False, indent=1) + "\n",
                                  encoding="utf-8")


def ranking(survey: dict) -> list[tuple[str, int]]:
    """Canonical ids with the number of sources asking each, most asked first (ties by id)."""
    return sorted(((cid, len(a["sources"])) for cid, a in survey["asked"].items()),
                  key=lambda t: (-t[1], t[0]))


def pool_ranking(survey: dict) -> list[tuple[str, int]]:
    """Pool keys with their frequency, most asked first (ties in pool order)."""
    keys = list(survey["questions"])
    return sorted(((k, frequency(survey, k)) for k in keys),
                  key=lambda t: (-t[1], keys.index(t[0])))


# ------------------------------------------------------------------------------ markdown
_INTRO = """\
# Interview survey · 面试题调查

How often do public interview collections ask each of the course's interview questions? This
page and `docs/interview_survey.json` record a survey of {n_sources} public collections
({n_repos} GitHub repositories and {n_pages} web pages, English and Chinese) that contain
questions on normalisation layers. The mock interview and the flashcards of lesson 12 are
weighted and ordered by it, and lesson 12 opens with the most asked questions.

本页和 `docs/interview_survey.json` 记录了一次调查：在 {n_sources} 个公开的面试题集（{n_repos} 个 GitHub
仓库、{n_pages} 个网页，中英文都有）里，课程的每道面试题被问到的频率。第 12 课的模拟面试和抽认卡按这个频率
加权和排序，第 12 课开头列出被问得最多的题目。

## Method · 方法

1. Collections were found by searching stored copies of GitHub repositories and web pages for
   interview questions on BatchNorm, LayerNorm, RMSNorm, GroupNorm / InstanceNorm, Pre-LN /
   Post-LN, DeepNorm, weight normalisation and SyncBN (English and Chinese queries, e.g.
   "deep learning interview questions batch normalization", "大模型面试题 LayerNorm").
2. Each collection was read where its normalisation questions are (the table below says where,
   and which commit of a repository was read). Only what was read counts: a question list whose
   answers were not read still counts its questions; a page whose stored copy ends part-way
   counts only the questions read.
3. A collection *asks* a question when it poses it as a question, a question-style heading, or
   an item of an interview topic list. Rewordings of one question are merged into one canonical
   question (table "asked" in the JSON); a collection counts once per canonical question, however
   many times it asks it.
4. Every question of the course's pool (the question cells of every lesson, as
   `helpers.mock_interview.load_questions` reads them) is mapped to the canonical questions it
   answers, or to none. Its frequency is the number of distinct collections asking any of them.
5. `python -m tools.interview_survey` lists the pool questions that lack a mapping (exit status 1
   if any) and the questions reworded since they were mapped; `--sync` takes the pool's current
   fronts into the JSON and drops questions no longer in the pool; `--markdown` rewrites this
   page from the JSON.
"""

_CAVEATS = """\
## Caveats · 局限

- **The sample is what was read**: {n_sources} collections, found through stored copies of
  GitHub and of web pages, not a random sample of interviews. Collections about LLMs
  over-represent Transformer questions; the classic deep-learning collections over-represent
  BatchNorm.
- **Counts are presence, not weighted popularity**: a 40-question grill and a one-question blog
  post count the same, once per canonical question. Collections copy each other (several Chinese
  lists share wording), so counts are not independent; where one collection copies another's
  questions word for word, only the original is credited (DA-southampton's Transformer list,
  reproduced in wdndev's notes; a CSDN mirror of the km1994 question list was not counted).
- **Merging is a judgement**: where a course question answers a broader or narrower canonical
  question it is mapped to it; a frequency of 0 means no surveyed collection asks it, not that
  interviewers never do (kernel, DyT and norm-free questions are asked in the papers' own
  discussions, not in these lists).
- Practical questions (weight decay on γ and β, freezing BatchNorm for fine-tuning, BatchNorm
  under SWA / EMA or int8) are discussed in Q&A threads and blog posts, but no surveyed interview
  collection poses them; they count 0 here.
- Stored copies are not live pages: a collection may have changed since the commit read.
"""


def markdown(survey: dict) -> str:
    """The readable page: method, sources with links, canonical questions ranked by the number
    of sources asking them, the 20 most asked pool questions, the unasked ones, and caveats."""
    src = survey["sources"]
    kinds = Counter(s["kind"] for s in src.values())
    fmt = dict(n_sources=len(src), n_repos=kinds["repository"], n_pages=kinds["page"])
    lines = [_INTRO.format(**fmt)]

    lines += ["## Sources · 来源", "",
              "| id | collection | kind | where the normalisation questions are |",
              "| --- | --- | --- | --- |"]
    for sid, s in src.items():
        note = s["note"].replace("|", "\\|")
        lines.append(f"| `{sid}` | [{s['title']}]({s['url']}) | {s['kind']} | {note} |")
    lines.append("")

    asked_by = {cid: [] for cid in survey["asked"]}
    for key, q in survey["questions"].items():
        for cid in q["asked"]:
            asked_by[cid].append(key)
    lines += ["## Canonical questions, most asked first · 归并后的问题（按被问次数排序）", "",
              "| rank | sources | canonical question | sources asking it | course questions |",
              "| ---: | ---: | --- | --- | --- |"]
    rank = 0
    previous = None
    for i, (cid, n) in enumerate(ranking(survey), 1):
        if n != previous:
            rank, previous = i, n
        a = survey["asked"][cid]
        course = ", ".join(f"`{k}`" for k in asked_by[cid]) or "none"
        lines.append(f"| {rank} | {n} | {a['question']} (`{cid}`) | "
                     f"{', '.join(a['sources'])} | {course} |")
    lines.append("")

    ranked = pool_ranking(survey)
    lines += ["## The 20 most asked course questions · 被问得最多的 20 道课程题目", "",
              "Frequency = distinct sources asking any of the question's canonical questions. "
              "Ties are listed in course order; the twentieth place is shared by every question "
              "with the same frequency.", "",
              "| rank | frequency | lesson | question | canonical |",
              "| ---: | ---: | --- | --- | --- |"]
    rank, previous = 0, None
    cutoff = ranked[19][1] if len(ranked) >= 20 else 0
    for i, (key, n) in enumerate(ranked, 1):
        if n < cutoff or (i > 20 and n == 0):
            break
        if n != previous:
            rank, previous = i, n
        q = survey["questions"][key]
        lines.append(f"| {rank} | {n} | {key.split(':')[0]} | {q['front']} | "
                     f"{', '.join(q['asked'])} |")
    lines.append("")

    zero = [k for k, n in ranked if n == 0]
    total = len(ranked)
    lines += ["## Coverage · 覆盖", "",
              f"{total - len(zero)} of the {total} pool questions are asked by at least one "
              f"surveyed collection; {len(zero)} are not (frequency 0). "
              f"{sum(1 for cid in asked_by if not asked_by[cid])} of the "
              f"{len(survey['asked'])} canonical questions have no course question mapped to "
              "them: " + (", ".join(f"`{cid}`" for cid in asked_by if not asked_by[cid])
                          or "none") + ".", ""]
    lines.append(_CAVEATS.format(**fmt))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--survey", type=pathlib.Path, default=SURVEY)
    parser.add_argument("--notebooks", type=pathlib.Path, default=NOTEBOOKS)
    parser.add_argument("--markdown", action="store_true",
                        help="rewrite the page (docs/interview_survey.md) from the JSON")
    parser.add_argument("--sync", action="store_true",
                        help="rewrite the JSON with the pool's fronts, without stale entries")
    parser.add_argument("--page", type=pathlib.Path, default=MARKDOWN, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    survey = load(args.survey)
    bad = problems(survey)
    for p in bad:
        print(f"malformed: {p}")
    keys = pool(args.notebooks)
    for k, front in keys.items():
        if k in survey["questions"] and survey["questions"][k]["front"] != front:
            print(f"reworded: {k}  {survey['questions'][k]['front']!r} -> {front!r}")
    if args.sync and not bad:
        survey = sync(survey, args.notebooks)
        dump(survey, args.survey)
        print(f"wrote {args.survey}")
    if args.markdown:
        args.page.write_text(markdown(survey), encoding="utf-8")
        print(f"wrote {args.page}")
    unmapped, stale = check(survey, args.notebooks)
    for k in unmapped:
        print(f"unmapped: {k}  {keys[k]}")
    for k in stale:
        print(f"not in the pool (stale entry): {k}  {survey['questions'][k]['front']}")
    print(f"{len(keys) - len(unmapped)} of {len(keys)} pool questions mapped, "
          f"{len(unmapped)} unmapped, {len(stale)} stale entries")
    return 1 if unmapped or bad else 0


if __name__ == "__main__":
    sys.exit(main())
