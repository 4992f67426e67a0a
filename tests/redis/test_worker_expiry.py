"""The conformance kit's test_worker_expiry (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_worker_expiry import *  # noqa: F403
