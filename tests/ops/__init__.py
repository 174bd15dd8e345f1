"""Tests of the operations layer: the CLI, metrics, health, the dashboard, deployment."""
