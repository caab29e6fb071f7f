"""Your own matrices (issue #14, item 1): ``Simulation(score_matrix=M, value_matrix=W_V)``
(Part II ``kernel=A, value=V``), the CLI's ``--weights FILE.npz``, and the convention that
turns a Transformer head into ``M`` and ``W_V`` (``dynamics.heads``), checked against a
head written out query by query."""

import json
import re

import numpy as np
import pytest
from scipy.special import softmax

from dynamics import Settings, Simulation, heads
from dynamics.cli import main


def _head(rng, d=5, d_h=3):
    return {"W_Q": rng.standard_normal((d_h, d)), "b_Q": rng.standard_normal(d_h),
            "W_K": rng.standard_normal((d_h, d)), "b_K": rng.standard_normal(d_h),
            "W_V": rng.standard_normal((d_h, d)), "b_V": rng.standard_normal(d_h),
            "W_O": rng.standard_normal((5, d_h))}


def _true_head(w, X):
    """The head written out token by token: attention and output ``Σ_j A_ij W_O v_j``."""
    N, d_h = X.shape[0], w["W_Q"].shape[0]
    A = np.empty((N, N))
    for i in range(N):
        q = w["W_Q"] @ X[i] + w["b_Q"]
        A[i] = softmax([q @ (w["W_K"] @ X[j] + w["b_K"]) / np.sqrt(d_h) for j in range(N)])
    out = np.array([sum(A[i, j] * (w["W_O"] @ (w["W_V"] @ X[j] + w["b_V"]))
                        for j in range(N)) for i in range(N)])
    return A, out


def test_score_matrix_with_the_key_bias_column_gives_the_heads_attention_exactly():
    rng = np.random.default_rng(1)
    w, X = _head(rng), rng.standard_normal((6, 5))
    A_true, _ = _true_head(w, X)
    Xt = heads.with_constant_column(X)
    M = heads.score_matrix(w["W_Q"], w["b_Q"], w["W_K"], w["b_K"])
    assert M.shape == (6, 6) and np.all(M[:, -1] == 0)
    np.testing.assert_allclose(softmax(Xt @ M @ Xt.T, axis=1), A_true, atol=1e-13)
    # the key-side bias u matters (dropping it changes the attention) ...
    M_no_u = M.copy()
    M_no_u[-1] = 0
    assert np.abs(softmax(Xt @ M_no_u @ Xt.T, axis=1) - A_true).max() > 1e-3
    # ... the row-constant terms (query-side bias) do not: a different b_K, same M
    assert np.array_equal(M, heads.score_matrix(w["W_Q"], w["b_Q"], w["W_K"], 7 * w["b_K"]))


def test_value_matrix_gives_the_heads_output_and_keeps_the_constant_column():
    rng = np.random.default_rng(2)
    w, X = _head(rng), rng.standard_normal((4, 5))
    A_true, out_true = _true_head(w, X)
    Xt = heads.with_constant_column(X)
    W = heads.value_matrix(w["W_V"], w["b_V"], w["W_O"])
    O = A_true @ Xt @ W.T  # O = A X W_Vᵀ, row i = Σ_j A_ij W_V x_j
    np.testing.assert_allclose(O[:, :5], out_true, atol=1e-12)
    assert np.all(O[:, 5] == 0)  # value flows do not move the constant coordinate


def test_simulation_uses_your_score_and_value_matrices():
    rng = np.random.default_rng(3)
    N, d = 5, 3
    X, M, W_V = (rng.standard_normal((N, d)), rng.standard_normal((d, d)),
                 rng.standard_normal((d, d)) / 4)
    s = Settings(model="transformer", n_tokens=N, dim=d, beta=2.0)
    sim = Simulation(s, features=X, score_matrix=M, value_matrix=W_V)
    assert np.array_equal(sim.problem.M, M) and np.array_equal(sim.problem.W_V, W_V)
    frame = sim.frame()
    np.testing.assert_allclose(frame.softmax, softmax(2.0 * X @ M @ X.T, axis=1), atol=1e-14)
    # one small step of the Transformer flow moves X along A* X W_Vᵀ (first order in h)
    h = 1e-4
    sim.settings.dt = h
    moved = (sim.step(1).features - X) / h
    np.testing.assert_allclose(moved, frame.softmax @ X @ W_V.T, rtol=1e-3, atol=1e-6)
    # a restart (new β is a continue; a new seed restarts) keeps your matrices
    sim.settings.seed = 5
    sim.step(1)
    assert np.array_equal(sim.problem.M, M)


