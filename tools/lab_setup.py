"""Make JupyterLab start quietly on the course: the last step of the install.

    python -m tools.lab_setup          # run with the course's Python (.venv/bin/python)

It does two things, both idempotent, and says what it did:

* **No news pop-up.** JupyterLab asks on first start whether to fetch news from the internet
  and, if allowed, checks for new versions. The course turns both off in the settings
  overrides of the environment it runs in, ``<sys.prefix>/share/jupyter/lab/settings/
  overrides.json`` (keys already there are kept), so nothing is fetched and nothing pops up.
* **Trusted notebooks.** A notebook that Jupyter has not signed opens "not trusted": its
  saved HTML and JavaScript outputs (the explorers' widget views) are not shown until the
  learner re-runs it. The lessons (``notebooks/``) and the single-language copies that
  ``make lab LANG=..`` writes (``build/en``, ``build/zh``) are signed with the user's own
  Jupyter key (``jupyter trust``, run from Python so that it works the same on Windows).

``make lab`` runs it on every start, so lessons updated by ``git pull`` are trusted again.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import nbformat
from nbformat.sign import NotebookNotary

from .course import BUILD, NOTEBOOKS

#: the settings the course sets, per JupyterLab plugin
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}


def settings_path(prefix: str | pathlib.Path = sys.prefix) -> pathlib.Path:
    """The settings overrides file that JupyterLab reads in the environment ``prefix``."""
    return pathlib.Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def write_lab_settings(prefix: str | pathlib.Path = sys.prefix) -> pathlib.Path:
    """Merge :data:`LAB_SETTINGS` into ``prefix``'s overrides file; return its path. Raises
    ``ValueError`` if the file exists but is not a JSON object."""
    path = settings_path(prefix)
    current = {}
    if path.exists():
        current = json.loads(path.read_text(encoding="utf-8") or "{}")
        if not isinstance(current, dict):
            raise ValueError(f"{path} is not a JSON object")
    for plugin, values in LAB_SETTINGS.items():
        current.setdefault(plugin, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
    return path


def course_notebooks() -> list[pathlib.Path]:
    """The lessons and the single-language copies that exist."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    for lang in ("en", "zh"):
        paths += sorted((BUILD / lang).glob("[0-9][0-9]_*.ipynb"))
    return paths


def trust(paths: list[pathlib.Path], notary: NotebookNotary | None = None) -> int:
    """Sign every notebook in ``paths`` with the user's Jupyter key; return how many were
    newly signed (a notebook already trusted is left alone)."""
    notary = notary or NotebookNotary()
    signed = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if not notary.check_signature(nb):
            notary.sign(nb)
            signed += 1
    return signed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    path = write_lab_settings()
    print(f"JupyterLab settings: news and update checks off ({path})")
    paths = course_notebooks()
    signed = trust(paths)
    print(f"trusted notebooks: {len(paths)} ({signed} newly signed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
