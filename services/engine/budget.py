"""A run's budget, part of its RunContext: how much it may spend."""

from __future__ import annotations

from dataclasses import dataclass

from services.engine import texts


@dataclass(frozen=True)
class RunBudget:
    """Limits of one run; 0 means no limit."""

    max_tokens: int = 0
    max_steps: int = 0
    max_seconds: float = 0.0

    def over(self, defaults: RunBudget) -> RunBudget:
        """This budget with each unset (0) limit taken from ``defaults``."""
        return RunBudget(
            self.max_tokens or defaults.max_tokens,
            self.max_steps or defaults.max_steps,
            self.max_seconds or defaults.max_seconds,
        )


class BudgetExceeded(Exception):
    """A limit of the run's budget was reached; the run ends budget_exceeded.
    ``limit``: which one ("steps", "tokens", "tokens_prompt": the prompt alone
    is over), and ``amount`` its value; said in the run's language by
    :meth:`say`."""

    def __init__(self, limit: str, amount: int) -> None:
        self.limit = limit
        self.amount = amount
        super().__init__(self.say("en"))

    def say(self, language: str) -> str:
        return texts.say(language, f"budget.{self.limit}", limit=self.amount)
