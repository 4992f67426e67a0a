"""The conformance kit's test_published_caps (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_published_caps import *  # noqa: F403
