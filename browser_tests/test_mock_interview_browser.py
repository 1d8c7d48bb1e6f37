"""The mock interview in a real JupyterLab (``make test-browser``): headless Chromium drives
``MockInterview(...).widget()`` and ``most_asked(...)`` in a small notebook built from
rubric'd questions written here, so the check does not depend on the lessons' content.

- the countdown is drawn and goes down while the kernel is idle (an asyncio task on the
  kernel's loop), reaches 0 and reveals the answer by itself;
- the revealed answer, the key points (checkboxes) and the red flags are typeset by
  JupyterLab's MathJax, with no TeX error;
- ticking key points and *Next* through the interview ends in the report by topic;
- ``most_asked`` renders its list with the answers folded, and an opened fold shows typeset
  math.

Screenshots go to ``build/browser/mock_*.png``. Chromium is Debian's (``$CHROMIUM``)."""

from __future__ import annotations

import json
import pathlib
import re
import time

import pytest

import labserver  # JupyterLab as `make lab` serves it (browser_tests/labserver.py)
from conftest import SHOTS

ROOT = pathlib.Path(__file__).resolve().parents[1]
playwright_api = pytest.importorskip("playwright.sync_api")

QUESTION_EN = """**Question 1. What does LayerNorm compute for a token $x \\in \\mathbb{R}^d$?**

$y = \\gamma \\odot (x - \\mu)/\\sqrt{\\sigma^2 + \\epsilon} + \\beta$ with $\\mu$ and the biased
$\\sigma^2$ over the $d$ features (section 1).

**Key points**
- statistics over the $d$ features of one token
- biased variance, $\\epsilon$ inside the root

**Red flags**
- "$(x - \\mu)/(\\sigma + \\epsilon)$": section 7 prints a gap of $10^{-2}$ for small inputs.
"""
QUESTION_ZH = """**问 1：对一个 token $x \\in \\mathbb{R}^d$，LayerNorm 计算什么？**

$y = \\gamma \\odot (x - \\mu)/\\sqrt{\\sigma^2 + \\epsilon} + \\beta$，其中 $\\mu$ 和有偏的
$\\sigma^2$ 取在 $d$ 个特征上（第 1 节）。

**要点**
- 在一个 token 的 $d$ 个特征上计算统计量
- 有偏方差，$\\epsilon$ 在根号内

**危险信号**
- “$(x - \\mu)/(\\sigma + \\epsilon)$”：第 7 节对小输入打印出 $10^{-2}$ 的差距。
"""


def _md(tags, source, cid):
    return {"cell_type": "markdown", "id": cid, "metadata": {"tags": tags}, "source": source}


def _write(path: pathlib.Path, cells) -> None:
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb), encoding="utf-8")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mock_lab")
    root = tmp / "root"
    root.mkdir()
    lesson = root / "02_demo.ipynb"
    _write(lesson, [_md(["lang-en"], "# 02 · LayerNorm: demo", "t0"),
                    _md(["lang-zh"], "# 02 · LayerNorm：演示", "t1"),
                    _md(["lang-en", "question"], QUESTION_EN, "qen1"),
                    _md(["lang-zh", "question"], QUESTION_ZH, "qzh1"),
                    _md(["lang-en", "question"], QUESTION_EN.replace("Question 1.", "Question 2.")
                        .replace("compute for", "return for"), "qen2"),
                    _md(["lang-zh", "question"], QUESTION_ZH.replace("问 1：", "问 2：")
                        .replace("计算什么", "返回什么"), "qzh2")])
    survey = {"sources": {"a": {}, "b": {}}, "asked": {"ln": {"question": "?", "sources": ["a", "b"]}},
              "questions": {"02:qen1": {"asked": ["ln"]}}}
    code = (f"from helpers.mock_interview import MockInterview, load_questions, most_asked\n"
            f"pool = load_questions([{str(lesson)!r}], survey={survey!r})\n"
            f"most_asked(2, questions=pool, survey={survey!r})")
    widget = "MockInterview(n=2, seed=0, seconds_per_question=8, questions=pool).widget()"
    _write(root / "mock.ipynb", [
        {"cell_type": "code", "id": "c1", "metadata": {}, "source": code, "outputs": [],
         "execution_count": None},
        {"cell_type": "code", "id": "c2", "metadata": {}, "source": widget, "outputs": [],
         "execution_count": None}])
    with labserver.jupyterlab(tmp, root, cwd=root) as (base, token):
        yield base, token


