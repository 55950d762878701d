"""The services tools reach through `ToolContext.service(name)`: which of them a config gives and why not
(`availability`, the one answer to "is this toolset here"), the factory that builds exactly those
(`factory`), helper children (`subagents`), artifacts and media (`media`), MCP servers (`mcp`) and usage
(`usage`). Built from what they need (store, config, an enqueue callable, a narrow port for running
turns), never from the Gateway. May import `config`, `automations`, `selection` and the lower packages.
"""
