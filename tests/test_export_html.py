"""Take it home (issue #39): a run as one page that needs no Python, no server and no
network (``python -m app export-html``, ``Trajectory.to_html``), the tour as a static
site (``python -m app tour-html``), bad input refused with status 2 and nothing written.

The page's recorded frames are read back from the Bokeh document inside the file (its
base64 float32 arrays) and compared with the trajectory's own.
"""

from __future__ import annotations

import base64
import gzip
import json
import re

import numpy as np
import pytest
from dashboard_support import play, small_dashboard

from app.__main__ import main
from app.teaching.standalone import FRAMES_NAME, MAX_FRAMES
from app.teaching.standalone_page import ExportError, parse_settings, strip_linked
from app.teaching.tour_site import INDEX, tour_pages
from dynamics import Settings, Simulation, simulate
from dynamics.trajectory import exporter

#: A tag that would make the browser load a file or a URL (an <a href> is not one).
LOADS = re.compile(r'<(?:script|img|iframe|link|source|embed)\b[^>]*\b(?:src|href)="'
                   r'(?!data:)[^"]*"|url\((?![\'"]?data:)[^)]*\)')


def loads(text: str) -> list[str]:
    """What the page's markup and stylesheets would load (script bodies left out: their
    code builds tags of its own, for other pages)."""
    markup = re.sub(r"(<script\b[^>]*>).*?</script>", r"\1</script>", text, flags=re.S)
    return LOADS.findall(markup)


