"""The wheel works: built, installed into a fresh venv and run from outside the repository.

``pip install .`` (not editable) must give a working app: the stylesheet, the presets,
the Theory page's text and the KaTeX fonts of the top-level ``assets/`` folder ship
inside the wheel (as ``app.assets``) and are read from the installed copy. Marker
``slow`` (about 20-30 s).

* The wheel is built by pip from a copy of the sources (nothing is written into the
  repository), without build isolation when this interpreter can build wheels by
  itself, else with the build requirements pip fetches from its configured index.
* The fresh venv has no pip and sees no site-packages; the wheel is installed into it
  by this interpreter's pip (``pip --python``), then a ``.pth`` file lends it this
  environment's site-packages for the third-party dependencies (numpy, panel, ...).
  A path listed in a ``.pth`` file is only appended to ``sys.path`` (its own ``.pth``
  files, among them the editable install's finder, are not run), and it comes after
  the venv's own site-packages: ``app`` and ``dynamics`` are the installed ones.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest
from serving import free_port, stop

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "app", "dynamics", "assets")
ASSETS = ("style.css", "presets/attention.json", "presets/inertial.json", "theory/part1.md",
          "data/minilm_heads.npz", "data/LICENSE-all-MiniLM-L6-v2.txt",
          "data/sweep_example.json",
          "theory/part2.md", "katex/LICENSE", "katex/fonts/KaTeX_Main-Regular.woff2",
          "katex/fonts/KaTeX_Size2-Regular.woff2")

#: Run by the installed app's interpreter, from a directory outside the repository.
CHECK = """
import json, sys
import app, dynamics
import dynamics.heads
import app.dashboard, app.lab.inertial_lab, app.presets, app.serving.katex, app.teaching.theory
from app.serving.resources import asset
from dynamics import models

dash = app.Dashboard()
lab = app.lab.inertial_lab.InertialLab()
files = {name: str(asset(*name.split("/"))) for name in sys.argv[1:]}
print(json.dumps({
    "app": app.__file__, "dynamics": dynamics.__file__, "files": files,
    "css": app.dashboard.CSS == asset("style.css").read_text(encoding="utf-8"),
    "presets": len(app.presets.load_presets()), "dashboard_presets": len(dash._presets),
    "notice": dash.notice, "lab_presets": len(lab.presets),
    "lab_message": lab.message.object if lab.message.visible else "",
    "theory_models": all(s.section in app.teaching.theory.Theory().anchors for s in models.specs()),
    "fonts": app.serving.katex.FONT_FACES.count("@font-face"),
    "heads_file": str(dynamics.heads.data_file()),
    "minilm_tokens": list(dynamics.Simulation(dynamics.Settings(weights="minilm")).frame().tokens),
}))
"""


def _can_build_without_isolation() -> bool:
    """Whether this interpreter's setuptools builds wheels itself (>= 70.1, or ``wheel``)."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major, minor = (int(x) for x in version.split(".")[:2])
    if (major, minor) >= (70, 1):
        return True
    try:
        importlib.metadata.version("wheel")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _build_wheel(tmp: Path) -> Path:
    src, out = tmp / "src", tmp / "dist"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(src)]
    if _can_build_without_isolation():
        cmd.insert(4, "--no-build-isolation")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout}\n{done.stderr}"
    (wheel,) = out.glob("attention_dynamics-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path) -> tuple[Path, Path]:
    """A venv with the wheel installed (and this environment's site-packages lent for the
    dependencies); returns its python and its site-packages."""
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False, system_site_packages=False, symlinks=True)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
           "--no-index", "--quiet", str(wheel)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout}\n{done.stderr}"
    # only now (pip would have seen the editable install of this environment)
    (site / "_lent_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, site


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@contextlib.contextmanager
def _panel_serve(python: Path, script: Path, cwd: Path, log_path: Path):
    """``panel serve script`` with the installed interpreter; yields the page URL."""
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(python), "-m", "panel", "serve", str(script), "--address", "127.0.0.1",
             "--port", str(port), "--allow-websocket-origin", f"127.0.0.1:{port}"],
            cwd=cwd, env=_clean_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            yield f"http://127.0.0.1:{port}/{script.stem}", proc
        finally:
            stop(proc)


