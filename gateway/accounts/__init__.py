"""OAuth 2.0 accounts (Google, Microsoft): their tokens, kept encrypted in the store and refreshed before
they expire (`tokens`), the key that seals them (`vault`), what a person is told about an account
(`state`), the owners' notice when a provider signs one out (`notices`), and the sign-in flows behind
`anyy accounts add` (`grant`, `providers`, `google`, `microsoft`, `loopback`). Connectors are given a token
provider from here, never a credential.
"""

from gateway.accounts.state import AccountState
from gateway.accounts.tokens import AccountTokens, account_tokens

__all__ = ["AccountState", "AccountTokens", "account_tokens"]
