"""Experiments: the config (experiments/*.toml), the candidate cache, the runner, tracking, reports."""
