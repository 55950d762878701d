"""The Slack surface (slack-bolt): Socket Mode by default, HTTP mode optional."""

from gateway.surfaces.slack.surface import SlackSurface

__all__ = ["SlackSurface"]
