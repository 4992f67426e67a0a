"""The conformance kit's test_paging (engine/testing/kit) over every driver."""

from engine.testing.kit.test_paging import *  # noqa: F403
