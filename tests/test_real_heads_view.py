"""The page's real heads (issue #14, items 2 and 5): word labels on the heatmaps' axes and
beside the tokens, the grid of every head's attention, and the upload of a weights file."""

import io

import numpy as np
import pytest

pn = pytest.importorskip("panel")

from app.dashboard import Dashboard  # noqa: E402
from app.mainview.real_heads import tile  # noqa: E402
from dynamics import Settings  # noqa: E402


def test_tile_places_every_head():
    heads = np.arange(5 * 2 * 2, dtype=float).reshape(5, 2, 2)
    out = tile(heads, columns=2, gap=1)
    assert out.shape == (3 * 3 - 1, 2 * 3 - 1)
    np.testing.assert_array_equal(out[0:2, 3:5], heads[1])
    np.testing.assert_array_equal(out[6:8, 0:2], heads[4])
    assert np.isnan(out[2]).all() and np.isnan(out[6:8, 3:5]).all()


def test_minilm_words_label_the_axes_and_the_tokens():
    dash = Dashboard(settings=Settings(model="attention", path="static", weights="minilm",
                                       sentence=0, layer=2, head=3))
    tokens = dash.sim.frame().tokens
    for fig in dash.heatmaps.figures:
        assert fig.xaxis[0].major_label_overrides[2] == "cat"
        assert fig.yaxis[0].major_label_overrides[6] == "mat"
        assert list(fig.xaxis[0].ticker.ticks) == list(range(9))
    assert dash.real_heads.words.data["word"] == list(tokens)
    np.testing.assert_array_equal(dash.real_heads.words.data["x"],
                                  dash.trajectories.tokens.data["x"])
    assert not dash.real_heads.grid_fig.visible
    # the frame history is sized by the sentence's N = 9 and d = 385, not by n_tokens, dim
    from app.dashboard import HISTORY_BYTES

    assert dash.history.maxlen <= HISTORY_BYTES // (8 * 2 * 9 * 385)
    dash.settings.weights = "seed"  # back to numbered tokens, each label set anew (the
    # page keeps an axis's old texts when its overrides are merely emptied: issue #27)
    axis = dash.heatmaps.figures[0].xaxis[0]
    assert axis.major_label_overrides == {i: str(i) for i in range(8)}
    assert list(axis.ticker.ticks) == list(range(8)) and axis.axis_label == "source token j"
    assert dash.real_heads.words.data["word"] == []


def test_all_heads_show_in_the_grid():
    dash = Dashboard(settings=Settings(model="canonical", weights="minilm", heads="all",
                                       sentence=4, layer=5, head=0))
    assert dash.real_heads.grid_fig.visible
    image = dash.real_heads.grid.data["image"][0]
    frame = dash.sim.frame()
    np.testing.assert_allclose(image[0:8, 9:17], frame.heads[1], atol=1e-7)  # float32
    assert image.shape == (3 * 9 - 1, 4 * 9 - 1)


def test_upload_runs_your_weights_and_refuses_bad_files():
    dash = Dashboard(settings=Settings(model="canonical"))
    rng = np.random.default_rng(0)
    X, M = rng.standard_normal((5, 3)), rng.standard_normal((3, 3)) / 3
    buffer = io.BytesIO()
    np.savez(buffer, X=X, M=M)
    dash.real_heads.upload.value = buffer.getvalue()
    assert "Running your weights: N = 5, d = 3" in dash.real_heads.upload_note.object
    assert (dash.settings.n_tokens, dash.settings.dim) == (5, 3)
    np.testing.assert_array_equal(dash.sim.problem.M, M)
    np.testing.assert_array_equal(dash.sim.frame().features, X)
    buffer = io.BytesIO()
    np.savez(buffer, X=X, M=np.eye(4))
    dash.real_heads.upload.value = buffer.getvalue()
    assert "Not used" in dash.real_heads.upload_note.object
    # in the file's own terms (issue #27, item 9): its key M, not the keyword score_matrix
    assert "M must have shape (3, 3) (N = 5, d = 3), got (4, 4)" in \
        dash.real_heads.upload_note.object
    np.testing.assert_array_equal(dash.sim.problem.M, M)  # the run is left as it was
    buffer = io.BytesIO()  # Part II arrays: refused with where to run them
    np.savez(buffer, X=X, A=np.eye(3), V=np.eye(3))
    dash.real_heads.upload.value = buffer.getvalue()
    assert "A and V are Part II arrays: upload this file in the Inertial lab tab" in \
        dash.real_heads.upload_note.object
    assert "--weights FILE --model linear_accelerated" in dash.real_heads.upload_note.object
    np.testing.assert_array_equal(dash.sim.problem.M, M)