def _get(url: str, proc, timeout: float = 60) -> tuple[int, str]:
    """The page's status and text, ``(0, "")`` if none came by ``timeout`` seconds.

    Asked again only while the server does not listen yet (connection refused); once a
    request is accepted it is waited for until the deadline. (The first request builds a
    session, a whole dashboard, in a fresh interpreter: on a busy machine that took over
    10 s, and a request given up after 10 s and sent again only queued one more session
    behind it; under ``pytest -n 2`` the page never came within the minute.)"""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=max(1.0, deadline - time.monotonic())) \
                    as resp:
                return resp.status, resp.read().decode("utf-8", "replace")
        except urllib.error.URLError as err:
            if not isinstance(err.reason, ConnectionRefusedError):
                return 0, ""
        except ConnectionRefusedError:
            pass
        except OSError:  # timed out, or the connection dropped
            return 0, ""
        if proc.poll() is not None or time.monotonic() > deadline:
            return 0, ""
        time.sleep(0.3)


def test_installed_wheel_runs_outside_the_source_tree(tmp_path, capsys):
    start = time.monotonic()
    wheel = _build_wheel(tmp_path)
    built = time.monotonic()

    # every module of app/ and dynamics/ and the assets the app reads are in the wheel
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = [p.relative_to(ROOT).as_posix() for package in ("app", "dynamics")
               for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts]
    missing = [s for s in sources if s not in names]
    assert not missing, f"not in the wheel (add the package to pyproject.toml): {missing}"
    assert {f"app/assets/{name}" for name in ASSETS} <= names
    assert not any(n.startswith("assets/") for n in names)  # no top-level 'assets' package

    python, site = _fresh_venv(tmp_path, wheel)
    shutil.rmtree(tmp_path / "src")  # only the installed copy is left to read from
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    done = subprocess.run([str(python), "-W", "error", "-c", CHECK, *ASSETS], cwd=outside,
                          env=_clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout.strip().splitlines()[-1])
    for path in (r["app"], r["dynamics"], *r["files"].values()):
        assert Path(path).is_relative_to(site), path  # the installed copy ...
        assert not Path(path).is_relative_to(ROOT), path  # ... not the source tree
    assert r["css"]
    for name, path in r["files"].items():
        assert Path(path).read_bytes() == (ROOT / "assets" / name).read_bytes(), name
    n_attention = len(json.loads((ROOT / "assets/presets/attention.json").read_text("utf-8")))
    n_inertial = len(json.loads((ROOT / "assets/presets/inertial.json").read_text("utf-8")))
    assert r["presets"] == r["dashboard_presets"] == n_attention and r["notice"] == ""
    assert r["lab_presets"] == n_inertial and r["lab_message"] == ""
    assert r["theory_models"]  # the Theory page's text ships and has every model
    assert r["fonts"] == len(list((ROOT / "assets/katex/fonts").glob("*.woff2")))
    # the MiniLM heads ship in the wheel and the backend finds them there
    assert r["heads_file"] == r["files"]["data/minilm_heads.npz"]
    assert r["minilm_tokens"][:3] == ["[CLS]", "the", "cat"]
    checked = time.monotonic()

    # panel serve of the installed app's main module serves the page (a session is built)
    log_path = tmp_path / "panel.log"
    with _panel_serve(python, site / "app" / "main.py", outside, log_path) as (url, proc):
        status, page = _get(url, proc)
    log = log_path.read_text()
    assert status == 200, log
    assert "<title>Nonequilibrium attention dynamics</title>" in page
    assert "Traceback" not in log and "ERROR" not in log, log
    with capsys.disabled():
        print(f"\n[packaging] wheel built in {built - start:.1f} s, installed and checked in "
              f"{checked - built:.1f} s, served in {time.monotonic() - checked:.1f} s")
