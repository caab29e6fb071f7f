"""Every fused Part I kernel against its readable twin in the same model module (the
readable equations are the definition; the fused ones are what the steppers call)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dynamics import energy as en
from dynamics import models
from dynamics.models.canonical import CanonicalProblem
from dynamics.models.cotangent_lift import CotangentLiftProblem
from dynamics.models.reduced import ReducedProblem
from dynamics.models.transformer import TransformerProblem
from dynamics.models.value_matching import ValueMatchingProblem
from dynamics.workspace import Owned

cases = dict(N=st.integers(2, 7), d=st.integers(1, 4), seed=st.integers(0, 2**32 - 1),
             beta=st.floats(0.2, 5.0), kappa=st.floats(0.0, 3.0), k=st.floats(0.0, 3.0))


def data(problem_type, N, d, seed, beta, kappa, k):
    rng = np.random.default_rng(seed)
    prob = problem_type(M=rng.standard_normal((d, d)) / d, W_V=rng.standard_normal((d, d)) / d,
                        beta=beta, gamma=0.7, mass=1.3, kappa=kappa, confinement=k)
    X, P = rng.standard_normal((N, d)), rng.standard_normal((N, d))
    return prob, X, P, en.rowsoftmax(rng.standard_normal((N, N)))


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * (1 + np.abs(b).max()))


@given(**cases)
def test_canonical_and_value_matching_forces(N, d, seed, beta, kappa, k):
    for problem_type, name in ((CanonicalProblem, "canonical"),
                               (ValueMatchingProblem, "value_matching")):
        prob, X, P, A = data(problem_type, N, d, seed, beta, kappa, k)
        readable = models.get(name).readable
        force, G = prob.force(X, A)
        close(force, readable["force"](prob, X, P, A))
        if G is not None:  # Ŝ = G Xᵀ
            close(G @ X.T, readable["effective_scores"](prob, X, P, A))
        fused, _ = prob.force(X, A, X @ prob.M, X @ prob.M.T)  # with X M, X Mᵀ given
        close(fused, force)


@given(**cases)
def test_cotangent_lift_target_and_frozen_field(N, d, seed, beta, kappa, k):
    prob, X, P, A = data(CotangentLiftProblem, N, d, seed, beta, kappa, k)
    readable = models.get("cotangent_lift").readable
    T = prob.target(X, P)
    expected = beta * readable["effective_scores"](prob, X, P, A)
    close(T - T.max(axis=1, keepdims=True), expected - expected.max(axis=1, keepdims=True))
    assert np.all(T.max(axis=1) == 0.0)
    X_dot, P_dot = prob.frozen_field(X, P, A)
    close(X_dot, readable["velocity"](prob, X, P, A))
    close(P_dot, readable["force"](prob, X, P, A))


@given(**cases)
def test_slaved_attention_and_transformer_velocity(N, d, seed, beta, kappa, k):
    prob, X, P, _ = data(TransformerProblem, N, d, seed, beta, kappa, k)
    A_star = en.softmax_attention(en.scores(X, prob.M), beta)
    close(prob.softmax_into(X, np.empty((N, N))), A_star)
    S, Z, A = prob.slaved(X, Owned())
    close(S, en.scores(X, prob.M))
    close(A, A_star)
    assert np.all(Z.max(axis=1) == 0.0)
    close(prob.velocity(X, A), models.get("transformer").readable["velocity"](prob, X))
    red = ReducedProblem(**{f: getattr(prob, f) for f in ("M", "W_V", "beta", "gamma", "mass",
                                                           "kappa", "confinement")})
    close(red.force(X, A)[0], models.get("reduced").readable["force"](red, X))


def test_owned_ring_never_hands_out_a_busy_array():
    owned = Owned()
    taken = [owned.take("a", (2, 2)) for _ in range(3)]
    assert len({id(a) for a in taken}) == 3
    again = owned.take("a", (2, 2), busy=(taken[0],))
    assert again is taken[1]  # the oldest that is not busy
    assert owned.take("a", (2, 2)) is taken[0]  # then the oldest again
    assert owned.take("a", (3, 3)).shape == (3, 3)  # a new shape: new arrays
