"""The app module the CLI subprocesses of `test_cli_wait` load with `--app`: the sweeps of
`cli_sweeps`, declared process-wide. Never imported by the test process itself."""

from tests.backfill import cli_sweeps

cli_sweeps.declare()
