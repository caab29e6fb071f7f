"""The rates of the effective scores that the stiff steps take cubic in time (Theory page:
"The Fisher–Rao attention flow"): ``CotangentLiftProblem.target_rate`` and
``ValueMatchingProblem.score_rate`` against a centred difference of the readable effective
scores along the readable field (features, momenta and, for value matching, the logits
``dZ/dt = −λ(Z − βŜ)``), away from the start and with confinement on."""

import numpy as np
import pytest

from dynamics import Settings, Simulation, models
from dynamics import energy as en

EPS = 1e-5


def _state(model, **values):
    s = Settings(model=model, n_tokens=6, dim=3, seed=5, init_momentum="random",
                 init_attention="random", gamma=30.0, dt=0.01, **values)
    sim = Simulation(s)
    sim.advance(7)  # a generic state: off the start, attention moving
    return sim.problem, sim.state


def _centred(S):
    return S - S.mean(axis=1, keepdims=True)


@pytest.mark.parametrize("values", [{}, {"confinement": 0.5}])
def test_cotangent_target_rate_is_the_derivative_along_the_field(values):
    prob, st = _state("cotangent_lift", **values)
    readable = models.get("cotangent_lift").readable
    X, P, A = st.X, st.P, st.A
    X_dot = readable["velocity"](prob, X, P, A)
    P_dot = readable["force"](prob, X, P, A)

    def target(sign):
        Xe, Pe = X + sign * EPS * X_dot, P + sign * EPS * P_dot
        return prob.beta * readable["effective_scores"](prob, Xe, Pe, A)

    expected = _centred((target(1) - target(-1)) / (2 * EPS))
    got = _centred(prob.target_rate(X, P, X_dot, P_dot))
    assert np.abs(expected).max() > 1e-2  # the scores do move
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-7 * np.abs(expected).max())


@pytest.mark.parametrize("values", [{"kappa": 1.0}, {"kappa": 3.0, "confinement": 0.5}])
def test_value_matching_score_rate_is_the_derivative_along_the_flow(values):
    prob, st = _state("value_matching", **values)
    readable = models.get("value_matching").readable
    effective = readable["effective_scores"]
    X, P, Z, A = st.X, st.P, st.Z, st.A
    S_hat = effective(prob, X, P, A)
    X_dot = readable["velocity"](prob, X, P, A)
    Z_dot = -prob.relaxation_rate * (Z - prob.beta * S_hat)

    def scores(sign):
        Ze = Z + sign * EPS * Z_dot
        return effective(prob, X + sign * EPS * X_dot, P, en.rowsoftmax(Ze - Ze.max(axis=1,
                                                                                  keepdims=True)))

    expected = (scores(1) - scores(-1)) / (2 * EPS)
    got = prob.score_rate(X, X_dot, Z, A, S_hat)
    assert np.abs(expected).max() > 1e-2
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-7 * np.abs(expected).max())
