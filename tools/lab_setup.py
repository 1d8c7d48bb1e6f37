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
  ``LabApp.custom_css`` is on; the same server configuration switches it on and serves
  ``/custom/`` from the course's ``static/jupyterlab/custom.css`` (an ``@font-face`` for the
  bundled Noto Sans CJK SC subset, put after JupyterLab's own fonts) and ``static/fonts/``,
  so Chinese text uses the course's font wherever the system has no Chinese font of its own.

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


#: the server configuration the course sets (merged into the environment's file)
SERVER_CONFIG = {
    "KernelManager": {"transport_encryption": "auto"},
    "LabApp": {"custom_css": True},
    # /custom/custom.css from static/jupyterlab/, /custom/fonts/.. from static/fonts/
    "ServerApp": {"static_custom_path": [str(STATIC / "jupyterlab"), str(STATIC)]},
}


def server_config_path(prefix: str | pathlib.Path = sys.prefix) -> pathlib.Path:
    """The Jupyter server configuration file of the environment ``prefix``."""
    return pathlib.Path(prefix) / "etc" / "jupyter" / "jupyter_server_config.json"


def write_server_config(prefix: str | pathlib.Path = sys.prefix,
                        curve: bool | None = None) -> tuple[pathlib.Path, dict]:
    """Merge :data:`SERVER_CONFIG` into ``prefix``'s server configuration (without the kernel
    encryption where pyzmq has no Curve support: ``curve`` = ``zmq.has("curve")``); return
    the path and what was set. Raises ``ValueError`` if the file is not a JSON object."""
    if curve is None:
        import zmq

        curve = zmq.has("curve")
    wanted = {k: dict(v) for k, v in SERVER_CONFIG.items() if curve or k != "KernelManager"}
    path = server_config_path(prefix)
    current = {}
    if path.exists():
        current = json.loads(path.read_text(encoding="utf-8") or "{}")
        if not isinstance(current, dict):
            raise ValueError(f"{path} is not a JSON object")
    for section, values in wanted.items():
        current.setdefault(section, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
    return path, wanted


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
    paths = course_notebooks()
    signed = trust(paths)
    print(f"trusted notebooks: {len(paths)} ({signed} newly signed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
