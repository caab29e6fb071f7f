"""The pixel helper itself (``tests/ui/pixels.py``): it sees data, and only data.

Small standalone Bokeh pages (inline resources, opened from ``file://``): a plot with a
legend and axes but no drawn glyph reads blank; one marker, one line and a uniform
heatmap read as data; a grey text note inside the frame is not data.
"""

import numpy as np
import pytest
from bokeh.embed import file_html
from bokeh.layouts import row
from bokeh.models import Label, LinearColorMapper
from bokeh.plotting import figure
from bokeh.resources import INLINE
from pixels import count_data_pixels, plot_frames, plots_data

pytestmark = pytest.mark.ui


def _page(page, tmp_path, *figs):
    path = tmp_path / "plots.html"
    path.write_text(file_html(row(*figs), INLINE, "pixels"))
    page.goto(path.as_uri())
    page.wait_for_function("(n) => window.Bokeh && Bokeh.index && "
                           "[...Bokeh.index.query(v => v.frame_view != null)].length >= n",
                           arg=len(figs))
    page.wait_for_timeout(300)


def _fig(title):
    return figure(title=title, width=300, height=250, toolbar_location=None)


def test_legends_axes_and_notes_alone_are_not_data(page, tmp_path):
    empty = _fig("empty")
    empty.line([], [], color="#1f77b4", legend_label="KL lag", line_width=3)
    empty.scatter([], [], color="#d62728", legend_label="bound", size=10)
    empty.x_range.start, empty.x_range.end, empty.y_range.start, empty.y_range.end = 0, 1, 0, 1
    note = _fig("note")
    note.line([], [])
    note.x_range.start, note.x_range.end, note.y_range.start, note.y_range.end = 0, 1, 0, 1
    note.add_layout(Label(x=0.2, y=0.5, text="≡ 0 for this model", text_color="#555",
                          text_font_size="13pt"))
    dot = _fig("one dot")
    dot.scatter([0.5], [0.5], size=7, color="#2ca02c")
    dot.x_range.start, dot.x_range.end, dot.y_range.start, dot.y_range.end = 0, 1, 0, 1
    heat = _fig("uniform heatmap")
    heat.image([np.full((4, 4), 0.25)], x=0, y=0, dw=1, dh=1,
               color_mapper=LinearColorMapper(palette="Viridis256", low=0.0, high=1.0))
    line = _fig("black line")
    line.line([0, 1], [0, 1], color="black", line_width=1.5)
    _page(page, tmp_path, empty, note, dot, heat, line)

    counts = plots_data(page)
    assert set(counts) == {"empty", "note", "one dot", "uniform heatmap", "black line"}
    assert counts["empty"] == 0, counts
    assert counts["note"] == 0, counts
    assert 20 <= counts["one dot"] < 200, counts
    frame = next(f for f in plot_frames(page) if f["title"] == "uniform heatmap")
    assert counts["uniform heatmap"] > 0.9 * frame["width"] * frame["height"] * 0.9, counts
    assert counts["black line"] > 100, counts


def test_count_data_pixels_by_colour():
    image = np.full((10, 10, 3), 255, dtype=np.uint8)
    image[0, :] = (229, 229, 229)       # a grid line: grey, light
    image[1, :5] = (85, 85, 85)         # grey text
    assert count_data_pixels(image) == 0
    image[5, 5] = (31, 119, 180)        # a coloured pixel
    image[6, 6] = (0, 0, 0)             # a black one
    assert count_data_pixels(image) == 2
    mask = np.zeros((10, 10), dtype=bool)
    mask[5, 5] = True
    assert count_data_pixels(image, masks=[mask]) == 1