def test_mock_interview_widget_and_most_asked(lab, browser):
    base, token = lab
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{base}/lab/tree/mock.ipynb?token={token}")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=90_000)
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        listing, cell = cells.nth(0), cells.nth(1)
        # Run All from the Run menu, as a learner would, once the kernel is connected and idle
        # (labserver.wait_kernel_idle). Given earlier, it came to nothing or opened the kernel
        # chooser, and answering that replaced the kernel, losing a widget drawn from the first:
        # the likeliest cause of a CI run where the widget cell showed no Start button. Should
        # it still come to nothing (every prompt stays "[ ]:" for 5 s), it is given again. The
        # first cell imports torch: on a machine busy with other tests that alone can take a
        # minute.
        prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt")
        deadline = time.monotonic() + 180

        def fail(what, shot):
            page.screenshot(path=str(SHOTS / shot))
            pytest.fail(f"{what} (prompts {prompts.all_inner_texts()}; the widget cell shows "
                        f"{cell.locator('.jp-OutputArea').inner_text()[:300]!r}; kernels "
                        f"{labserver.kernel_ids(base, token)}; screenshot build/browser/{shot})")

        try:
            labserver.wait_kernel_idle(page, 120)
        except playwright_api.TimeoutError:
            fail("the kernel is not idle 120 s after the notebook opened", "mock_no_kernel.png")
        kernels = labserver.kernel_ids(base, token)
        assert len(kernels) == 1, f"kernels running when the notebook is idle: {kernels}"
        last_run = None
        while not listing.locator("details").count():
            if (all(t.strip() == "[ ]:" for t in prompts.all_inner_texts())
                    and (last_run is None or time.monotonic() - last_run > 5)):
                page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
                page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
                last_run = time.monotonic()
            if time.monotonic() > deadline:
                fail("the first cell showed no answers after 180 s", "mock_no_answers.png")
            page.wait_for_timeout(500)
        listing.locator("details").first.wait_for(timeout=30_000)
        assert listing.locator("details").count() == 2
        assert "asked in 2 of 2 surveyed collections" in listing.inner_text()
        listing.locator("details summary").first.click()
        page.wait_for_function("el => el.querySelectorAll('details[open] mjx-container').length > 3",
                               arg=listing.element_handle(), timeout=30_000)
        page.screenshot(path=str(SHOTS / "mock_most_asked.png"))

        # the widget cell has run (its prompt shows a count) and the widget is drawn
        ran_by = time.monotonic() + 120
        while not re.fullmatch(r"\[\d+\]:", prompts.nth(1).inner_text().strip()):
            if time.monotonic() > ran_by:
                fail("the widget cell has not run 120 s after the first showed its answers",
                     "mock_no_widget.png")
            page.wait_for_timeout(500)
        start = cell.locator("button", has_text="Start")
        try:
            start.wait_for(timeout=60_000)
        except playwright_api.TimeoutError:
            fail("no Start button 60 s after the widget cell ran", "mock_no_widget.png")

        # the widget: start, watch the countdown go down, let it reach 0. 8 s a question leaves
        # a browser slowed by other tests the time to see it at 3 s or more, and then change.
        start.click()
        clock = cell.locator(".widget-html").nth(1)
        page.wait_for_function("el => /0:0[3-8] left/.test(el.innerText)", arg=clock.element_handle(),
                               timeout=15_000)
        first = clock.inner_text()
        page.wait_for_function("([el, t]) => el.innerText !== t && /left/.test(el.innerText)",
                               arg=[clock.element_handle(), first], timeout=15_000)
        cell.screenshot(path=str(SHOTS / "mock_countdown.png"))
        page.wait_for_function("el => /answered in/.test(el.innerText)", arg=clock.element_handle(),
                               timeout=15_000)  # revealed by itself at 0
        boxes = cell.locator("input[type=checkbox]")
        boxes.nth(1).wait_for(timeout=15_000)
        assert boxes.count() == 2
        page.wait_for_function("el => el.querySelectorAll('mjx-container').length > 6",
                               arg=cell.element_handle(), timeout=30_000)
        assert page.locator("mjx-merror").count() == 0, "a formula failed to typeset"
        assert "Red flags" in cell.inner_text() and "危险信号" in cell.inner_text()
        boxes.first.check()
        cell.screenshot(path=str(SHOTS / "mock_revealed.png"))
        cell.locator("button", has_text="Next").click()
        cell.locator("button", has_text="Reveal").click()
        cell.locator("input[type=checkbox]").nth(1).wait_for(timeout=15_000)
        cell.locator("button", has_text="Next").click()
        cell.locator("h3", has_text="Report").wait_for(timeout=15_000)
        report = cell.inner_text()
        assert "Report / 报告: 0.50 of 2 (25%)" in report and "lesson 02 · LayerNorm" in report
        assert "Revise / 复习" in report
        cell.screenshot(path=str(SHOTS / "mock_report.png"))
        # everything ran on the kernel JupyterLab started for the notebook: none replaced it
        assert labserver.kernel_ids(base, token) == kernels
    finally:
        context.close()
