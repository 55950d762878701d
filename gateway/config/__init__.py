"""The config: one TOML file validated by pydantic (`model`), its section base (`base`) and the sections of
the optional capabilities (`capabilities`). Every caller imports from `gateway.config`, which re-exports
the public names of `model`. The lowest layer of the gateway: it imports nothing of the project.
"""

from gateway.config.model import *  # noqa: F403 — the package's public names are model's __all__
from gateway.config.model import __all__  # noqa: F401
