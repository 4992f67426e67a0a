"""The conformance kit's test_task_failures (engine/testing/kit) over every driver."""

from engine.testing.kit.test_task_failures import *  # noqa: F403
