"""The arguments of ``panel serve app/main.py --args …``: every session's defaults.

:func:`server_defaults` reads ``--max-fps N`` and ``--steps-per-frame N`` (parameters of
:class:`app.serving.playback.Playback`); ``app/main.py`` sets them as the dashboard's
defaults, so that a page's URL leaves them out.
"""

from __future__ import annotations

import param

from .playback import Playback

#: What ``panel serve app/main.py --args …`` may set: every session's default of these
#: parameters of :class:`Playback` (a page may still ask for others in its URL).
SERVER_ARGUMENTS = (("--max-fps", "max_fps"), ("--steps-per-frame", "steps_per_frame"))


def server_defaults(argv: list[str]) -> dict[str, float | int]:
    """The session defaults given after ``panel serve app/main.py --args``:
    ``--max-fps N`` (every session's frame cap) and ``--steps-per-frame N`` (its speed),
    each at most once, as ``{parameter name: value}`` (empty when none is given).

    A weak laptop driving a projector, or a server shared by a class, draws fewer frames
    with the same runs: ``--max-fps 20 --steps-per-frame 10`` shows the default run at the
    default speed in half the frames. ``ValueError`` for a value outside the parameter's
    bounds, an unknown argument or one given twice.
    """
    flags = dict(SERVER_ARGUMENTS)
    if len(argv) % 2:
        raise ValueError(f"app/main.py takes pairs of {' N, '.join(flags)} N "
                         f"after --args, got {argv!r}")
    values: dict[str, float | int] = {}
    for flag, text in zip(argv[::2], argv[1::2], strict=True):
        name = flags.get(flag)
        if name is None or name in values:
            raise ValueError(f"app/main.py takes {' N, '.join(flags)} N (each "
                             f"once) after --args, got {argv!r}")
        p = Playback.param[name]
        lo, hi = p.bounds
        try:
            value = int(text) if isinstance(p, param.Integer) else float(text)
        except ValueError:
            value = float("nan")
        if not lo <= value <= hi:
            kind = "a whole number" if isinstance(p, param.Integer) else "a number"
            raise ValueError(f"{flag} must be {kind} in [{lo:g}, {hi:g}], got {text!r}")
        values[name] = value
    return values