def test_part_two_takes_your_kernel_and_value():
    A, V = np.diag([1.0, 2.0]), np.diag([0.5, -1.0])
    sim = Simulation(Settings(model="linear", n_tokens=6, dim=2), kernel=A, value=V)
    assert np.array_equal(sim.problem.A, A) and np.array_equal(sim.problem.V, V)
    with pytest.raises(ValueError, match="symmetric"):
        Simulation(Settings(model="linear_accelerated", n_tokens=6, dim=2),
                   kernel=np.array([[1.0, 0.5], [0.0, 1.0]]), value=V)


@pytest.mark.parametrize("kwargs, words", [
    ({"score_matrix": np.ones((3, 2))}, "score_matrix must have shape (2, 2)"),
    ({"value_matrix": np.full((2, 2), np.nan)}, "value_matrix must be finite"),
    ({"kernel": np.eye(2)}, "takes score_matrix and value_matrix, not kernel"),
    ({"score_matrix": "abc"}, "score_matrix must be a numeric array"),
])
def test_bad_matrices_are_refused_by_name(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Simulation(Settings(model="canonical", n_tokens=3, dim=2), **kwargs)


@pytest.mark.parametrize("model, kwargs, words", [
    ("transformer", {"momenta": np.zeros((3, 2))}, "has no momenta"),
    ("reduced", {"attention": np.full((3, 3), 1 / 3)}, "has no attention"),
    ("transformer", {"attention": np.full((3, 3), 1 / 3)}, "has no attention"),
])
def test_arrays_a_model_has_no_use_for_are_refused(model, kwargs, words):
    with pytest.raises(ValueError, match=words):
        Simulation(Settings(model=model, n_tokens=3, dim=2), **kwargs)


def test_a_later_model_leaves_out_the_arrays_it_has_no_use_for():
    """Momenta given with a canonical run: a switch to a first-order flow (the page's model
    menu after an upload) runs your features without them (it raised inside the page's
    setting watcher), and a switch back runs them again."""
    rng = np.random.default_rng(3)
    X, P = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    s = Settings(model="canonical", n_tokens=3, dim=2)
    sim = Simulation(s, features=X, momenta=P)
    for model in ("transformer", "reduced", "sphere"):
        s.model = model
        assert sim.sync() == "restart" and sim.model == model
        if model != "sphere":  # (the sphere puts the features on it)
            np.testing.assert_array_equal(sim.state.X, X)
        assert np.all(np.isfinite(sim.step(3).features))
    s.model = "canonical"
    sim.sync()
    np.testing.assert_array_equal(sim.state.X, X)
    np.testing.assert_array_equal(sim.state.P, P)


@pytest.mark.parametrize("model, kwargs, words", [
    ("linear", {"kernel": np.ones((3, 2))}, r"kernel must have shape \(2, 2\)"),
    ("linear", {"value": np.full((2, 2), np.inf)}, "value must be finite"),
    ("softmax_inertial", {"kernel": np.array([[1.0, 0.5], [0.0, 1.0]])},
     "needs a symmetric kernel A; got one with largest asymmetry max_ij .* = 0.5"),
    ("softmax_inertial", {"kernel": np.eye(2), "value": np.diag([1.0, -1.0])},
     "B = V A⁻¹ positive definite"),
])
def test_part_two_bad_kernel_or_value_is_refused_by_name(model, kwargs, words):
    with pytest.raises(ValueError, match=words):
        Simulation(Settings(model=model, n_tokens=4, dim=2), **kwargs)


def test_part_two_refuses_part_one_matrices():
    with pytest.raises(ValueError, match="takes kernel and value, not score_matrix"):
        Simulation(Settings(model="linear", n_tokens=4, dim=2), score_matrix=np.eye(2))


def test_minilm_weights_refuse_your_arrays():
    with pytest.raises(ValueError, match="weights='minilm' brings its own"):
        Simulation(Settings(weights="minilm", n_tokens=3, dim=2), score_matrix=np.eye(2))


def test_cli_reads_your_weights_file(tmp_path, capsys):
    rng = np.random.default_rng(4)
    X, M, W_V = rng.standard_normal((4, 3)), rng.standard_normal((3, 3)) / 3, np.eye(3) / 4
    path = tmp_path / "w.npz"
    np.savez(path, X=X, M=M, W_V=W_V)
    out = tmp_path / "run.csv"
    assert main(["run", "--weights", str(path), "--model", "canonical", "--t-end", "0.05",
                 "--out", str(out)]) == 0
    import pandas as pd

    table = pd.read_csv(out)
    S = X @ M @ X.T  # F(0) at uniform attention: −⟨A, S⟩ − (1/β) Σ_i log N
    F0 = -np.sum(S) / 4 + 4 * np.log(1 / 4)
    assert table["free_energy"].iloc[0] == pytest.approx(F0, rel=1e-12)
    assert table["feature_norm"].iloc[0] == pytest.approx(np.linalg.norm(X), rel=1e-12)


def test_cli_reads_momenta_and_part_two_matrices(tmp_path):
    """The optional arrays of a weights file: ``P`` (Part I momenta) and Part II's ``A``,
    ``V`` with ``P`` as the momenta ``y_i``, each checked on the energy at t = 0 written
    out by hand."""
    import pandas as pd

    rng = np.random.default_rng(6)
    X, P, M = rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), np.eye(3) / 5
    np.savez(tmp_path / "one.npz", X=X, P=P, M=M)
    assert main(["run", "--weights", str(tmp_path / "one.npz"), "--model", "canonical",
                 "--mass", "2", "--t-end", "0.02", "--out", str(tmp_path / "one.csv")]) == 0
    table = pd.read_csv(tmp_path / "one.csv")
    assert table["kinetic_energy"].iloc[0] == pytest.approx(np.sum(P**2) / 4, rel=1e-12)
    A, V = np.diag([1.0, 2.0, 0.5]), np.diag([0.5, -1.0, 0.2])
    np.savez(tmp_path / "two.npz", X=X, P=P, A=A, V=V)
    assert main(["run", "--weights", str(tmp_path / "two.npz"), "--model",
                 "linear_accelerated", "--t-end", "0.02", "--out", str(tmp_path / "two.csv")]) == 0
    table = pd.read_csv(tmp_path / "two.csv")
    H0 = (sum((X[i] @ A @ X[j]) * (P[i] @ P[j]) for i in range(4) for j in range(4)) / 8
          - 0.5 * sum(X[i] @ V @ X[i] for i in range(4)))  # Theory: accelerated attention
    assert table["hamiltonian"].iloc[0] == pytest.approx(H0, rel=1e-12)


