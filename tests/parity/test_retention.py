"""The conformance kit's test_retention (engine/testing/kit) over every driver."""

from engine.testing.kit.test_retention import *  # noqa: F403
