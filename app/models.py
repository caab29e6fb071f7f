"""What the app knows about models: read from the registry, :mod:`dynamics.models`.

The app keeps no model facts of its own. Which settings a model reads, its title,
equations, what to look for and the diagnostics it leaves undefined are all in its
:class:`~dynamics.models.ModelSpec`; which prescribed path uses which path setting is a
fact of the attention model (:data:`dynamics.models.attention.PATH_USES`). The one rule
the app adds is stated here once: **the main tab runs Part I models only**
(:func:`main_models`, :func:`main_model_problem`), for its menu, presets, URL queries
and pasted settings alike.
"""

from __future__ import annotations

from dynamics import Settings, models
from dynamics.models.attention import PATH_USES

#: The part of the theory the main tab runs (Part II runs in the inertial lab).
MAIN_PART = 1
#: How the plots say that a diagnostic vanishes by construction for the model
#: (``spec.identically_zero``).
ZERO_NOTE = "≡ 0 for this model"
#: The model run beside the selected one in comparison mode: the softmax-slaved limit
#: γ → ∞ of the coupled models (the app's choice of reference, named once here).
COMPARISON_MODEL = "reduced"


def main_models() -> tuple:
    """The models the main tab runs, in registration order.

    Returns
    -------
    tuple of str
        ``dynamics.models.names(part=MAIN_PART)``, read at each call (a model registered
        later is included).
    """
    return models.names(part=MAIN_PART)


def main_model_problem(name) -> str | None:
    """Why ``name`` cannot run on the main tab, or None if it can.

    Parameters
    ----------
    name : object
        A value of the ``model`` setting.

    Returns
    -------
    str or None
        ``"model must be one of …, got …"`` naming the main tab's models.
    """
    choices = main_models()
    if name in choices:
        return None
    return f"model must be one of {', '.join(choices)} on this tab, got {name!r}"


def spec(name: str) -> models.ModelSpec:
    """The registered spec of model ``name``.

    Parameters
    ----------
    name : str

    Returns
    -------
    dynamics.models.ModelSpec

    Raises
    ------
    ValueError
        No model of that name is registered (the message names the choices).
    """
    return models.get(name)


#: Settings that choose a real head (Theory page: a real head on a real sentence), and
#: those a real head sets itself (its sentence's word count, the model's width).
REAL_HEAD = ("sentence", "layer", "head", "heads")
SET_BY_HEAD = ("n_tokens", "dim")
#: Settings of your own sentence (``weights="checkpoint"``): the text is a box of the page;
#: the checkpoint folder is the server's (its environment or the installed MiniLM), never
#: a control, a URL key or a pasted setting.
SENTENCE_SETTINGS = ("text", "checkpoint")


def applies(name: str, settings: Settings) -> bool:
    """Whether setting ``name`` has an effect on the run of ``settings``.

    A setting applies when the selected model reads it (``spec.reads()``); a path
    setting only when the selected path uses it (``PATH_USES``); the weights and the
    choice of a real head only for a model that runs real heads (``ModelSpec.real_heads``;
    ``heads`` only where all heads are offered), the head only with a real head's
    weights, N and d only without; the shipped sentence with the shipped heads, your own
    sentence (``text``) with a checkpoint's; the checkpoint folder never (the server's).

    Parameters
    ----------
    name : str
        A setting name.
    settings : dynamics.Settings
        The current settings (their model and path).

    Returns
    -------
    bool
    """
    if name not in spec(settings.model).reads():
        return False
    if name in PATH_USES:
        return settings.path in PATH_USES[name]
    offered = spec(settings.model).real_heads  # "none", "one" or "all"
    if name in ("weights", *REAL_HEAD) and offered == "none":
        return False
    if name == "heads" and offered != "all":
        return False
    if name == "checkpoint":
        return False
    if name == "text":  # your own sentence, with a checkpoint's weights
        return offered != "none" and settings.weights == "checkpoint"
    if name == "sentence":  # a shipped sentence, with the shipped heads
        return settings.weights == "minilm"
    if name in REAL_HEAD:  # which head: only with a real head's weights
        return settings.weights != "seed"
    if name in SET_BY_HEAD:  # N and d come from the sentence
        return settings.weights == "seed"
    return True


def fit_real_heads(settings: Settings) -> dict:
    """The settings to change so that the selected model can run them: ``weights`` back
    to the seed's for a model that runs no real head, ``heads`` back to one for a model
    that does not run a whole layer (``ModelSpec.real_heads``); empty when it can."""
    offered = spec(settings.model).real_heads
    fitted = {}
    if offered == "none" and settings.weights != "seed":
        fitted["weights"] = "seed"
    if offered != "all" and settings.heads != "one":
        fitted["heads"] = "one"
    return fitted


def label(name: str) -> str:
    """The display label of setting ``name``.

    Parameters
    ----------
    name : str
        A parameter of :class:`dynamics.Settings`.

    Returns
    -------
    str
        The parameter's ``label``, e.g. ``"β (inverse temperature)"``.
    """
    return Settings.param[name].label


def not_applicable(name: str) -> tuple:
    """Diagnostics model ``name`` does not define.

    Parameters
    ----------
    name : str
        A registered model.

    Returns
    -------
    tuple of str
        ``spec.not_applicable``: NaN in its frames, never plotted.
    """
    return spec(name).not_applicable


def energy_symbol(name: str) -> str:
    """How the plots name the energy of model ``name``'s balance.

    Parameters
    ----------
    name : str
        A registered model.

    Returns
    -------
    str
        ``spec.energy_symbol``: ``"H"``, ``"F"``, ``"Hᵣ"`` or ``"Φ"``.
    """
    return spec(name).energy_symbol
