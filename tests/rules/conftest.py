"""Every rule test runs in debug mode: each value is checked against its abstract value as it
is computed, and each rule's outputs against what the transform expects."""
import pytest

import xform


@pytest.fixture(scope="package", autouse=True)
def debug_mode():
    with xform.config.debug_mode():
        yield
