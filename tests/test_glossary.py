"""One Chinese term per concept: the glossary in docs/glossary.md, enforced on the course's prose.

The glossary's table lists, for each concept, the term the course uses and the variants it
rejects. These tests read that table (so the glossary is the single source) and fail when the
markdown of a lesson or the README uses a rejected variant. A Chinese name written as a gloss in
full-width parentheses right after the English name, e.g. ``BatchNorm（批归一化）``, is allowed.
"""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "docs" / "glossary.md"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# a gloss: a short Chinese name in full-width parentheses directly after a Latin letter
_GLOSS = re.compile(r"(?<=[A-Za-z])（[\u4e00-\u9fff、与]{1,12}）")


def rejected_terms(text: str) -> dict[str, str]:
    """{rejected variant: chosen term} from the glossary's markdown table."""
    out = {}
    rows = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    chosen_col = next(i for i, c in enumerate(header) if "选用" in c)
    rejected_col = next(i for i, c in enumerate(header) if "rejected" in c)
    for line in rows[2:]:  # skip the header and the |---| line
        cells = [c.strip() for c in line.strip("|").split("|")]
        for variant in filter(None, (v.strip() for v in cells[rejected_col].split(","))):
            out[variant] = cells[chosen_col]
    return out


def violations(text: str, rejected: dict[str, str]) -> list[str]:
    """Each rejected variant used in ``text`` outside a gloss, with a little context."""
    plain = _GLOSS.sub("", text)
    found = []
    for variant, chosen in rejected.items():
        for m in re.finditer(re.escape(variant), plain):
            context = plain[max(0, m.start() - 15):m.end() + 15].replace("\n", " ")
            found.append(f"{variant!r} (use {chosen!r}): …{context}…")
    return found


REJECTED = rejected_terms(GLOSSARY.read_text(encoding="utf-8"))


def test_glossary_table_is_read():
    # the variants that drifted between lessons must be in the table, each with its choice
    assert REJECTED["批归一化"] == "BatchNorm"
    assert REJECTED["运行统计量"] == REJECTED["滑动统计量"] == "滑动平均统计量"
    assert REJECTED["推理模式"] == "评估模式"
    assert REJECTED["灾难性相消"] == "灾难性抵消"
    assert REJECTED["词元"] == "token"
    assert len(REJECTED) >= 15


def test_checker_can_fail():
    """The check finds a rejected variant, and ignores a gloss after the English name."""
    assert violations("在评估模式下，批归一化使用运行统计量。", REJECTED) and len(
        violations("在评估模式下，批归一化使用运行统计量。", REJECTED)) == 2
    assert violations("BatchNorm（批归一化）在评估模式下使用滑动平均统计量。", REJECTED) == []
    assert violations("训练与推理模式下的输出", REJECTED)
    assert violations("（批归一化）", REJECTED)  # a parenthesis alone is not a gloss
    assert violations("LLaMA, 2023（使用 RMSNorm 的前置归一化）", REJECTED)  # nor a remark after a year


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_prose_uses_the_glossary(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            found += [f"cell {i}: {v}" for v in violations("".join(cell["source"]), REJECTED)]
    assert not found, "rejected terms (docs/glossary.md):\n" + "\n".join(found)


def test_readme_uses_the_glossary():
    found = violations((ROOT / "README.md").read_text(encoding="utf-8"), REJECTED)
    assert not found, "rejected terms (docs/glossary.md):\n" + "\n".join(found)
