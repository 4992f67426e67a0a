"""The worker listener tests await; its home is the conformance kit (engine.testing.observe)."""

from __future__ import annotations

from engine.testing.observe import Recorder

__all__ = ["Recorder"]
