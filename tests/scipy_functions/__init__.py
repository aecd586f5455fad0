"""Tests of SciPy on tracers (xform.scipy)."""
