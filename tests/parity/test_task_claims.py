"""The conformance kit's test_task_claims (engine/testing/kit) over every driver."""

from engine.testing.kit.test_task_claims import *  # noqa: F403
