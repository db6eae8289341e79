"""A quiet, offline JupyterLab on localhost and Debian's Chromium driven by Playwright, for tests/browser.

`JupyterLab` starts `python -m jupyterlab` (this interpreter, or MINISPEC_BROWSER_PYTHON) on a free port with a token, its own config, settings, runtime
and workspace folders (so nothing of the user's is read or written), news and update checks off, and the
notebook's windowing off (every cell stays in the page, so the test can read them all). `launch_chromium`
opens Debian's /usr/bin/chromium (Playwright's own browser download is not used) with the flags that keep it
off the network. `missing_browser_deps()` says why the browser test cannot run here, or None.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
# JupyterLab user settings: no news or update checks, no cell windowing, the notebook's kernel started without
# asking, no autosave of the test copies.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
        "autoStartDefaultKernel": True,
    },
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
}


def missing_browser_deps() -> str | None:
    """Why the browser test cannot run on this machine (Chromium or playwright missing), or None."""
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} not found (Debian: `apt-get install chromium`, or `make browser-deps`)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (`make browser-deps`)"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterLab:
    """`jupyter lab` serving root_dir on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        root_dir: Path,
        work_dir: Path,
        env: dict[str, str] | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.root_dir, self.work_dir = Path(root_dir), Path(work_dir)
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.extra_env = env or {}
        self.start_timeout_s = start_timeout_s
        self.log_path = self.work_dir / "jupyter-lab.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        args = [
            os.environ.get("MINISPEC_BROWSER_PYTHON", sys.executable),
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            "--ServerApp.terminals_enabled=False",
            "--ServerApp.log_level=WARN",
            f"--LabApp.user_settings_dir={self.work_dir / 'settings'}",
            f"--LabApp.workspaces_dir={self.work_dir / 'workspaces'}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if os.geteuid() == 0:
            args.append("--allow-root")
        return args

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(self.work_dir / "config"),
            JUPYTER_RUNTIME_DIR=str(self.work_dir / "runtime"),
            JUPYTER_DATA_DIR=str(self.work_dir / "data"),
            JUPYTER_PLATFORM_DIRS="1",
        )
        env.update(self.extra_env)
        return env

    def write_settings(self) -> None:
        for name in ("config", "runtime", "data", "workspaces"):
            (self.work_dir / name).mkdir(parents=True, exist_ok=True)
        for rel, settings in LAB_SETTINGS.items():
            path = self.work_dir / "settings" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(settings))

    def api(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def start(self) -> None:
        self.write_settings()
        log = self.log_path.open("w")
        self.process = subprocess.Popen(
            self.command(),
            env=self.environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.process.returncode}:\n{self.log()}")
            try:
                self.api("/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"jupyter lab did not answer within {self.start_timeout_s:.0f} s:\n{self.log()}")

    def shutdown_sessions(self, path: str | None = None) -> None:
        """Stop the kernels of the notebook at `path` (relative to root_dir), or all, so chapters do not pile
        up in memory."""
        for session in self.api("/api/sessions"):
            if path is None or session.get("path") == path:
                self.api(f"/api/sessions/{session['id']}", method="DELETE")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.is_file() else ""

    def __enter__(self) -> JupyterLab:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def launch_chromium(playwright: Any, profile_dir: Path, viewport: tuple[int, int] = (1400, 1000)) -> Any:
    """A Playwright browser context on Debian's Chromium with a fresh profile and no network chatter."""
    if profile_dir.exists():
        shutil.rmtree(profile_dir)
    profile_dir.mkdir(parents=True)
    return playwright.chromium.launch_persistent_context(
        user_data_dir=str(profile_dir),
        executable_path=str(CHROMIUM),
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": viewport[0], "height": viewport[1]},
    )
