"""The conformance kit's test_select (engine/testing/kit) over every driver."""

from engine.testing.kit.test_select import *  # noqa: F403
