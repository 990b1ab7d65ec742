"""How a rule says no. A leaf: every rule, subtotals.py, the distinct-count rule and
match.py import it."""


class NoDerive(Exception):
    """The expression cannot be computed from the datamap; the message is the reason."""


class NeedsReaggregation(Exception):
    """Raised on an exact-grain attempt when an aggregate can only be rolled up."""
