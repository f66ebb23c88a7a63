"""Integrations with web frameworks. Each submodule imports its framework only when it is imported."""
