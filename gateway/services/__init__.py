"""The services tools reach through `ToolContext.service(name)`: the factory that builds them from config
(`factory`), helper children (`subagents`), artifacts and media (`media`), MCP servers (`mcp`) and usage
(`usage`). Built from what they need (store, config, an enqueue callable, a narrow port for running
turns), never from the Gateway. May import `config`, `automations`, `selection` and the lower packages.
"""
