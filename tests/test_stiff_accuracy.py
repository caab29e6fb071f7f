"""Stiff-regime accuracy of every diagnostic (issue #12): ``work``, ``dissipated``, ``H`` and
``kl_bound`` each against an independent tight reference, never only their balance.

The references are written here from the readable equations (Theory page, Part I):
``solve_ivp`` on the logit form ``dZ/dt = γŜ − λZ``, with ``∫D``, ``∫−⟨A, dS/dt⟩`` and the
tracking bound ``dB_i/dt = −λB_i + β osc(dS_i/dt)`` carried as extra states (DOP853 at
rtol 1e-10; Radau at rtol 1e-10 when ``λ`` is large). The feature paths are evaluated
from their closed forms written here again.

λh is set through ``γ = β λh / dt`` at ``dt = 0.01``; the orders are fitted as ``dt``
falls with ``γ`` fixed.
"""

import math

import numpy as np
import pytest
from helpers import fitted_order
from stiff_reference import (
    ATTENTION_CASES,
    COUPLED_CASES,
    DT,
    DTS,
    LAM_H,
    NOISE_FLOOR,
    ORDER_DTS,
    RTOL,
    T_END,
    case_settings,
    reference,
    relative_errors,
    run,
    short_values,
)

# --- every diagnostic at λh = 1, 10, 100, and its order -------------------------------
#: The attention model's cases: paths that start far from their target relax from random
#: logits (static, switch, converging); moving paths start at A* (init "softmax").


def check_case(model, lam_h, values):
    ref = reference(model, lam_h, **values)
    s = case_settings(model, lam_h, **values)
    table = {}
    for dt in DTS:
        frame = run(s, T_END, dt)
        table[dt] = relative_errors(frame, ref)
        table[dt]["A"] = float(np.abs(frame.attention - ref["A"]).max())
    keys = [k for k in table[DT] if k != "A"]
    orders = {}
    for key in keys:
        errors = [table[dt][key] for dt in ORDER_DTS]
        orders[key] = fitted_order(ORDER_DTS, errors) if min(errors) > 0.0 else math.nan
    label = f"{model} {values.get('path', '')} λh={lam_h:g}"
    print(f"{label}: relative errors at dt = {', '.join(map(str, DTS))}: "
          + "; ".join(f"{k} {short_values(table[dt][k] for dt in DTS)} (order {orders[k]:.2f})"
                      for k in keys) + f"; max |ΔA| at dt = {DT}: {table[DT]['A']:.1e}")
    bad = {k: table[DT][k] for k in keys if table[DT][k] > RTOL}
    assert not bad, f"{label}: relative errors above {RTOL:g} at dt = {DT}: {bad}"
    low = {key: orders[key] for key in keys
           if table[DT][key] >= NOISE_FLOOR and not orders[key] >= 1.8}
    assert not low, f"{label}: measured orders below 2: {low}"


@pytest.mark.slow
@pytest.mark.parametrize("lam_h", LAM_H)
@pytest.mark.parametrize("path", list(ATTENTION_CASES))
def test_attention_diagnostics_match_reference(path, lam_h):
    check_case("attention", lam_h, {"path": path, **ATTENTION_CASES[path]})


@pytest.mark.slow
@pytest.mark.parametrize("lam_h", LAM_H)
@pytest.mark.parametrize("model", list(COUPLED_CASES))
def test_coupled_diagnostics_match_reference(model, lam_h):
    check_case(model, lam_h, COUPLED_CASES[model])
