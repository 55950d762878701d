"""The records of the fake authorization servers (tests/support/oauth_provider.py): clients, grants,
codes, device authorizations, tokens, and the error answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Provider = Literal["google", "microsoft"]


class OAuthError(Exception):
    """An error answer: `status` and the documented JSON body."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(f"{error}: {description}")
        self.error, self.description, self.status = error, description, status



@dataclass
class Client:
    client_id: str
    provider: Provider
    secret: str | None  # None: a public client


@dataclass
class Grant:
    provider: Provider
    user: str
    client_id: str
    scopes: set[str]
    revoked: bool = False


@dataclass
class AccessToken:
    token: str
    grant: Grant
    scopes: frozenset[str]
    resource: str  # "google", "outlook" or "graph"
    expires_at: float

    @property
    def user(self) -> str:
        return self.grant.user


@dataclass
class Code:
    value: str
    grant: Grant
    client_id: str
    redirect_uri: str
    challenge: str | None
    method: str
    offline: bool
    nonce: str | None
    expires_at: float
    used: bool = False
    issued: list[str] = field(default_factory=list)  # refresh tokens minted from it, revoked on a replay


@dataclass
class DeviceAuth:
    device_code: str
    user_code: str
    client_id: str
    scopes: list[str]
    expires_at: float
    interval: int
    last_poll: float = 0.0
    state: Literal["pending", "approved", "declined", "redeemed"] = "pending"
    user: str = ""


@dataclass
class Issued:
    """What a token endpoint answered, as plain values (for `issue()` and the HTTP layer)."""

    access_token: str
    expires_in: int
    scopes: list[str]
    refresh_token: str | None
    user: str
