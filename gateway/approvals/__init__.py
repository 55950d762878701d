"""Approvals and policy: the descriptor-driven decision to run, audit or hold a call (`policy`) and the
approval rows, their buttons, decisions, expiry and the execution of the stored call (`service`). May
import `config`, `automations` and the cross-cutting top-level modules (`checkpoints`); not `turns`.
"""
