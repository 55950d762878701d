"""Spending caps (`[budget]`), checked against the usage rows before a model call.

The usage rows (`store.usage`, every model call's tokens on its message row) are the one ledger: what
was spent is summed from them, never counted in memory, so a cap holds across restarts and across
residents sharing a PostgreSQL store. Amounts are in the currency of `[model]`'s prices, or in tokens
(in + out) when no price is set.

* Resident caps (`daily`, `monthly`) cover every turn; `per_user_daily` covers each guest's own turns;
  `per_run` bounds one automation or trigger firing (converted to a token limit the turn checks before
  each model call: the call that crosses it finishes, no further one is made).
* At 80 % of a cap each owner is told once (per cap and period: the outbox's dedupe key makes it once
  whichever resident notices first); at 100 % the next turn is refused (a turn in flight finishes).
* **Allow today** (an owner's button) raises today's caps once: the daily caps double for the rest of
  the day and the monthly cap grows by one daily cap (a thirtieth of it without a daily cap).

A check sums today's rows; the month's earlier days are summed once a day and kept (rows of a closed day
never change), so a check costs one day's rows however far into the month (docs/benchmarks.md).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Protocol

from gateway.access import owner_chats
from gateway.config import Config
from gateway.services.usage import summary
from store.budget import BudgetAllowances
from store.db import Store
from store.records import Button, Inbound, Origin, Outbound, iso
from store.usage import UsageRepo

log = logging.getLogger(__name__)

Enqueue = Callable[[Outbound, str], Awaitable[int]]
WARN_AT = 0.8
# A closed day's sum is kept only once this much of the new day has passed: by then every row of the day
# before is written, whichever resident (or clock a few seconds off) wrote it.
DAY_SETTLED = timedelta(minutes=5)
ALLOW_ACTION = "allow_today"
FOLLOW_UP_CHARS = 300  # of the event's first line a follow-up skipped for budget repeats to the chat


@dataclass(frozen=True)
class Cap:
    """One cap as it stands now."""

    name: str  # daily | monthly | per_user_daily
    limit: float
    spent: float
    period: str  # the day (YYYY-MM-DD) or month (YYYY-MM) it counts

    @property
    def left(self) -> float:
        return max(0.0, self.limit - self.spent)

    @property
    def reached(self) -> bool:
        return self.spent >= self.limit


class Budget:
    """The caps of one resident (or of several sharing a store)."""

    def __init__(self, store: Store, config: Config, enqueue: Enqueue,
                 now: Callable[[], datetime] | None = None) -> None:
        self.config = config
        self.caps_config = config.budget
        self.repo = UsageRepo(store)
        self.allowances = BudgetAllowances(store)
        self._enqueue = enqueue
        self._now = now or (lambda: datetime.now(config.tz))
        self._closed_days: tuple[datetime, float] | None = None  # (today's start, the month's spend before it)

    @property
    def enabled(self) -> bool:
        return self.caps_config.any

    @property
    def priced(self) -> bool:
        m = self.config.model
        return m.price_in_per_mtok is not None or m.price_out_per_mtok is not None

    def amount(self, value: float) -> str:
        """A sum as people read it: 0.1234 in the prices' currency, or 12,345 tokens."""
        return f"{value:.4f}" if self.priced else f"{int(value):,} tokens"

    async def spent(self, since: datetime, user_key: str | None = None, until: datetime | None = None) -> float:
        """What the usage rows since `since` (and before `until`) add up to (cost, or tokens in + out
        without prices)."""
        rows = await self.repo.totals(since=iso(since), until=iso(until) if until else None, user_key=user_key)
        total = summary(rows, self.config.model)["total"]
        if self.priced:
            return float(total["cost"] or 0.0)
        return float(total["input_tokens"] + total["output_tokens"])

    def today(self) -> date:
        return self._now().date()

    async def caps(self, user_key: str | None = None, guest: bool = False) -> list[Cap]:
        """The caps that bound a turn of `user_key` (a guest's own cap too), with today's allowance."""
        cfg, now = self.caps_config, self._now()
        day, tz = now.date(), self.config.tz
        day_start = datetime.combine(day, time(), tz)
        month_start = datetime.combine(day.replace(day=1), time(), tz)
        allowed = cfg.any and await self.allowances.granted(day.isoformat())
        caps: list[Cap] = []
        today = await self.spent(day_start) if cfg.daily is not None or cfg.monthly is not None else 0.0
        if cfg.daily is not None:
            caps.append(Cap("daily", cfg.daily * (2 if allowed else 1), today, day.isoformat()))
        if cfg.monthly is not None:
            extra = (cfg.daily or cfg.monthly / 30) if allowed else 0.0
            month = today + await self._before_today(month_start, day_start, now)
            caps.append(Cap("monthly", cfg.monthly + extra, month, f"{day:%Y-%m}"))
        if cfg.per_user_daily is not None and guest and user_key is not None:
            caps.append(Cap("per_user_daily", cfg.per_user_daily * (2 if allowed else 1),
                            await self.spent(day_start, user_key), day.isoformat()))
        return caps

    async def _before_today(self, month_start: datetime, day_start: datetime, now: datetime) -> float:
        """The month's spend before today: summed once a day, when the day before has settled."""
        if day_start == month_start:
            return 0.0
        if now - day_start < DAY_SETTLED:
            return await self.spent(month_start, until=day_start)
        if self._closed_days is None or self._closed_days[0] != day_start:
            self._closed_days = (day_start, await self.spent(month_start, until=day_start))
        return self._closed_days[1]

    async def check(self, user_key: str, guest: bool) -> Cap | None:
        """The cap a new turn of `user_key` would break (None: it may run). Tells the owners once when a
        cap passes 80 %, and once when it is used up."""
        if not self.enabled:
            return None
        reached = None
        for cap in await self.caps(user_key, guest):
            if cap.reached:
                reached = reached or cap
                await self._tell_owners(cap, user_key, "100", self._used_up_text(cap, user_key))
            elif cap.spent >= WARN_AT * cap.limit:
                await self._tell_owners(cap, user_key, "80",
                                        f"💰 {_label(cap, user_key)} is at {cap.spent / cap.limit:.0%}: "
                                        f"{self.amount(cap.spent)} of {self.amount(cap.limit)}.")
        if reached is not None:
            log.info("budget_refused user=%s cap=%s", user_key, reached.name)
        return reached

    def per_run_tokens(self) -> int | None:
        """The token limit of one automation turn from `per_run`. With prices it is the most tokens the
        amount could buy at the dearer of the input and output prices. The turn checks it before each
        further model call, so a run may end over it by the one call that crossed it, never by more."""
        per_run = self.caps_config.per_run
        if per_run is None:
            return None
        if not self.priced:
            return int(per_run)
        m = self.config.model
        dearest = max(m.price_in_per_mtok or 0.0, m.price_out_per_mtok or 0.0)
        return int(per_run * 1e6 / dearest) if dearest else None

    def refusal(self, cap: Cap, origin: Origin, owner: bool) -> Outbound:
        """The short notice a chat turn gets instead of an answer; an owner's has the **Allow today** button."""
        text = f"💰 {_label(cap, None)} is used up ({self.amount(cap.spent)} of {self.amount(cap.limit)}), " \
               "so I am not calling the model."
        buttons = []
        if owner:
            text += " Allow today raises today's caps once."
            buttons = [Button(label="Allow today", action=ALLOW_ACTION, value=self.today().isoformat())]
        else:
            text += " The owner can raise it."
        return Outbound(origin=origin, text=text, buttons=buttons)

    async def allow_today(self, day: str, user_key: str) -> str:
        """An owner's **Allow today** press (the caller checked the role)."""
        if day != self.today().isoformat():
            return "That button was for another day; nothing changed."
        if not await self.allowances.grant(day, user_key):
            return "Today's caps were raised already; they are raised once a day."
        log.info("budget_allowed day=%s by=%s", day, user_key)
        return "Today's caps are raised; send your message again."

    async def report(self) -> list[str]:
        """The caps and what is left of them (for /usage and the dashboard home); [] without a budget."""
        if not self.enabled:
            return []
        lines = [f"Budget {cap.name.replace('_', ' ')}: {self.amount(cap.spent)} of {self.amount(cap.limit)} "
                 f"spent, {self.amount(cap.left)} left" for cap in await self.caps()]
        if self.caps_config.per_user_daily is not None:
            lines.append(f"Budget per guest per day: {self.amount(self.caps_config.per_user_daily)}")
        if self.caps_config.per_run is not None:
            lines.append(f"Budget per automation run: {self.amount(self.caps_config.per_run)}")
        return lines

    def _used_up_text(self, cap: Cap, user_key: str) -> str:
        return (f"💰 {_label(cap, user_key)} is used up ({self.amount(cap.spent)} of {self.amount(cap.limit)}). "
                "Automations skip their model calls (reminders still arrive) and chat turns are refused until "
                "it renews; an owner's Allow today raises today's caps once.")

    async def _tell_owners(self, cap: Cap, user_key: str, level: str, text: str) -> None:
        who = f"{cap.name}:{user_key}" if cap.name == "per_user_daily" else cap.name
        for chat in owner_chats(self.config):
            await self._enqueue(Outbound(origin=chat, text=text),
                                f"budget:{level}:{who}:{cap.period}:{cap.limit}:{chat.surface}:{chat.chat_id}")


