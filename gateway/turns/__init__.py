"""The turn loop and what a turn goes through: the runtime and its session lanes (`runtime`), the tool
calls of one model reply (`reply_calls`), one tool call from validation through policy to its budgeted
result (`tool_call`, `results`), the tool context a turn's tools see (`tool_context`), the live reply
while the model writes (`live_reply`), the history window, the turn's opening trip (`opening`) and its
later writes (`writes`), the system prompt, compaction, and the slash commands (`commands`). May import
every lower gateway layer (approvals, services, surfaces, llm, config, automations, selection) and the
cross-cutting top-level modules; never `app`, `cli` or `dashboard`.
"""
