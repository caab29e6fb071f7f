"""The four findings of issue #12, each a test that failed before the fix: coarse stiff
steps of the attention model, the cotangent lift's order when stiff, value matching's
error plateau, and the canonical tracking bound against its ODE."""

import numpy as np
import pytest
from helpers import fitted_order
from stiff_reference import (
    COUPLED_CASES,
    DT,
    LAM_H,
    RTOL,
    T_END,
    attention_reference,
    case_settings,
    coupled_reference,
    reference,
    relative_errors,
    run,
    short_values,
)

from dynamics import Settings, Simulation


# --- the four findings of issue #12, each a test that failed before the fix -----------
def test_attention_work_and_dissipation_at_coarse_stiff_steps():
    """Finding 1: on the rotation path (β = 0.3, γ = 20, N = 5, d = 4, A(0) = A*, t = 2) at
    λh = 6.7 and 13, and the oscillation path (β = 1, γ = 1000) at λh = 100, ``work`` and
    ``dissipated`` were off by the same amount (the Strang companion moved the scores with
    attention frozen): work −1.031 and −0.674 against −1.292, dissipated 0.375 and 0.731
    against 0.109; on the oscillation 0.080 in both (true −0.287 and 0.0016), while
    ``energy_residual`` stayed small."""
    cases = (({"path": "rotation", "beta": 0.3, "gamma": 20.0}, (0.2, 0.1, 0.01)),
             ({"path": "oscillation", "beta": 1.0, "gamma": 1000.0}, (0.1, 0.01)))
    for values, dts in cases:
        s = Settings(model="attention", n_tokens=5, dim=4, init_attention="softmax",
                     **values)
        ref = attention_reference(s, 2.0)
        for dt in dts:
            frame = run(s, 2.0, dt)
            d = frame.diagnostics
            errors = relative_errors(frame, ref, ("work", "dissipated"))
            lam_h = values["gamma"] / values["beta"] * dt
            print(f"{values['path']} λh = {lam_h:.3g}: work {d['work']:.5f} (reference "
                  f"{ref['work']:.5f}), dissipated {d['dissipated']:.5f} (reference "
                  f"{ref['dissipated']:.5f}); relative errors {short_values(errors.values())}")
            tol = RTOL if dt <= DT else 5e-2  # the coarse steps: O(dt²) at dt = 0.1, 0.2
            assert max(errors.values()) <= tol, errors


def feature_error(settings, T, dt, ref):
    frame = run(settings, T, dt)
    return float(np.abs(frame.features - ref["X"]).max()), frame


def test_cotangent_lift_is_second_order_when_stiff():
    """Finding 2: the Strang splitting's order fell to 1 as the relaxation stiffened
    (β = 1, γ = 1000: feature errors ∝ dt from dt = 0.1 to 0.0125), with ``H`` and
    ``dissipated`` off by 1e-2 and 0.30 (relative) at λh = 100."""
    s = Settings(model="cotangent_lift", n_tokens=5, dim=4, gamma=1000.0,
                 init_momentum="random", init_attention="softmax")
    T = 1.0
    ref = coupled_reference(s, T)
    dts = (0.1, 0.05, 0.025, 0.0125)
    errors, frames = zip(*(feature_error(s, T, dt, ref) for dt in dts), strict=True)
    order = fitted_order(dts, errors)
    rel = relative_errors(frames[0], ref, ("hamiltonian", "dissipated"))
    print(f"cotangent lift, γ = 1000: feature errors {short_values(errors)} for dt "
          f"{dts}: order {order:.2f}; at λh = 100 relative errors {rel}")
    assert order >= 1.8
    assert rel["hamiltonian"] <= 1e-3 and rel["dissipated"] <= 1e-2


