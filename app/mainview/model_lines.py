"""What a model's spec says of the time series' lines (Theory page: coupled models):
the legend of each line (:func:`legend_states`) and the one line saying what the model
has ≡ 0 by construction (:func:`zero_text`)."""

from __future__ import annotations

from app.models import energy_symbol, not_applicable, spec

#: The diagnostic each line draws (where a model's spec may say it is n/a or ≡ 0).
DIAGNOSTIC = {"kl": "kl", "kl_log": "kl", "kl_bound": "kl_bound", "kl_bound_log": "kl_bound",
               "residual": "energy_residual", "dissipation_rate": "dissipation_rate",
               "dissipated": "dissipated", "momentum": "kinetic_energy"}
#: The symbol of the potential's line: a model whose energy is the potential draws one line.
POTENTIAL = "Φ"
#: The momentum line's label when the momentum term of H is not a kinetic energy
#: (``kinetic_energy`` n/a: the cotangent lift's ⟨P, A X W_Vᵀ⟩).
MOMENTUM_TERM = "momentum term ⟨P, A X W_Vᵀ⟩"  # (either sign: not a K ≥ 0)
#: A legend item's mark of a line ≡ 0 by construction (not drawn).
ZERO_MARK = "≡ 0"
#: How the one line above the plots names each diagnostic that vanishes by construction
#: (Markdown: ``*`` escaped).
ZERO_NAMES = {"kl": "the lag KL(A‖A\\*) and log(A/A\\*)", "kl_bound": "its bound",
              "dissipation_rate": "the dissipation D", "dissipated": "∫D"}


def zero_text(model: str) -> str:
    """One line (Markdown) saying which plotted quantities model ``model`` has ≡ 0 by
    construction (its spec's ``identically_zero``) and why; "" for a model that has none."""
    zero = [k for k in ZERO_NAMES if k in spec(model).identically_zero]
    if not zero:
        return ""
    names = [ZERO_NAMES[k] for k in zero]
    listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    why = ("its attention is the softmax A\\* at every instant" if "kl" in zero
           else "by construction")
    return f"**Not plotted, ≡ 0 for the {model} model:** {listed} — {why}."


def legend_states(model: str, labels: dict) -> dict[str, tuple[str, bool, bool]]:
    """What model ``model``'s spec says of each line: ``{key: (legend label, line drawn,
    legend item shown)}`` for the lines' plain ``labels`` (``{key: label}``).

    The energy is named by ``energy_symbol``; a diagnostic in ``not_applicable`` is
    hidden and labelled "n/a", one in ``identically_zero`` hidden and labelled "≡ 0";
    when the energy is the potential Φ, the potential's line (the same curve) is not
    drawn twice, and the momentum line is left out of a model without momenta.
    """
    s = spec(model)
    energy = energy_symbol(model)
    missing, zero = set(not_applicable(model)), set(s.identically_zero)
    labels = dict(labels)
    labels["d_energy"] = f"{energy}(t) − {energy}(0)"
    labels["residual"] = f"residual {energy}−{energy}(0)+∫D−W"
    if "kinetic_energy" in missing:  # the momentum term is no kinetic energy
        labels["momentum"] = MOMENTUM_TERM
    states = {}
    for key, label in labels.items():
        diagnostic = DIAGNOSTIC.get(key)
        if key == "momentum" and diagnostic in missing:
            diagnostic = "momentum_energy"
        # "≡ 0" alone: the line above the plots says for which model and why (the
        # legend of "… ≡ 0 for this model" items stretched the page past 1280 px)
        note = (" — n/a for this model" if diagnostic in missing
                else f" {ZERO_MARK}" if diagnostic in zero else "")
        listed = not (key == "d_potential" and energy == POTENTIAL
                      or key == "momentum" and "init_momentum" not in s.settings)
        states[key] = (label + note, listed and not note, listed)
    return states
