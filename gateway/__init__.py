"""Anyy's gateway: surfaces, turns, approvals, automations, the CLI and the dashboard."""

import sys

# httpx's package imports its own command-line client (click, pygments, rich: ~25 ms, a few MB) whenever
# those happen to be installed, and no Anyy process uses it. httpx treats that module being unimportable
# as the normal case (its [cli] extra not installed); a None entry in sys.modules makes it so for every
# process that imports the gateway (the `anyy` command, the benches, an embedding program). Nothing of
# httpx is imported or patched; should httpx move its CLI, this does nothing and
# tests/test_startup_imports.py shows what came back.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # typeshed omits the documented None entry

__version__ = "0.1.0"
