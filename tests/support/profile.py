"""How much random testing a run does, chosen by `FLUXMAT_TEST_PROFILE`.

* `ci` (the default; `make test`, CI): every property test runs the example count
  written in it, and tests without one run Hypothesis's default (100).
* `fast` (`make test-fast`): a tenth of those counts, at least one example: the
  same properties and the same code paths, fewer random cases; a few data-heavy
  comparisons take smaller data (`pick`).

`FLUXMAT_HYPOTHESIS_SCALE` multiplies on top of either, for long bug-hunting runs.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

SCALE = {"fast": 0.1, "ci": 1.0}
DEFAULT_EXAMPLES = 100  # Hypothesis's own default


def name() -> str:
    """The profile this run uses; an unknown name is an error naming the known ones."""
    chosen = os.environ.get("FLUXMAT_TEST_PROFILE", "ci") or "ci"
    if chosen not in SCALE:
        raise pytest.UsageError(
            f"FLUXMAT_TEST_PROFILE={chosen!r}: expected one of {', '.join(sorted(SCALE))}"
        )
    return chosen


def examples(n: int) -> int:
    """`n` random examples scaled by the profile and by $FLUXMAT_HYPOTHESIS_SCALE (default 1)."""
    return max(1, round(n * SCALE[name()] * float(os.environ.get("FLUXMAT_HYPOTHESIS_SCALE", "1"))))


def pick(*, ci, fast):
    """The value for this run's profile: for data sizes that the fast lane makes smaller."""
    return {"ci": ci, "fast": fast}[name()]


def load_hypothesis_profile() -> str:
    """Register both profiles with Hypothesis and load this run's (for tests that set no count)."""
    for profile in SCALE:
        settings.register_profile(profile, max_examples=examples_for(profile, DEFAULT_EXAMPLES))
    settings.load_profile(name())
    return name()


def examples_for(profile: str, n: int) -> int:
    return max(1, round(n * SCALE[profile]))
