"""Telegram surface (python-telegram-bot): `TelegramSurface(cfg, token, data_dir)`."""

from gateway.surfaces.telegram.surface import TelegramSurface

__all__ = ["TelegramSurface"]
