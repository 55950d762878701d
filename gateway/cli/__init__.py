"""The `anyy` commands: the argument parser and entry point (`main`, the console script), the admin
commands that work on the store (`admin`), `anyy doctor` (`doctor`) and `anyy mcp` (`mcp`). The top layer
with `dashboard`: may import everything, and nothing imports it.
"""
