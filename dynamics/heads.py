"""Real attention heads: the score matrix and value path of a Transformer head, and the
heads shipped with the app (Theory page: "A real head's scores").

Conventions (written once here, tested in ``tests/test_own_weights.py``). A head of width
``d_h`` has queries ``q_i = W_Q x_i + b_Q``, keys ``k_j = W_K x_j + b_K``, values
``v_j = W_V,h x_j + b_V`` and output ``W_O,h`` (``W_Q, W_K, W_V,h ∈ R^{d_h×d}``,
``W_O,h ∈ R^{d×d_h}``: the head's columns of the output projection; Hugging Face's
``query.weight`` rows ``h d_h … (h+1) d_h − 1``). Its attention is
``rowsoftmax(q_iᵀ k_j / √d_h)`` and its output ``Σ_j A_ij W_O,h v_j``.

* Scores ``S = X M Xᵀ`` with ``M = W_Qᵀ W_K / √d_h`` (``d×d``, not symmetric).
* The biases: ``q_iᵀ k_j/√d_h = x_iᵀ M x_j + uᵀ x_j + (x_iᵀ W_Qᵀ b_K + b_Qᵀ b_K)/√d_h``
  with the key-side bias ``u = W_Kᵀ b_Q / √d_h``. The last two terms are constant along
  each row ``i``: a row softmax never sees them (they shift ``F`` by a constant per row
  and would push every query by the same constant force ``W_Qᵀ b_K/√d_h``), so they are
  left out, as the Theory page's gauge allows. The key-side term is kept exactly with a
  constant feature column: ``x̃ = (x, 1)``, ``M̃ = [[M, 0], [uᵀ, 0]]``, and
  ``x̃_iᵀ M̃ x̃_j = x_iᵀ M x_j + uᵀ x_j``, so ``rowsoftmax(X̃ M̃ X̃ᵀ)`` is the head's
  attention exactly.
* Value path ``W_V = W_O,h W_V,h`` (``d×d``): ``O = A X W_Vᵀ`` (row ``i`` is
  ``Σ_j A_ij W_V x_j``). The value bias adds the constant ``W_O,h b_V`` (rows of ``A`` sum
  to 1), kept exactly by the constant column: ``W̃_V = [[W_V, W_O,h b_V], [0, 0]]``, so
  ``W̃_V x̃_j = (W_V x_j + W_O,h b_V, 0)``: the value flows leave the constant coordinate
  where it is, and the Hamiltonian models hold it fixed (no force, no momentum:
  ``Problem.fixed``). The prescribed paths of the attention-only model (rotation,
  oscillation, ...) do move it, as any coordinate.

Readable scales. Real features have ``d = 384`` (385 with the constant column) and the
scores a trained head makes. Runs use ``X/c`` and ``c² M̃`` (scores and ``A*`` unchanged;
``W̃_V`` is linear and unchanged) with ``c² = 1 / (2√N Σ_h ‖M̃_h‖₂)``: then
``2√N Σ_h ‖c² M̃_h‖₂ = 1``, so the default confinement ``k = 2`` is twice the bound that
keeps ``H`` bounded below, and the feature motion has the time scale of the random
defaults. The value path is run as ``W̃_V / (4ρ)``, ``ρ`` the spectral radius of
``Σ_h W̃_V,h`` (up to 1.6 for the shipped heads): spectral radius 1/4 as the random
defaults, so the value flows (cotangent lift, Transformer flow) grow at most like
``e^{t/4}``; one unit of time is ``1/(4ρ)`` of a layer's residual update.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The heads file the app ships (``assets/data/``), made by ``scripts/extract_heads.py``
#: from all-MiniLM-L6-v2 (Apache-2.0; the licence notice is beside it).
MINILM_FILE = "minilm_heads.npz"


def score_matrix(W_Q, b_Q, W_K, b_K=None):
    """``M̃ = [[W_Qᵀ W_K/√d_h, 0], [uᵀ, 0]]``, ``u = W_Kᵀ b_Q/√d_h``, shape (d+1, d+1).

    ``b_K`` enters only terms constant along a row (left out, see the module docstring);
    it is accepted so a caller can pass a head's four arrays.
    """
    W_Q, W_K = np.asarray(W_Q, dtype=float), np.asarray(W_K, dtype=float)
    d_h, d = W_Q.shape
    root = math.sqrt(d_h)
    M = np.zeros((d + 1, d + 1))
    M[:d, :d] = W_Q.T @ W_K / root
    M[d, :d] = W_K.T @ np.asarray(b_Q, dtype=float) / root
    return M


def value_matrix(W_V, b_V, W_O):
    """``W̃_V = [[W_O W_V, W_O b_V], [0, 0]]``, shape (d+1, d+1)."""
    W_V, W_O = np.asarray(W_V, dtype=float), np.asarray(W_O, dtype=float)
    d = W_O.shape[0]
    out = np.zeros((d + 1, d + 1))
    out[:d, :d] = W_O @ W_V
    out[:d, d] = W_O @ np.asarray(b_V, dtype=float)
    return out


def score_norm(W_Q, b_Q, W_K) -> float:
    """``‖M̃‖₂`` of :func:`score_matrix` from the head's factors, without the (d+1)²
    matrix: ``M̃``'s nonzero columns are ``L K`` with ``L = [W_Qᵀ; b_Qᵀ]`` ((d+1)×d_h) and
    ``K = W_K/√d_h``; with ``L = Q₁R₁`` and ``Kᵀ = Q₂R₂`` (QR), ``‖L K‖₂ = ‖R₁R₂ᵀ‖₂``, a
    d_h × d_h singular value (a head of MiniLM: 32 × 32 instead of 385 × 385)."""
    W_Q, W_K = np.asarray(W_Q, dtype=float), np.asarray(W_K, dtype=float)
    L = np.concatenate([W_Q.T, np.asarray(b_Q, dtype=float)[None]], axis=0)
    R1 = np.linalg.qr(L, mode="r")
    R2 = np.linalg.qr(W_K.T / math.sqrt(W_Q.shape[0]), mode="r")
    return float(np.linalg.norm(R1 @ R2.T, ord=2))


def value_radius(W_Vs, b_Vs, W_Os) -> float:
    """The spectral radius of ``Σ_h W̃_V,h`` (:func:`value_matrix`) from the heads' factors:
    ``W̃_V,h = U_h V_h`` with ``U_h = [W_O,h; 0]`` ((d+1)×d_h), ``V_h = [W_V,h, b_V,h]``;
    the sum is ``U V`` (``U`` the ``U_h`` side by side, ``V`` the ``V_h`` stacked), whose
    nonzero eigenvalues are those of ``V U`` (H·d_h square: 32 × 32 for one head)."""
    V = np.concatenate([np.concatenate([np.asarray(w, dtype=float),
                                        np.asarray(b, dtype=float)[:, None]], axis=1)
                        for w, b in zip(W_Vs, b_Vs, strict=True)], axis=0)
    U = np.concatenate([np.asarray(w, dtype=float) for w in W_Os], axis=1)
    return float(np.max(np.abs(np.linalg.eigvals(V[:, :-1] @ U))))


def with_constant_column(X):
    """``X̃ = [X, 1]``, shape (N, d) → (N, d+1)."""
    X = np.asarray(X, dtype=float)
    return np.concatenate([X, np.ones((X.shape[0], 1))], axis=1)


def data_file(name: str = MINILM_FILE) -> Path:
    """The path of a data file of ``assets/data/`` (source tree or installed wheel),
    found without importing the app (the backend never imports Panel)."""
    candidates = [Path(__file__).resolve().parents[1] / "assets" / "data" / name]
    spec = importlib.util.find_spec("app")  # (a top-level package: not imported)
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "assets" / "data" / name
                       for p in spec.submodule_search_locations]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"the data file {name!r} (assets/data/) is not installed; "
                            "reinstall the project (pip install -e .)")


@functools.lru_cache(maxsize=4)
def load(path: str | None = None) -> dict:
    """The arrays of a heads file (``scripts/extract_heads.py``), read once."""
    path = data_file() if path is None else Path(path)
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


@dataclass(frozen=True)
class Heads:
    """One sentence at the input of one layer, and the heads chosen there.

    Attributes
    ----------
    tokens : tuple of str
        The word pieces (``N`` of them, ``[CLS]`` and ``[SEP]`` included).
    features : ndarray, shape (N, d+1)
        ``X̃ = [X, 1]``: the layer's input (after layer norm) and the constant column.
    score_matrices : ndarray, shape (H, d+1, d+1)
        ``M̃_h`` of each chosen head.
    value_matrices : ndarray, shape (H, d+1, d+1)
        ``W̃_V,h`` of each chosen head.
    attention : ndarray, shape (H, N, N)
        Each head's true attention, from the model's full forward pass.
    heads : tuple of int
        The chosen heads' indices.
    layer : int
    score_norms : tuple of float, optional
        ``‖M̃_h‖₂`` of each chosen head, computed from its factors (:func:`score_norm`).
    value_radius : float, optional
        The spectral radius of ``Σ_h W̃_V,h`` (:func:`value_radius`).
    """

    tokens: tuple
    features: np.ndarray
    score_matrices: np.ndarray
    value_matrices: np.ndarray
    attention: np.ndarray
    heads: tuple
    layer: int
    score_norms: tuple | None = None
    value_radius: float | None = None

    @functools.cached_property
    def readable_scale(self) -> float:
        """``c = (2√N Σ_h ‖M̃_h‖₂)^{−1/2}``: runs use ``X̃/c`` and ``c² M̃_h`` (the norms
        from ``score_norms`` when given, :func:`score_norm`; else SVDs of ``M̃_h``)."""
        norms = self.score_norms
        if norms is None:
            norms = np.linalg.matrix_norm(self.score_matrices, ord=2)
        return 1.0 / math.sqrt(2.0 * math.sqrt(len(self.tokens)) * float(np.sum(norms)))

    @functools.cached_property
    def value_scale(self) -> float:
        """``1/(4ρ)``, ``ρ`` the spectral radius of ``Σ_h W̃_V,h`` (``value_radius`` when
        given, :func:`value_radius`)."""
        rho = self.value_radius
        if rho is None:
            rho = float(np.max(np.abs(np.linalg.eigvals(self.value_matrices.sum(axis=0)))))
        return 1.0 / (4.0 * rho) if rho > 0 else 1.0

    def scaled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X̃/c, c² M̃, W̃_V/(4ρ))``: the same scores (and attention) at the readable
        scales of the module docstring."""
        c = self.readable_scale
        return (self.features / c, self.score_matrices * c**2,
                self.value_matrices * self.value_scale)


