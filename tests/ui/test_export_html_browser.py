"""Take it home (issue #39), in Chromium: the exported pages open from ``file://`` with every
request that is not a file refused, ask for nothing but themselves, raise no error, show
data in every plot; the time slider moves the maps, the tokens and the lag marker
together, to the trajectory's values at that frame; a tour's pages follow each other by
the arrow keys ← →, and a lab step shows the lab's plots.

One browser, two page loads (a run, then a two-step tour from its index).
"""

from __future__ import annotations

import numpy as np
import pytest
from pixels import assert_plots_show_data, data_pixels, plot_frames

from app.teaching.standalone import (
    FRAMES_NAME,
    LAG_NAME,
    MAP_NAMES,
    SLIDER_ID,
    TOKENS_NAME,
)
from app.teaching.tour_site import tour_html
from dynamics import Settings, simulate

pytestmark = [pytest.mark.ui, pytest.mark.slow]

TOUR = {"name": "Two steps", "steps": [
    {"title": "A real head relaxes", "preset": "A real head relaxing", "t_end": 2.0,
     "text": "The row of 'it' moves to 'animal'.", "annotations": ["kl_slope"]},
    {"title": "Linear attention blows up", "tab": "lab",
     "lab_preset": "first-order blow-up at 1/(2 a v s)", "text": "It blows up."}]}
#: The page's data, read from its Bokeh document.
READ = """(names) => {
  const doc = Bokeh.documents[0];
  const get = (n) => doc.get_model_by_name(n);
  return {k: Number(document.getElementById(names.slider).value),
          A: Array.from(get(names.maps[0]).data.image[0]),
          S: Array.from(get(names.maps[1]).data.image[0]),
          R: Array.from(get(names.maps[2]).data.image[0]).flat(),
          x: Array.from(get(names.tokens).data.x),
          lag_t: get(names.lag).data.t[0], lag_kl: get(names.lag).data.kl[0],
          index: Array.from(get(names.frames).data.index)};
}"""
NAMES = {"slider": SLIDER_ID, "maps": list(MAP_NAMES), "tokens": TOKENS_NAME,
         "lag": LAG_NAME, "frames": FRAMES_NAME}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("take_home")
    traj = simulate(Settings(model="canonical", beta=2.0, gamma=0.5), t_end=4.0, every=1)
    run = traj.to_html(folder / "run.html")
    site = tour_html(folder / "site", TOUR)
    return {"traj": traj, "run": run, "site": site}


def offline(page):
    """Refuse every request that is not a file; return the list of URLs asked for."""
    asked = []

    def route(r):
        asked.append(r.request.url)
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            r.abort()

    page.route("**/*", route)
    return asked


def wait_for_plots(page, n):
    page.wait_for_function("(n) => window.Bokeh && Bokeh.index && "
                           "[...Bokeh.index.query(v => v.frame_view != null)].length >= n",
                           arg=n, timeout=60_000)


def move_slider(page, fraction):
    """Click the time slider at ``fraction`` of its length, as a person would."""
    box = page.locator(f"#{SLIDER_ID}").bounding_box()
    page.mouse.click(box["x"] + fraction * box["width"], box["y"] + box["height"] / 2)


def test_a_run_plays_offline_with_the_trajectorys_values(page, files, console_errors):
    asked = offline(page)
    page.goto(files["run"].as_uri())
    wait_for_plots(page, 6)
    assert_plots_show_data(page, at_least=6)
    before = page.evaluate(READ, NAMES)
    frame = next(f for f in plot_frames(page) if f["title"] == "Attention A(t)")
    pixels_before = page.screenshot(clip={k: frame[k] for k in ("x", "y", "width", "height")})

    move_slider(page, 0.15)
    page.wait_for_function("(n) => Bokeh.documents[0].get_model_by_name(n).data.t[0] > 0",
                           arg=LAG_NAME)
    after = page.evaluate(READ, NAMES)
    k = after["k"]
    assert 0 < k < len(after["index"]) - 1
    assert after["A"] != before["A"] and after["S"] != before["S"]
    assert after["x"] != before["x"]
    assert after["lag_t"] > before["lag_t"]
    assert page.screenshot(clip={k_: frame[k_] for k_ in ("x", "y", "width", "height")}) \
        != pixels_before  # the map is drawn anew
    assert data_pixels(page, frame) > 25

    traj, i = files["traj"], after["index"][k]
    n = traj.attention.shape[1]
    assert after["lag_t"] == pytest.approx(traj.times[i])
    assert after["lag_kl"] == pytest.approx(traj.diagnostics["kl"][i], rel=1e-12)
    np.testing.assert_allclose(np.reshape(after["A"], (n, n)), traj.attention[i],
                               rtol=1e-6, atol=1e-7)
    A, S = np.reshape(after["A"], (n, n)), np.reshape(after["S"], (n, n))
    assert float(np.sum(A * np.log(A / S))) == pytest.approx(traj.diagnostics["kl"][i],
                                                             rel=1e-4)
    np.testing.assert_allclose(np.reshape(after["R"], (n, n)), np.log(A / S), atol=1e-5)

    readout = page.locator("#page-readout").text_content()
    assert readout.startswith(f"t = {traj.times[i]:.3f} · frame {k + 1} of ")
    page.get_by_role("button", name="▶ Play").click()  # plays on from frame k
    page.wait_for_function("([n, k]) => Number(document.getElementById(n).value) > k",
                           arg=[SLIDER_ID, k])
    page.get_by_role("button", name="❚❚ Pause").click()
    assert asked == [files["run"].as_uri()]
    assert console_errors == []


def test_a_tour_site_goes_by_the_arrow_keys_offline(page, files, console_errors):
    index, first, second = files["site"]
    asked = offline(page)
    page.goto(index.as_uri())
    page.get_by_role("link", name="A real head relaxes").click()
    wait_for_plots(page, 6)
    assert page.url == first.as_uri()
    assert_plots_show_data(page, at_least=6)
    words = page.evaluate("() => Bokeh.documents[0].get_model_by_name('page_tokens')"
                          ".data.word")
    assert "animal" in words
    page.locator(f"#{SLIDER_ID}").focus()
    page.keyboard.press("ArrowRight")  # the slider has the key: the page stays
    page.wait_for_function("(n) => Bokeh.documents[0].get_model_by_name(n).tags[0] == 1",
                           arg=LAG_NAME)
    assert page.url == first.as_uri()
    page.locator("header h1").click()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(second.as_uri())
    wait_for_plots(page, 6)
    assert_plots_show_data(page, at_least=6)
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(first.as_uri())
    assert asked == [index.as_uri(), first.as_uri(), second.as_uri(), first.as_uri()]
    assert console_errors == []
