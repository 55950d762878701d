"""The `anyy` commands: the argument parser and entry point (`main`, the console script), the admin
commands that work on the store (`admin`), `anyy doctor` (`doctor`) and `anyy mcp` (`mcp`). The top layer
with `dashboard`: may import everything, and nothing imports it.
"""

import sys

# httpx's package imports its own command-line client (click, pygments, rich: ~25 ms) whenever those
# happen to be installed, and no `anyy` process uses it. httpx treats that module being unimportable as
# the normal case (its [cli] extra not installed); a None entry in sys.modules makes it so for this
# process. Nothing of httpx is imported or patched; should httpx move its CLI, this does nothing and
# tests/test_startup_imports.py shows what came back.
sys.modules.setdefault("httpx._main", None)
