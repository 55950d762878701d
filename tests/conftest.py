"""Shared test setup. Each module in tests/fixtures/ is a pytest plugin (one local server each)."""

import os
from pathlib import Path

# Without [runtime] timezone Anyy uses the machine's zone ($TZ first). The expectations here were written
# for UTC, so a laptop in Berlin must see the same: fixed for this process and every `anyy` it starts
# (a test about the zone sets its own TZ).
os.environ["TZ"] = "UTC"

pytest_plugins = sorted(
    f"tests.fixtures.{p.stem}" for p in (Path(__file__).parent / "fixtures").glob("*.py") if p.stem != "__init__"
)
