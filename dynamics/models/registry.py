"""The model registry: every model declares one :class:`ModelSpec`, and everything else
(settings menus, the CLI, the app's controls and equations, the engine) reads it here.

Adding a model is writing one module that builds a :class:`ModelSpec` and calls
:func:`register` (see the README, "How to add a model").
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

#: Settings every model of a part reads (never listed in ``ModelSpec.settings``).
COMMON_SETTINGS = {
    1: ("model", "n_tokens", "dim", "beta", "dt", "seed", "norm_limit",
        "weights", "sentence", "layer", "head", "heads", "checkpoint", "text"),
    2: ("model", "n_tokens", "dim", "dt", "seed", "norm_limit"),
}

#: Diagnostics that vanish by construction when attention is slaved to the softmax
#: (``A ≡ A*(X)``): the lag, its bound, the dissipation rate and the dissipated energy
#: (a model's ``identically_zero``).
SLAVED_ZERO = ("kl", "kl_bound", "dissipation_rate", "dissipated")


@dataclass(frozen=True)
class ModelSpec:
    """What the package knows about one model.

    Attributes
    ----------
    name : str
        The value of ``Settings.model``.
    part : int
        1 (nonequilibrium attention) or 2 (inertial attention lab).
    title : str
        A short human name ("Canonical model").
    section : str
        Anchor of the model's section on the in-app Theory page.
    settings : tuple of str
        The settings the model reads beyond :data:`COMMON_SETTINGS` of its part.
    energy_settings : tuple of str
        Settings that enter its energy: changing one mid-run does protocol work and
        continues from the current state. Every other setting it reads restarts the run,
        except ``dt``, ``norm_limit`` and its ``continue_settings``.
    continue_settings : tuple of str
        Settings that change mid-run without work and without a restart (default
        ``("dt",)``; γ and the logit noise σ for the models that relax attention, the
        damping in Part II). A model that reads ``logit_noise`` gets the noise of
        stochastic logits from the engine (its problem has ``relaxation_rate``, its
        states logits ``Z``; its stepper honours rule 8 of the stepper contract).
        Every energy or continue setting must be one the model reads (checked by
        :func:`register`, which also refuses settings ``Settings`` does not know).
    equations : str
        The model's equations, HTML with KaTeX ``$…$`` / ``$$…$$``.
    look_for : str
        One line: what to watch in a run.
    not_applicable : tuple of str
        Diagnostics the model does not define (reported as NaN, never plotted).
    energy_symbol : str
        How the plots name the energy ``E`` of the balance: ``"H"`` (default), ``"F"``
        on a prescribed path, ``"Hᵣ"``, ``"Φ"``; plain text (legends are not KaTeX).
    identically_zero : tuple of str
        Diagnostics that vanish by construction for this model (e.g. ``kl`` and the
        ``dissipation_rate`` when attention is slaved to the softmax): reported as the
        rounding error they are computed with, shown as "≡ 0" rather than plotted.
    build : callable ``(values, given) -> (problem, state)``
        The frozen problem and the initial :class:`~dynamics.state.State` from the
        setting values (a dict) and user-given arrays (a dict, possibly empty).
    reproblem : callable ``(problem, state, values) -> (problem, state)``
        The problem after a change of ``energy_settings`` / ``continue_settings``, and the
        state it continues from (the same, or with slaved attention moved to the new β).
    stepper : callable ``(problem) -> Stepper``
        The scheme that advances it (a :class:`~dynamics.steppers.base.Stepper` class).
    energy : callable ``(problem, state, log_a) -> float``
        The energy ``E`` of the balance (``F``, ``H``, ``H_r`` or ``Φ``), or None;
        ``log_a`` is ``log A`` from the state's logits (None where it has none).
    diagnostics : callable ``(problem, state, energy0) -> (dict, dict)``
        Every scalar diagnostic of a state (``energy0``: ``E(0)`` of the run), and the
        arrays its frame shows besides features and momenta (``attention``, ``softmax``,
        ``target``, ``kl_rows``; absent or None where the model has none).
    subset_diagnostics : bool
        ``diagnostics`` also takes ``names=`` (the diagnostic names to report, None for
        all) and ``arrays=`` (False: the frame's ``attention`` only) and computes only
        what those read, each value bit-identical to the full computation's. Otherwise
        (default) a run that asks for some diagnostics computes all and keeps those.
    readable : dict of str to callable
        The model's equations as written on the Theory page, for references and tests:
        ``"velocity"`` ``Ẋ = ∂H/∂P``, ``"force"`` ``Ṗ = −∂H/∂X``, ``"effective_scores"``
        ``Ŝ``, ``"hamiltonian"`` ``H`` (each ``(problem, X, P, A)``), ``"field"``, and
        ``"reference"``: ``(problem, state) -> (rhs, y0, unpack)`` for ``solve_ivp``.
    check : callable ``(problem, old, new, memo, norm_limit) -> (reason, accept, memo)``
        A model-specific reason to stop the run after a step (beyond a non-finite value
        or a feature norm above ``norm_limit``, the current setting): ``reason`` None to
        go on, else whether the new state is kept (``accept``); ``memo`` is any value the
        check keeps from step to step (None at the start). Optional.
    real_heads : str
        The real heads a Part I model runs (``weights="minilm"``): ``"one"`` (default),
        ``"all"`` (also every head of a layer, ``heads="all"``) or ``"none"`` (its build
        refuses any weights but the seed's). The page shows the real-head controls
        accordingly.
    """

    name: str
    part: int
    title: str
    section: str
    settings: tuple
    energy_settings: tuple
    equations: str
    look_for: str
    build: Callable
    reproblem: Callable
    stepper: Callable
    energy: Callable | None
    diagnostics: Callable
    subset_diagnostics: bool = False
    continue_settings: tuple = ("dt",)
    not_applicable: tuple = ()
    energy_symbol: str = "H"
    identically_zero: tuple = ()
    check: Callable | None = None
    readable: dict = field(default_factory=dict)
    real_heads: str = "one"

    def reads(self) -> tuple:
        """Every setting this model reads, common ones first."""
        common = COMMON_SETTINGS[self.part]
        return common + tuple(s for s in self.settings if s not in common)

    def restart_settings(self) -> tuple:
        """Settings whose change restarts a run of this model."""
        keep = set(self.energy_settings) | set(self.continue_settings) | {"dt", "norm_limit"}
        return tuple(s for s in self.reads() if s not in keep)


_REGISTRY: dict[str, ModelSpec] = {}
_LISTENERS: list[Callable] = []


def register(spec: ModelSpec, *, replace: bool = False) -> ModelSpec:
    """Add ``spec`` to the registry (``replace=True`` to redefine a name)."""
    if spec.part not in COMMON_SETTINGS:
        raise ValueError(f"part must be 1 or 2, got {spec.part!r}")
    if spec.real_heads not in ("none", "one", "all"):
        raise ValueError(f"real_heads must be 'none', 'one' or 'all', got {spec.real_heads!r}")
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"a model named {spec.name!r} is registered already")
    settings = sys.modules.get("dynamics.settings")
    known = getattr(settings, "Settings", None)
    if known is not None:  # (the built-in models register before Settings exists)
        unknown = [k for k in spec.reads() if k not in known.names()]
        if unknown:
            raise ValueError(f"model {spec.name!r} reads unknown settings {unknown}")
    reads = set(spec.reads())
    stray = [k for k in (*spec.energy_settings, *spec.continue_settings)
             if k not in reads and k != "dt"]
    if stray:
        raise ValueError(f"model {spec.name!r}: energy/continue settings {stray} are not "
                         "among the settings it reads")
    _REGISTRY[spec.name] = spec
    for listener in _LISTENERS:
        listener()
    return spec


def unregister(name: str) -> None:
    """Remove a model (a test's toy model)."""
    _REGISTRY.pop(name)
    for listener in _LISTENERS:
        listener()


def on_change(listener: Callable) -> None:
    """Call ``listener()`` whenever a model is registered or removed."""
    _LISTENERS.append(listener)


def get(name: str) -> ModelSpec:
    """The spec of model ``name`` (``ValueError`` naming the choices otherwise)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"model must be one of {', '.join(_REGISTRY)}, got {name!r}") from None


def names(part: int | None = None) -> tuple:
    """Registered model names in registration order (of one part, if given)."""
    return tuple(n for n, s in _REGISTRY.items() if part is None or s.part == part)


def specs(part: int | None = None) -> tuple:
    """Registered specs in registration order (of one part, if given)."""
    return tuple(_REGISTRY[n] for n in names(part))
