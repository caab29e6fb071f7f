"""Measured order of every (model, stepper) pair against a tight independent reference.

For each registered model, the Simulation runs to t = 1 at dt = 2^-k and is compared with
``solve_ivp`` (DOP853, rtol 1e-12) on the model's readable equations
(``ModelSpec.readable["reference"]``); the slope of log error against log dt must match
the stepper's declared ``order`` (diffrax's ``test_ode_order``).
"""

import numpy as np
import pytest
from helpers import fitted_order

from dynamics import Settings, Simulation, models
from dynamics.reference import solve_reference

#: Settings of each model's order run: small, moving, bounded over t = 1; those that relax
#: attention are non-stiff here (λh ≤ 0.0375 < 0.05 at every dt: the steppers' plain
#: branches) and stiff in :data:`STIFF` (λh from 2.5 to 0.31: their stiff branches).
CASES = {
    "attention": {"path": "rotation", "gamma": 0.3, "init_attention": "random"},
    "canonical": {"init_momentum": "random", "init_attention": "random", "gamma": 0.3},
    "value_matching": {"init_momentum": "random", "init_attention": "random", "kappa": 0.5,
                       "gamma": 0.3},
    "cotangent_lift": {"init_momentum": "random", "init_attention": "random", "gamma": 0.3},
    "reduced": {"init_momentum": "random"},
    "transformer": {},
    "linear": {"value_diag": "0.5"},
    "linear_accelerated": {"value_diag": "0.5"},
    "softmax_first_order": {},
    "softmax_inertial": {"second_moment": 0.1, "value_diag": "0.1"},
    "softmax_momentum": {},
}
T_END = 1.0
#: The models that relax attention, once more with γ = 20 (every step stiff).
STIFF = ("attention", "canonical", "value_matching", "cotangent_lift")
RUNS = [(m, "plain") for m in models.names()] + [(m, "stiff") for m in STIFF]
#: Orders of the state that differ from the stepper's on a regime: the attention model's
#: steps take the logits exactly for scores cubic in time (from the path's values and rates
#: at both ends), so attention errs by O(h⁴) on both regimes; its work and dissipation are
#: order 2 on stiff steps (measured in test_stiff_accuracy.py).
STATE_ORDER = {("attention", "stiff"): 4, ("attention", "plain"): 4}


def _error(sim_state, ref):
    """Largest difference of the variables the reference carries (features, momenta,
    attention via its logits)."""
    err = 0.0
    for name, value in ref.items():
        if name == "Z":  # logits are defined up to row constants: compare attention
            A_ref = np.exp(value - value.max(axis=1, keepdims=True))
            A_ref /= A_ref.sum(axis=1, keepdims=True)
            err = max(err, float(np.abs(sim_state.A - A_ref).max()))
        elif name in ("X", "P"):
            err = max(err, float(np.abs(getattr(sim_state, name) - value).max()))
    return err


@pytest.mark.slow
@pytest.mark.parametrize("model, regime", RUNS)
def test_measured_order_matches_the_stepper(model, regime):
    spec = models.get(model)
    assert "reference" in spec.readable, f"{model} declares no reference field"
    values = dict(CASES.get(model, {}), **({"gamma": 20.0} if regime == "stiff" else {}))
    base = Settings(model=model, n_tokens=5, dim=3, seed=3, **values)
    ref, unpack = solve_reference(base, T_END, rtol=1e-12, atol=1e-14)
    assert ref.success
    exact = unpack(ref.y[:, -1])
    order = STATE_ORDER.get((model, regime), spec.stepper.order)
    # steps whose error stays well above the reference's and below the asymptotic range
    exponents = (3, 4, 5, 6) if spec.stepper.order <= 2 else (2, 3, 4, 5)
    steps, errors = [], []
    for k in exponents:
        dt = 2.0**-k
        sim = Simulation(base.copy(dt=dt))
        sim.law = None  # the coarsest steps miss the balance by over 1 %, on purpose
        sim.advance(int(round(T_END / dt)))
        assert sim.status == "running", sim.message
        assert sim.t == pytest.approx(T_END, abs=1e-12)
        steps.append(dt)
        errors.append(_error(sim.state, exact))
    measured = fitted_order(steps, errors)
    print(f"{model}, {regime} ({type(Simulation(base).stepper).__name__}, order {order}): "
          f"errors {errors}, measured {measured:.2f}")
    assert measured == pytest.approx(order, abs=0.25)
