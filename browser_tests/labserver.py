"""JupyterLab as `make lab` serves it, started for a browser test on a free port: the course's
server configuration (tools.lab_setup: encrypted kernel connections, the Chinese font through
JupyterLab's custom CSS), fresh user settings (no windowing, so every cell is in the page, and
no news or update checks), and its own config, data and workspace folders under ``tmp``."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(tmp: pathlib.Path, root: pathlib.Path, cwd: pathlib.Path = ROOT,
               start_timeout_s: float = 90):
    """Serve ``root`` from JupyterLab; yields ``(base URL, token)`` and stops the server after.
    Its log is ``tmp / "jupyterlab.log"``; a server that does not answer within
    ``start_timeout_s`` fails the test with the log's end."""
    settings = tmp / "settings"
    for plugin, values in SETTINGS.items():
        f = settings / f"{plugin}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(values))
    # the server configuration that tools.lab_setup writes into the course's environment at
    # install and at every `make lab`, found through JUPYTER_CONFIG_PATH
    sys.path.insert(0, str(ROOT))
    from tools import lab_setup

    config_path, _ = lab_setup.write_server_config(tmp / "prefix")
    lab_setup.write_custom_css(tmp / "config")  # the user's ~/.jupyter, here a fresh one
    port, token = free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={settings}",
           f"--LabApp.workspaces_dir={tmp / 'workspaces'}"]
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "JUPYTER_CONFIG_DIR": str(tmp / "config"), "JUPYTER_DATA_DIR": str(tmp / "data"),
           "JUPYTER_CONFIG_PATH": os.pathsep.join([str(config_path.parent),
                                                   os.environ.get("JUPYTER_CONFIG_PATH", "")])}
    log_path = tmp / "jupyterlab.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + start_timeout_s
            while True:
                try:
                    with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + log_path.read_text()[-3000:])
                time.sleep(0.5)
            yield base, token
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def kernel_ids(base: str, token: str) -> list[str]:
    """The ids of the kernels the server runs (its REST API, ``/api/kernels``)."""
    req = urllib.request.Request(f"{base}/api/kernels", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return [k["id"] for k in json.loads(r.read())]


def wait_kernel_idle(page, timeout_s: float) -> None:
    """Wait until the open notebook's kernel is connected and idle: the status bar's kernel
    item reads "<kernel> | Idle". The toolbar's execution indicator is no sign of that: it shows
    idle from the moment the notebook is drawn, while the status bar still reads "No Kernel |
    Initializing". A Run All given then finds no kernel and opens the kernel chooser, and
    answering that replaces the kernel with a new one."""
    page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\S \| Idle$")).first.wait_for(
        timeout=timeout_s * 1000)
