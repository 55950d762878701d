"""`anyy setup`: the wizard that writes a working config and secrets file, one module per step.

`ask` is how a step asks (a prompt_toolkit prompt at a terminal, a flag or a default with `--yes`),
`config_file` edits the owner's TOML keeping everything it does not ask about, `wizard` runs the steps.
A step module (`model_step`, `telegram_step`, `slack_step`, `host_steps`) asks its questions, checks the
answers against the real service, and returns what to write. Nothing here imports the CLI: what the
wizard needs from it (the accounts sign-in) it gets as a callable.
"""
