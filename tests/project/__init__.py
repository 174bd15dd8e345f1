"""Checks of the repository as a whole: layering, lint, docs, packaging, the test harness."""
