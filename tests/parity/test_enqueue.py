"""The conformance kit's test_enqueue (engine/testing/kit) over every driver."""

from engine.testing.kit.test_enqueue import *  # noqa: F403
