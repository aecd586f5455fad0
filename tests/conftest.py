"""Hypothesis profiles: `ci` (derandomized, few examples, no deadline) is the default;
`XFORM_HYPOTHESIS=long` selects the longer local profile."""
import os

from hypothesis import HealthCheck, settings

import xform

# The graph checker runs after every pass in the whole suite.
xform.config.update("checks", True)

settings.register_profile("ci", max_examples=8, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large])
settings.register_profile("long", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("XFORM_HYPOTHESIS", "ci"))