def _label(cap: Cap, user_key: str | None) -> str:
    if cap.name == "daily":
        return "Today's budget"
    if cap.name == "monthly":
        return "This month's budget"
    return f"The daily budget of {user_key}" if user_key else "Your daily budget"


class Roles(Protocol):
    async def role_of(self, user_key: str) -> str | None: ...


async def budget_refusal(budget: Budget | None, access: Roles, inbound: Inbound) -> Outbound | None:
    """The notice a chat message gets instead of a turn when a cap is used up; None when it may run."""
    if budget is None or not budget.enabled:
        return None
    role = await access.role_of(inbound.user_key)
    cap = await budget.check(inbound.user_key, guest=role == "guest")
    return None if cap is None else budget.refusal(cap, inbound.origin, owner=role == "owner")


async def _reached(budget: Budget, access: Roles, user_key: str) -> Cap | None:
    return await budget.check(user_key, guest=await access.role_of(user_key) == "guest")


async def run_allowance(budget: Budget | None, access: Roles, user_key: str,
                        name: str) -> tuple[str | None, int | None]:
    """Before an automation's model turn: (the line it delivers instead when a cap is used up, or None;
    the token limit of its turn from `per_run`, or None)."""
    if budget is None or not budget.enabled:
        return None, None
    if (cap := await _reached(budget, access, user_key)) is not None:
        return (f"⏸ “{name}” was skipped for budget: {_label(cap, user_key).lower()} is used up "
                f"({budget.amount(cap.spent)} of {budget.amount(cap.limit)})."), None
    return None, budget.per_run_tokens()


def may_spend(budget: Budget | None, access: Roles) -> Callable[[str], Awaitable[bool]]:
    """Whether a model call on `user_key`'s behalf that nobody typed (a history summary) may run: none of
    the caps of their turns is used up."""

    async def allowed(user_key: str) -> bool:
        return budget is None or not budget.enabled or await _reached(budget, access, user_key) is None

    return allowed


async def follow_up_refusal(budget: Budget | None, access: Roles, user_key: str, event: str) -> str | None:
    """Before a follow-up turn (an approval's outcome, a helper's report): what the chat is told in words
    instead when a cap is used up, or None when the model may be called."""
    if budget is None or not budget.enabled or (cap := await _reached(budget, access, user_key)) is None:
        return None
    about = event.split("\n", 1)[0]  # the outcome's line; what follows may be a quoted report, shown already
    about = about if len(about) <= FOLLOW_UP_CHARS else about[:FOLLOW_UP_CHARS] + " […]"
    return (f"{about}\n\n💰 {_label(cap, user_key)} is used up ({budget.amount(cap.spent)} of "
            f"{budget.amount(cap.limit)}), so I am not calling the model to follow up on this.")