@pytest.mark.parametrize("arrays, words", [
    ({"Y": np.eye(2)}, "unknown arrays ['Y']"),
    ({"M": np.eye(2)}, "must hold the features X"),
])
def test_cli_bad_weights_file_exits_2(tmp_path, capsys, arrays, words):
    path = tmp_path / "w.npz"
    np.savez(path, **arrays)
    with pytest.raises(SystemExit) as err:
        main(["run", "--weights", str(path), "--t-end", "0.05"])
    assert err.value.code == 2
    assert words in capsys.readouterr().err


def test_cli_minilm_head(capsys):
    assert main(["run", "--weights", "minilm", "--sentence", "1", "--layer", "5", "--head",
                 "0", "--model", "attention", "--path", "static", "--t-end", "0.02",
                 "--summary"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "completed"


def test_a_weights_file_is_read_array_by_array_with_its_header_checked_first(tmp_path, capsys):
    """Each array's shape and type come from its header before it is loaded; what is not
    an array of real numbers is named; a damaged archive or a .npy file is refused with a
    message, never a traceback."""
    import zipfile

    from dynamics.weights_file import MAX_ELEMENTS, read_weights

    X = np.ones((3, 2), dtype=np.float32)
    path = tmp_path / "w.npz"
    np.savez_compressed(path, X=X, P=np.asfortranarray(np.ones((3, 2))))
    arrays = read_weights(path)
    assert arrays["features"].dtype == np.float32 and set(arrays) == {"features", "momenta"}
    np.savez_compressed(tmp_path / "big.npz", X=np.zeros(MAX_ELEMENTS + 1))
    np.savez(tmp_path / "text.npz", X=X)
    with zipfile.ZipFile(tmp_path / "text.npz", "a") as zf:
        zf.writestr("README.txt", "not an array")
    np.savez(tmp_path / "objects.npz", X=np.array([[1, "a"]], dtype=object))
    (tmp_path / "cut.npz").write_bytes(path.read_bytes()[:100])
    np.save(tmp_path / "npy.npy", X)
    words = {"big": f"has more than {MAX_ELEMENTS} numbers",
             "text": "unknown arrays ['README.txt']", "objects": "holds object values",
             "cut": "cannot read it as a .npz file", "npy": "holds one array without a name"}
    for case in words:
        name = tmp_path / (case + (".npy" if case == "npy" else ".npz"))
        with pytest.raises(ValueError, match=re.escape(words[case])):
            read_weights(name)
        with pytest.raises(SystemExit) as err:
            main(["run", "--weights", str(name), "--t-end", "0.05"])
        assert err.value.code == 2 and words[case] in capsys.readouterr().err
