"""`[budget]`: spending caps, in the currency of `[model]`'s prices, or in tokens (in + out) without them."""

from __future__ import annotations

from pydantic import Field

from gateway.config.base import Section


class BudgetConfig(Section):
    """Every cap is optional; none set means no budget (docs/budget.md)."""

    daily: float | None = Field(default=None, gt=0)  # the whole resident, per local day
    monthly: float | None = Field(default=None, gt=0)  # the whole resident, per calendar month
    per_user_daily: float | None = Field(default=None, gt=0)  # each guest, per local day
    per_run: float | None = Field(default=None, gt=0)  # one automation or trigger firing

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.daily, self.monthly, self.per_user_daily, self.per_run))
