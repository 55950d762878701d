"""Reminders and automations: when they fire, and the chat commands that set them."""
