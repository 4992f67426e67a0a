"""Numbered SQLite migrations (NNNN_name.sql), applied in order by `migrate.apply`."""