def _index(value, choices, name):
    choices = [int(v) for v in choices]
    if int(value) not in choices:
        span = f"[{choices[0]}, {choices[-1]}]" if choices == list(
            range(choices[0], choices[-1] + 1)) else ", ".join(map(str, choices))
        raise ValueError(f"{name} must be in {span} for the shipped MiniLM heads, got {value!r}")
    return choices.index(int(value))


@functools.lru_cache(maxsize=16)
def heads_of(sentence: int, layer: int, head: int | str = "all", path=None) -> Heads:
    """The heads of a heads file (default: the shipped MiniLM heads), shared between
    callers (read its arrays, never write them).

    Parameters
    ----------
    sentence : int
        Index of the sentence.
    layer : int
        The model's layer number (one of the file's ``layers``).
    head : int or "all"
        One head, or every head of the layer.

    Raises
    ------
    ValueError
        An index the file does not have (the message names ``sentence``, ``layer`` or
        ``head`` and its range).
    """
    f = load(None if path is None else str(path))
    s = _index(sentence, range(len(f["sentences"])), "sentence")
    li = _index(layer, f["layers"], "layer")
    n_heads = f["query_weight"].shape[1]
    chosen = tuple(range(n_heads)) if head == "all" else (
        _index(head, range(n_heads), "head"),)
    n = int(f["n_tokens"][s])
    M = np.stack([score_matrix(f["query_weight"][li, h], f["query_bias"][li, h],
                               f["key_weight"][li, h], f["key_bias"][li, h]) for h in chosen])
    W_V = np.stack([value_matrix(f["value_weight"][li, h], f["value_bias"][li, h],
                                 f["output_weight"][li, h]) for h in chosen])
    norms = tuple(score_norm(f["query_weight"][li, h], f["query_bias"][li, h],
                             f["key_weight"][li, h]) for h in chosen)
    rho = value_radius([f["value_weight"][li, h] for h in chosen],
                       [f["value_bias"][li, h] for h in chosen],
                       [f["output_weight"][li, h] for h in chosen])
    return Heads(tokens=tuple(str(t) for t in f["tokens"][s, :n]),
                 features=with_constant_column(f["features"][s, li, :n]),
                 score_matrices=M, value_matrices=W_V,
                 attention=f["attention"][s, li][list(chosen)][:, :n, :n],
                 heads=chosen, layer=int(f["layers"][li]), score_norms=norms,
                 value_radius=rho)


def sentences(path=None) -> tuple:
    """The sentences of a heads file (default: the shipped one)."""
    return tuple(str(s) for s in load(None if path is None else str(path))["sentences"])


def layers(path=None) -> tuple:
    """The layers of a heads file (default: the shipped one)."""
    return tuple(int(v) for v in load(None if path is None else str(path))["layers"])
