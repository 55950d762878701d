"""Anyy's gateway: surfaces, turns, approvals, automations, the CLI and the dashboard."""

__version__ = "0.1.0"
