"""Scheduled and background work: the automation service that keeps store rows and APScheduler jobs
together (`scheduler`; the jobs themselves in `jobs`), the `/remind` commands (`reminders`) and the
phrasing of "when" they read (`when`), and tracked background tasks that shutdown can wait for
(`background`). A bottom layer: imports only `config` of the gateway.
"""
