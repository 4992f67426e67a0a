"""Numbered schema migrations, applied in order by `engine.drivers.postgres.migrate`."""
