"""The real heads a run's settings choose: the shipped file's (:mod:`dynamics.heads`) or a
local checkpoint's (:mod:`dynamics.bert`), by the ``weights`` setting."""

from __future__ import annotations

from . import bert, heads


def chosen(values: dict, head=None) -> heads.Heads:
    """The real heads the settings ``values`` choose: ``weights="minilm"`` the shipped
    file's (``sentence``, ``layer``), ``weights="checkpoint"`` the checkpoint's on
    ``text`` (:mod:`dynamics.bert`); ``head`` (default the setting ``head``) one head's
    index or ``"all"``. ``ValueError`` names what does not exist."""
    head = values["head"] if head is None else head
    weights = values.get("weights", "seed")
    if weights == "minilm":
        return heads.heads_of(values["sentence"], values["layer"], head)
    if weights == "checkpoint":
        try:
            checkpoint = bert.open_checkpoint(values.get("checkpoint") or None)
        except bert.CheckpointError as err:
            raise bert.CheckpointError(f"weights must be 'seed' or 'minilm' without a "
                                       f"usable checkpoint: {err}") from None
        return checkpoint.heads(values["text"], values["layer"], head)
    raise ValueError(f"weights={weights!r} has no real heads")


__all__ = ["chosen"]
