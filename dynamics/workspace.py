"""Scratch buffers of the kernels: reused from call to call, never held by a state."""

from __future__ import annotations

import numpy as np


class Workspace:
    """Named scratch arrays, reused from call to call (their contents never outlive a call).

    A step asks for ``work.get(name, shape)``; each function uses its own names, so
    nested calls never share a live buffer. States never hold a workspace array.
    """

    def __init__(self):
        self._arrays = {}
        self.hints = {}  # small values a function keeps from call to call

    def get(self, name, shape):
        a = self._arrays.get(name)
        if a is None or a.shape != shape:
            a = self._arrays[name] = np.empty(shape)
        return a



class Owned:
    """Arrays a stepper hands to the states it returns, reused three states later.

    Fresh large arrays cost page faults (an 8 MB array at N = 1024 measured 11 ms to
    fill against 3.4 ms for a reused one). The engine keeps only the current state (and,
    during a step, the one it came from) and reports copies: so the array handed out
    three calls of :meth:`take` ago under the same name belongs to no state anyone can
    still see, unless it is one of ``busy`` (the arrays of the state being stepped from
    and of its carry, which a step with sub-steps may still hold), which are skipped.
    """

    def __init__(self, size: int = 3):
        self._size = size
        self._rings = {}

    def take(self, name, shape, busy=()):
        """An array of ``shape`` for a new state: the oldest of this name's ring that is
        not one of ``busy``, or a new one while the ring fills."""
        ring = self._rings.setdefault(name, [])
        if len(ring) < self._size or ring[0].shape != shape:
            if ring and ring[0].shape != shape:
                ring.clear()
            a = np.empty(shape)
            ring.append(a)
            return a
        for k, a in enumerate(ring):
            if not any(a is b for b in busy):
                ring.append(ring.pop(k))  # now the newest
                return a
        a = np.empty(shape)  # every array busy: a fresh one (cannot happen with size 3)
        ring.append(a)
        return a
