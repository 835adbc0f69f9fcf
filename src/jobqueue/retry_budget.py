"""A retry budget: retries may be at most a fixed share of the calls, a token bucket.

Every first try of a call puts ``ratio`` of a token in the bucket (0.1 by default); every
retry takes one whole token out, and is refused when less than one is left. The bucket
holds at most ``max_tokens`` and starts full, and it also refills by itself at
``min_retries_per_s`` tokens a second, so a quiet client can still retry now and then.
Over any stretch of time,

    retries <= ratio * first tries + max_tokens + min_retries_per_s * seconds

so when a dependency goes down, the load a client adds by retrying stays near 10 % of its
normal load instead of multiplying it. Retrying at every layer of a stack multiplies calls
(3 layers that try 3 times each: 27 calls); a budget caps what each layer adds.

The design follows Finagle's ``RetryBudget`` and gRPC's retry throttling; Marc Brooker's
simulations of retry storms show why it helps.

Use it where the retry decision is made::

    budget = RetryBudget(clock=clock)
    budget.record_call()                   # once per first try
    ...
    if failed and budget.try_retry():      # a retry only while the budget lasts
        ...

Introduced in lesson 14.
"""

from __future__ import annotations

import math

from jobqueue.clock import Clock
from jobqueue.errors import InvalidSettingError

DEFAULT_RATIO = 0.1
"""Tokens a first try earns: retries may be 10 % of first tries."""

DEFAULT_MAX_TOKENS = 10.0
"""Most tokens the bucket holds (and holds at the start): a burst of 10 retries."""

DEFAULT_MIN_RETRIES_PER_S = 1.0
"""Tokens the bucket gains by itself each second, whatever the traffic."""

_ROUNDING = 1e-9
"""Slack in the one-token test: ten deposits of 0.1 add up to 0.9999999999999999."""


def _check_number(name: str, value: float, *, least: float, most: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not least <= value <= most:
        bounds = f"between {least:g} and {most:g}" if math.isfinite(most) else f">= {least:g}"
        raise InvalidSettingError(f"{name} must be a number {bounds}, got {value!r}")
    if not math.isfinite(value):
        raise InvalidSettingError(f"{name} must be finite, got {value!r}")
    return float(value)


class RetryBudget:
    """A token bucket that lets retries be at most ``ratio`` of the first tries.

    Args:
        clock: where the time comes from, for the steady refill.
        ratio: tokens earned per first try (0 to 1, default 0.1: retries at most 10 % of
            first tries).
        max_tokens: bucket size, and its content at the start (>= 1, default 10).
        min_retries_per_s: tokens gained per second regardless of traffic (>= 0,
            default 1; 0 for a bucket filled by calls alone).

    Raises:
        InvalidSettingError: naming the setting, if one is out of range.

    Introduced in lesson 14.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        ratio: float = DEFAULT_RATIO,
        max_tokens: float = DEFAULT_MAX_TOKENS,
        min_retries_per_s: float = DEFAULT_MIN_RETRIES_PER_S,
    ) -> None:
        self.clock = clock
        self.ratio = _check_number("ratio", ratio, least=0.0, most=1.0)
        self.max_tokens = _check_number("max_tokens", max_tokens, least=1.0)
        self.min_retries_per_s = _check_number("min_retries_per_s", min_retries_per_s, least=0.0)
        self._tokens = self.max_tokens
        self._updated_at = clock.now()
        self.retries = 0
        """Retries allowed so far."""
        self.refused = 0
        """Retries refused so far."""

    @property
    def tokens(self) -> float:
        """Tokens in the bucket now (one retry costs one)."""
        self._refill()
        return self._tokens

    def record_call(self) -> None:
        """Count a first try: it earns ``ratio`` of a token."""
        self._refill()
        self._tokens = min(self.max_tokens, self._tokens + self.ratio)

    def try_retry(self) -> bool:
        """Spend one token on a retry if there is one; return whether the retry may go."""
        self._refill()
        if self._tokens < 1.0 - _ROUNDING:
            self.refused += 1
            return False
        self._tokens = max(0.0, self._tokens - 1.0)
        self.retries += 1
        return True

    def _refill(self) -> None:
        now = self.clock.now()
        elapsed = max(0.0, now - self._updated_at)
        self._updated_at = now
        self._tokens = min(self.max_tokens, self._tokens + elapsed * self.min_retries_per_s)

    def __repr__(self) -> str:
        return f"RetryBudget(tokens={self.tokens:g}, retries={self.retries}, refused={self.refused})"