def frames_of(text: str) -> dict:
    """The page's frames source (:data:`FRAMES_NAME`) decoded: ``{column: list}``, each
    ndarray cell as a NumPy array of its dtype and shape."""
    doc = json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', text,
                               re.S).group(1))
    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("name") == "ColumnDataSource" and node.get(
                    "attributes", {}).get("name") == FRAMES_NAME:
                found.append(node["attributes"]["data"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    (data,) = found

    def decode(cell):
        if isinstance(cell, dict) and cell.get("type") == "ndarray":
            raw = base64.b64decode(cell["array"]["data"])
            raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw  # Bokeh's gzip
            return np.frombuffer(raw, dtype=cell["dtype"]).reshape(cell["shape"])
        if isinstance(cell, list):
            return [decode(c) for c in cell]
        return cell

    return {k: decode(v) for k, v in data["entries"]}


@pytest.mark.slow
def test_a_trajectory_page_holds_its_frames_and_loads_nothing(tmp_path):
    traj = simulate(Settings(model="canonical", beta=2.0, gamma=0.5), t_end=3.0, every=1)
    path = traj.to_html(tmp_path / "run.html")
    text = path.read_text(encoding="utf-8")
    assert loads(text) == []
    assert "Canonical model" in text and "β = 2" in text  # title and settings line
    assert r"\frac{\|P\|^2}{2m}" in text  # the model's equations, typeset in the page
    frames = frames_of(text)
    index = np.asarray(frames["index"])
    assert len(index) == MAX_FRAMES and index[0] == 0 and index[-1] == len(traj.times) - 1
    for k in (0, 57, len(index) - 1):
        i = int(index[k])
        assert frames["t"][k] == pytest.approx(traj.times[i])
        np.testing.assert_allclose(frames["A"][k], traj.attention[i], rtol=1e-6, atol=1e-7)
        assert frames["kl_raw"][k] == pytest.approx(traj.diagnostics["kl"][i], rel=1e-12)
        assert frames["residual"][k] == pytest.approx(
            traj.diagnostics["energy_residual"][i], rel=1e-12, abs=1e-300)
    # A* recomputed from the settings agrees with the run's KL (the page draws log(A/A*))
    A, S = frames["A"][57].astype(float), frames["S"][57].astype(float)
    kl = float(np.sum(A * np.log(A / S)))
    assert kl == pytest.approx(traj.diagnostics["kl"][int(index[57])], rel=1e-4)


def test_a_trajectory_that_is_not_its_settings_run_is_refused(tmp_path):
    rng = np.random.default_rng(3)
    traj = simulate(Settings(model="canonical"), t_end=0.5, every=10,
                    arrays={"features": rng.standard_normal((8, 4))})
    with pytest.raises(ExportError, match="not the run of its settings"):
        traj.to_html(tmp_path / "mine.html")
    assert list(tmp_path.iterdir()) == []
    lab = simulate(Settings(model="linear", n_tokens=4, dim=2), t_end=0.1)
    with pytest.raises(ExportError, match="the page shows runs of the main tab"):
        lab.to_html(tmp_path / "lab.html")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(LookupError, match="no 'pdf' exporter"):
        exporter("pdf")


@pytest.mark.slow
def test_export_html_command_writes_a_page_under_3_mb(tmp_path, capsys):
    out = tmp_path / "class.html"
    assert main(["export-html", str(out), "--settings",
                 "model=canonical&beta=2&gamma=0.5&projector=true"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    text = out.read_text(encoding="utf-8")
    assert out.stat().st_size <= 3e6
    frames = frames_of(text)
    assert frames["t"][-1] == pytest.approx(15.0)  # the default end
    assert len(frames["t"]) <= MAX_FRAMES and loads(text) == []


@pytest.mark.slow
def test_a_real_head_page_is_labelled_with_its_words(tmp_path):
    out = tmp_path / "head.html"
    assert main(["export-html", str(out), "--settings",
                 "?model=attention&path=static&weights=minilm&layer=5&head=11",
                 "--t-end", "1"]) == 0
    text = out.read_text(encoding="utf-8")
    words = Simulation(Settings(model="attention", weights="minilm", layer=5,
                                head=11)).frame().tokens
    assert len(words) > 5 and "source word j" in text
    assert all(json.dumps(w) in text for w in words)  # the axes' labels


@pytest.mark.parametrize(("query", "error"), [
    ("model=canonical&bogus=1", "UnknownSetting: unknown setting(s) 'bogus'"),
    ("checkpoint=/etc", "UnknownSetting"),  # never a URL's to set
    ("beta=5000", "RefusedSettings: beta must be in"),
    ("model=linear", "RefusedSettings"),  # a model of the lab, not of the main tab
    ("weights=minilm&layer=3", "RefusedSettings: layer 3 does not exist"),
    ("beta=1&beta=2", "RefusedSettings: beta given 2 times"),
])
def test_bad_settings_exit_2_and_write_nothing(tmp_path, capsys, query, error):
    out = tmp_path / "page.html"
    out.write_text("the page of last week")
    assert main(["export-html", str(out), "--settings", query, "--t-end", "0.1"]) == 2
    assert error in capsys.readouterr().out
    assert out.read_text() == "the page of last week"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_an_unwritable_output_exits_2(tmp_path, capsys):
    assert main(["export-html", str(tmp_path / "no" / "such" / "dir.html"), "--settings",
                 "beta=2"]) == 2
    assert "UnwritableOutput: cannot write" in capsys.readouterr().out
    assert main(["export-html", str(tmp_path), "--settings", "beta=2"]) == 2
    assert "UnwritableOutput" in capsys.readouterr().out
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["tour-html", str(blocker)]) == 2
    assert "UnwritableOutput" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == [blocker]


def test_parse_settings_reads_a_whole_url():
    s = parse_settings("http://localhost:5006/main?model=attention&path=oscillation&beta=2")
    assert (s.model, s.path, s.beta) == ("attention", "oscillation", 2.0)
    assert parse_settings("").values() == Settings().values()


def test_strip_linked_keeps_inline_data():
    page = ('<link rel="stylesheet" href="static/x.css" type="text/css" />'
            '<script src="static/y.js"></script><img src="data:image/png;base64,AA">'
            '<a href="02_next.html">Next</a>')
    assert strip_linked(page) == ('<img src="data:image/png;base64,AA">'
                                  '<a href="02_next.html">Next</a>')


@pytest.mark.slow
def test_a_tour_site_links_its_steps_back_and_forth():
    tour = {"name": "Two steps", "steps": [
        {"title": "Attention relaxes", "preset": "Relaxation to softmax (fixed features)",
         "text": "The lag falls on a line. More text here.", "annotations": ["kl_slope"],
         "t_end": 1.0},
        {"title": "Linear attention blows up", "tab": "lab",
         "lab_preset": "first-order blow-up at 1/(2 a v s)", "text": "It blows up."}]}
    pages = tour_pages(tour)
    names = list(pages)
    assert names == [INDEX, "01_Attention_relaxes.html", "02_Linear_attention_blows_up.html"]
    index = pages[INDEX]
    assert 'href="01_Attention_relaxes.html"' in index and "The lag falls on a line." in index
    assert "More text here" not in index  # one line per claim
    first, second = pages[names[1]], pages[names[2]]
    assert 'rel="next" href="02_Linear_attention_blows_up.html"' in first
    assert 'rel="prev" href="index.html"' in first
    assert 'rel="prev" href="01_Attention_relaxes.html"' in second and 'rel="next"' not in second
    assert "Eigenvalues of S(t)" in second  # the lab's plots
    assert all(loads(p) == [] for p in pages.values())
    with pytest.raises(ValueError, match="no preset of the main tab"):
        tour_pages({"name": "bad", "steps": [{"title": "x", "text": "y", "preset": "nope"}]})


@pytest.mark.slow
def test_the_sidebar_button_takes_the_run_home():
    d = small_dashboard()
    play(d, 6)
    button = d.page_download
    assert button.label == "Page to take home (.html)"
    text = button.callback().getvalue().decode("utf-8")
    assert button.filename.startswith("canonical_t") and button.filename.endswith(".html")
    frames = frames_of(text)
    history = list(d.history)
    assert len(frames["t"]) == len(history) > 1
    np.testing.assert_allclose(frames["t"], [f.t for f in history])
    np.testing.assert_allclose(frames["S"][-1], history[-1].softmax, rtol=1e-6, atol=1e-7)
    assert loads(text) == [] and "N = 6" in text