def test_value_matching_has_no_error_plateau():
    """Finding 3: value matching (β = 5, γ = 20, κ = 3) sub-stepped its stiff attention
    feedback at a fixed sub-step, so its error at t = 2 stayed near 2e-4 from dt = 0.08
    to 0.01 instead of falling like dt² (the feedback is now solved implicitly)."""
    s = Settings(model="value_matching", n_tokens=5, dim=4, seed=3, beta=5.0, gamma=20.0,
                 kappa=3.0, init_momentum="random", init_attention="random")
    T = 2.0
    ref = coupled_reference(s, T)
    dts = (0.08, 0.04, 0.02, 0.01, 0.005)
    errors = [feature_error(s, T, dt, ref)[0] for dt in dts]
    order = fitted_order(dts[1:], errors[1:])
    print(f"value matching β=5, γ=20, κ=3: feature errors {short_values(errors)} "
          f"for dt {dts}: order {order:.2f} from dt = {dts[1]}")
    assert order >= 1.8


#: The canonical bound's tolerance: tight enough to see its weights swapped at λh = 1.
KL_BOUND_RTOL = 2e-4


@pytest.mark.parametrize("lam_h", (0.01, *LAM_H))
def test_canonical_kl_bound_solves_its_ode(lam_h):
    """Finding 4: the canonical ``kl_bound`` was only tested as an inequality (swapping its
    trapezoid weights changed it by up to 6e-2 unseen). Against ``dB_i/dt = −λB_i +
    β osc(dS_i/dt)`` integrated with the trajectory: within 2e-4 at dt = 0.01."""
    ref = reference("canonical", lam_h)
    frame = run(case_settings("canonical", lam_h), T_END, DT)
    error = relative_errors(frame, ref, ("kl_bound",))["kl_bound"]
    print(f"canonical λh = {lam_h:g}: kl_bound {frame.diagnostics['kl_bound']:.6e}, "
          f"reference {ref['kl_bound']:.6e}, relative error {error:.1e}")
    assert error <= KL_BOUND_RTOL


def test_kl_bound_check_sees_swapped_weights(monkeypatch):
    """The check above fails when the bound's quadrature weights are swapped (those of
    the step's end and of the earlier values)."""
    import dynamics.steppers.etd_verlet as scheme

    linear, quadratic = scheme.exp_trapezoid, scheme.exp_quadratic
    monkeypatch.setattr(scheme, "exp_trapezoid", lambda lam, h: linear(lam, h)[::-1])
    monkeypatch.setattr(scheme, "exp_quadratic", lambda lam, h: quadratic(lam, h)[::-1])
    for lam_h in LAM_H:
        ref = reference("canonical", lam_h)
        frame = run(case_settings("canonical", lam_h), T_END, DT)
        error = relative_errors(frame, ref, ("kl_bound",))["kl_bound"]
        print(f"swapped weights, λh = {lam_h:g}: kl_bound relative error {error:.2e}")
        assert error > KL_BOUND_RTOL


@pytest.mark.parametrize("model", ["attention", *COUPLED_CASES])
def test_steps_change_regime_mid_run(model):
    """dt changing mid-run between a non-stiff (λh = 0.02) and a stiff step (λh = 0.4)
    hands the carry over between the schemes: the run stays within 1e-3 of solve_ivp."""
    values = {"path": "rotation", "omega": 2.0} if model == "attention" else {}
    values.update(COUPLED_CASES.get(model, {}))
    s = case_settings(model, 0.2, **values)  # γ = 20: λh = 0.2 at dt = 0.01
    ref = (attention_reference if model == "attention" else coupled_reference)(s, T_END)
    sim = Simulation(s.copy(dt=0.001))
    for dt, n in ((0.001, 200), (0.02, 20), (0.001, 400)):
        sim.settings.dt = dt
        sim.advance(n)
    assert sim.status == "running", sim.message
    assert sim.t == pytest.approx(T_END, abs=1e-9)
    frame = sim.frame()
    errors = relative_errors(frame, ref)
    print(f"{model}, dt 0.001 → 0.02 → 0.001: relative errors {errors}")
    assert max(errors.values()) <= RTOL


def test_stiff_canonical_bound_is_the_same_whatever_the_chunking():
    """The quadratic update of the bound on stiff steps, batched by ``finish``, gives the
    values a step-by-step run gives."""
    s = case_settings("canonical", 10.0)
    one, batched = Simulation(s.copy()), Simulation(s.copy())
    for _ in range(40):
        one.advance(1)
    batched.advance(40)
    assert one.frame().diagnostics["kl_bound"] == batched.frame().diagnostics["kl_bound"]
    np.testing.assert_array_equal(one.state.B, batched.state.B)
