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

* **An encrypted kernel connection.** JupyterLab talks to each kernel over local TCP
  sockets; by default jupyter_client gives the kernel no CurveZMQ keys, and ipykernel warns
  at every start that the connection "is susceptible to eavesdropping". The kernel of this
  environment declares Curve support (``metadata.supported_encryption`` of its kernelspec),
  so the course sets ``KernelManager.transport_encryption = "auto"`` in the environment's
  server configuration, ``<sys.prefix>/etc/jupyter/jupyter_server_config.json`` (keys
  already there are kept): JupyterLab then provisions keys and the connection is encrypted.
  Skipped, with a message, where pyzmq has no Curve support.
* **The course's Chinese font in JupyterLab.** On a machine without a Chinese font every
  Chinese cell would show boxes. JupyterLab 4 loads ``/custom/custom.css`` when
  ``LabApp.custom_css`` is on (the same server configuration switches it on) and serves
  ``/custom/`` from the user's Jupyter configuration folder (``~/.jupyter/custom/``, or
  ``$JUPYTER_CONFIG_DIR/custom/``). The course puts its block there (the rest of the file is
  kept): ``static/jupyterlab/custom.css``, an ``@font-face`` for the bundled Noto Sans CJK SC
  subset (copied beside it, from ``static/fonts/``), put after JupyterLab's own fonts, so
  Chinese text uses the course's font wherever the system has no Chinese font of its own.

``make lab`` runs it on every start, so lessons updated by ``git pull`` are trusted again.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import nbformat
from nbformat.sign import NotebookNotary

from .course import BUILD, NOTEBOOKS, STATIC

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
    return _merge_json(settings_path(prefix), LAB_SETTINGS)


def _merge_json(path: pathlib.Path, sections: dict) -> pathlib.Path:
    """Merge ``sections`` ({section: {key: value}}) into the JSON object in ``path``, keeping
    every other key, and write it back; raises ``ValueError`` if the file holds no JSON object."""
    current = {}
    if path.exists():
        current = json.loads(path.read_text(encoding="utf-8") or "{}")
        if not isinstance(current, dict):
            raise ValueError(f"{path} is not a JSON object")
    for section, values in sections.items():
        current.setdefault(section, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
    return path


#: the server configuration the course sets (merged into the environment's file)
SERVER_CONFIG = {
    "KernelManager": {"transport_encryption": "auto"},
    "LabApp": {"custom_css": True},
}


def server_config_path(prefix: str | pathlib.Path = sys.prefix) -> pathlib.Path:
    """The Jupyter server configuration file of the environment ``prefix``."""
    return pathlib.Path(prefix) / "etc" / "jupyter" / "jupyter_server_config.json"


def server_config(curve: bool | None = None) -> dict:
    """:data:`SERVER_CONFIG` without the kernel encryption where pyzmq has no Curve support
    (``curve`` = ``zmq.has("curve")``): what JupyterLab's server, and tools.bench's kernels
    (its ``KernelManager`` section), are given."""
    if curve is None:
        import zmq

        curve = zmq.has("curve")
    return {k: dict(v) for k, v in SERVER_CONFIG.items() if curve or k != "KernelManager"}


def write_server_config(prefix: str | pathlib.Path = sys.prefix,
                        curve: bool | None = None) -> tuple[pathlib.Path, dict]:
    """Merge :func:`server_config` into ``prefix``'s server configuration; return the path
    and what was set. Raises ``ValueError`` if the file is not a JSON object."""
    wanted = server_config(curve)
    return _merge_json(server_config_path(prefix), wanted), wanted


CUSTOM_CSS = STATIC / "jupyterlab" / "custom.css"
FONTS = ("NotoSansCJKsc-Regular-subset.otf", "NotoSansCJKsc-Bold-subset.otf", "OFL.txt")
BEGIN, END = "/* normalization-course: begin */", "/* normalization-course: end */"


def custom_dir(config_dir: str | pathlib.Path | None = None) -> pathlib.Path:
    """The folder JupyterLab serves at ``/custom/``: ``custom/`` in the Jupyter configuration
    folder (``jupyter --config-dir``)."""
    if config_dir is None:
        from jupyter_core.paths import jupyter_config_dir

        config_dir = jupyter_config_dir()
    return pathlib.Path(config_dir) / "custom"


def write_custom_css(config_dir: str | pathlib.Path | None = None) -> pathlib.Path:
    """Put the course's block (:data:`CUSTOM_CSS`, between :data:`BEGIN` and :data:`END`)
    into ``custom/custom.css`` of the Jupyter configuration folder, replacing an earlier one
    and keeping the rest of the file, and the fonts it loads into ``custom/fonts/``. Returns
    the stylesheet's path."""
    folder = custom_dir(config_dir)
    (folder / "fonts").mkdir(parents=True, exist_ok=True)
    for name in FONTS:
        source, target = STATIC / "fonts" / name, folder / "fonts" / name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            target.write_bytes(source.read_bytes())
    path = folder / "custom.css"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    start = text.find(BEGIN)
    if start >= 0:
        end = text.find(END, start)
        text = text[:start] + (text[end + len(END):].lstrip("\n") if end >= 0 else "")
    block = f"{BEGIN}\n{CUSTOM_CSS.read_text(encoding='utf-8').strip()}\n{END}\n"
    path.write_text((text.rstrip("\n") + "\n\n" if text.strip() else "") + block, encoding="utf-8")
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
    path, config = write_server_config()
    print(f"Jupyter server configuration: {json.dumps(config)} ({path})")
    if "KernelManager" not in config:
        print("  pyzmq has no CurveZMQ support here: kernel connections stay unencrypted")
    css = write_custom_css()
    print(f"JupyterLab custom CSS: the course's Chinese font ({css})")
    paths = course_notebooks()
    signed = trust(paths)
    print(f"trusted notebooks: {len(paths)} ({signed} newly signed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
