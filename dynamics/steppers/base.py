"""The stepper contract: what every time-stepping scheme of the package implements.

A stepper advances one model by one fixed step. It is little more than its order and
its ``step``: the physics comes from the model's problem (its vector field, forces and
scores), never re-derived inside the scheme.

Rules for implementers
----------------------
1. ``order`` is a class attribute: the global order of the scheme on smooth problems.
   The test suite measures it for every (model, stepper) pair it registers
   (``tests/test_orders.py``) and compares the fitted slope with it.
2. ``__init__(problem)`` receives the model's frozen :class:`Problem`-like object and
   nothing else. A stepper owns its scratch buffers (a :class:`~dynamics.workspace.Workspace`);
   no state ever holds one of them.
3. ``start(state)`` returns the *carry* for a state the stepper did not produce (the
   initial state, or a state whose problem changed): a typed, immutable object, or
   ``None``. The carry holds what the next step reuses (a force, a dissipation rate, a
   half relaxation); it belongs to the state it was returned with and is valid only for it.
4. ``step(state, carry, h)`` returns ``(new_state, new_carry)`` with ``new_state.t ==
   state.t + h`` (or less, when the scheme stops on a jump of a prescribed path). It
   never modifies ``state``, ``carry`` or any array they hold.
5. A non-finite value raises ``FloatingPointError`` (the engine runs steps under
   ``np.errstate(over, invalid, divide = "raise")``); a step that cannot be taken
   accurately with the present settings raises :class:`TooStiff` with a message that
   says what to change. The engine turns both into a stopped run with one message format.
6. ``finish(state, carry)`` completes work a stepper deferred to batch it over several
   steps (diagnostics of the state that the next step does not need); it returns
   ``(state, carry)``. The engine calls it before a state is reported and at least every
   :meth:`batch` steps. The default does nothing. Should the deferred work overflow at
   some step, it raises :class:`DeferredOverflow` with the last state before it.
7. States are immutable :class:`~dynamics.state.State` objects; a stepper may hand
   arrays of its own buffers to a new state only through :class:`Owned`, which never
   gives out an array that a state the engine can still see holds.
8. ``perturbed(state, carry, spread)`` is called when the engine has replaced the logits
   and attention of a state this stepper returned (with ``carry``) by noisy ones
   (stochastic logits; ``spread``, shape (N,), the row oscillation of the noise). It
   returns the ``(state, carry)`` to continue from: the carry without what it took from
   the old attention (a force, a dissipation rate, a relaxation), and, where the scheme
   keeps the tracking bound, the bound grown by ``spread`` (``osc(W + δ) ≤ osc(W) +
   osc(δ)``: it stays a bound of the noisy path). The default starts a new carry.
9. ``continued(carry)`` is called on the carry :meth:`start` returned when the engine
   continues a run after a setting change that left the relaxation's target and rate
   (β, γ, κ): the state is then no distant start. It returns the carry to use; the
   default returns it as it is.
"""

from __future__ import annotations


class TooStiff(Exception):
    """A step that cannot be taken accurately with the current settings."""


class DeferredOverflow(FloatingPointError):
    """Deferred work of :meth:`Stepper.finish` overflowed at a step: the run stops at
    ``t`` on ``state`` (the last state whose deferred work is finite), with ``carry``."""

    def __init__(self, message, t, state, carry):
        super().__init__(message)
        self.t, self.state, self.carry = t, state, carry


class Stepper:
    """Base class of the fixed-step schemes (see the module docstring for the contract).

    Attributes
    ----------
    order : int
        Global order of accuracy on smooth problems (measured by the tests).
    """

    order: int = 0

    def __init__(self, problem):
        self.problem = problem

    def start(self, state):
        """The carry of a state this stepper did not produce (rule 3)."""
        return None

    def step(self, state, carry, h: float):
        """One step of size ``h``: ``(new_state, new_carry)`` (rule 4)."""
        raise NotImplementedError

    def perturbed(self, state, carry, spread):
        """The ``(state, carry)`` after noise on the state's logits (rule 8)."""
        return state, self.start(state)

    def continued(self, carry):
        """The carry of a run continued after a setting change (rule 9)."""
        return carry

    def finish(self, state, carry):
        """Complete deferred work before ``state`` is reported (rule 6)."""
        return state, carry

    def batch(self, n_tokens: int) -> int:
        """Most steps whose deferred work may wait for :meth:`finish` (rule 6)."""
        return 64
