"""Scheduled and background work: the automation service that keeps store rows and APScheduler jobs
together (`scheduler`), the `/remind` parsing (`reminders`), and tracked background tasks that shutdown
can wait for (`background`). A bottom layer: imports only `config` of the gateway.
"""
