"""The conformance kit's test_published_caps (engine/testing/kit) over every driver."""

from engine.testing.kit.test_published_caps import *  # noqa: F403
