"""A duration written in words, as the faces mend it: the engine's one rule
(`engine.durations`), which a retention variable so written is read by too."""

from __future__ import annotations

from engine.durations import spelt, unit_of

__all__ = ["spelt", "unit_of"]
