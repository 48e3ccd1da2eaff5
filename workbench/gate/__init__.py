"""The regression gate: gate files, sources, paired non-inferiority decisions, reports."""
