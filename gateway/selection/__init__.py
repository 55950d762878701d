"""Toolset selection: which toolsets a turn is offered (`selector`), from the message, its attachments,
the session's recent use and the user's pins, with the keyword scanner (`keywords`). A bottom layer:
imports nothing of the gateway.
"""
