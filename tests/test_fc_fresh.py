"""What a process's first call no longer does on its own time (issue 30, part 5): the tables
derived from the rule table are made by `import xform`, and stay right as rules change."""
import os
import subprocess
import sys

import numpy as np

import xform
from xform.ir import registry
from xform.ir.core import Primitive


def _in_fresh_process(code: str) -> str:
    root = os.path.dirname(os.path.dirname(xform.__file__))   # this xform, in the child
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": root})
    return done.stdout.strip()


def test_import_makes_every_derived_table_and_a_first_gradient_makes_none():
    code = ("import numpy as np, xform\n"
            "from xform.ir import registry\n"
            "made = set(registry._derived)\n"
            "print(len(made) == len(registry._derivations))\n"
            "xform.grad(lambda x: np.sum(np.sin(x) * x))(np.linspace(0, 1, 8))\n"
            "print(set(registry._derived) == made)\n")
    assert _in_fresh_process(code).split() == ["True", "True"]


def test_hook_tables_follow_registrations():
    prim = Primitive("fc_fresh_hooked")
    try:
        registry.register(prim, impl=np.add, hooks={"identity": 0, "commutative": True})
        assert registry.hooks_named("identity")[prim] == 0     # a zero identity counts
        assert registry.hooks_named("commutative")[prim] is True
        assert prim not in registry.hooks_named("equal_operands")
        registry.extend(prim, hooks={"equal_operands": 0.0})
        assert registry.hooks_named("equal_operands")[prim] == 0.0
        assert registry.hooks_named("commutative")[prim] is True   # the others stay
        plain = Primitive("fc_fresh_plain")
        registry.register(plain, impl=np.negative)
        try:
            assert all(plain not in registry.hooks_named(name) for name in registry.HOOK_NAMES)
        finally:
            del registry.RULES[plain]
    finally:
        del registry.RULES[prim]
    assert prim not in registry.hooks_named("identity")


def test_scipy_imported_before_xform_is_installed_by_the_import():
    # a first staging would install its stand-ins and register its primitives, which would
    # make every derived table anew on that call's time
    code = ("import numpy as np, scipy.stats\n"
            "import xform\n"
            "from xform.ir import registry\n"
            "from xform.numpy import stand_ins\n"
            "print(stand_ins.installed_count() > 0 and 'scipy.stats' not in stand_ins._pending)\n"
            "made = set(registry._derived)\n"
            "print(len(made) == len(registry._derivations))\n"
            "x = np.linspace(-1, 1, 8)\n"
            "g = xform.grad(lambda x: np.sum(scipy.stats.norm.logpdf(x, 0.5, 2.0)))(x)\n"
            "print(set(registry._derived) == made)\n"
            "print(bool(np.allclose(g, -(x - 0.5) / 4.0)))\n")
    assert _in_fresh_process(code).split() == ["True"] * 4


def test_scipy_special_registers_its_primitives_when_a_staging_reaches_one():
    code = ("import sys, numpy as np, xform\n"
            "import scipy.special as sc, scipy.stats as st\n"
            "from xform.ir import registry\n"
            "from xform.numpy import UFUNCS\n"
            "made = set(registry._derived)\n"
            "g = xform.grad(lambda x: np.sum(st.norm.logpdf(x)))(np.linspace(-1, 1, 5))\n"
            "print(bool(np.allclose(g, -np.linspace(-1, 1, 5))))\n"
            "print('xform.rules.scipy_special' not in sys.modules)\n"
            "print(set(registry._derived) == made)   # no registration: no table made anew\n"
            "g = xform.grad(lambda x: np.sum(sc.gammaln(x)))(np.array([1.0, 2.0]))\n"
            "print(bool(np.allclose(g, sc.digamma(np.array([1.0, 2.0])))))\n"
            "from xform.rules.scipy_special import gammaln_p\n"
            "print(UFUNCS[sc.gammaln] == gammaln_p.bind, sc.dawsn not in UFUNCS)\n")
    assert _in_fresh_process(code).split() == ["True"] * 6


def test_an_unsupported_scipy_ufunc_raises_as_before_the_family_registers():
    import pytest
    import scipy.special as sc
    for _ in range(2):      # while its entry waits for the family, and after
        with pytest.raises(xform.UnsupportedError, match=r"scipy\.special\.dawsn is not "
                           r"supported on traced values"):
            xform.grad(lambda x: np.sum(sc.dawsn(x)))(np.ones(3))


def test_the_ufuncs_named_for_scipy_special_are_those_of_its_primitives():
    from xform.rules.scipy_special import SCIPY_SPECIAL_PRIMITIVES
    from xform.scipy import special
    assert set(special._UFUNC_NAMES) == set(SCIPY_SPECIAL_PRIMITIVES) - set(special._PYTHON_LEVEL)


def test_a_registration_keeps_the_tables_it_cannot_change():
    before = registry.hooks_named("identity"), registry.kept_primitives()
    plain = Primitive("fc_fresh_elementwise")
    try:
        registry.register(plain, impl=np.negative, elementwise=True)
        # declares no hooks and is not kept: those tables stay; the element-wise one grows
        assert registry.hooks_named("identity") is before[0]
        assert registry.kept_primitives() is before[1]
        assert plain in registry.elementwise_primitives()
        kept = Primitive("fc_fresh_kept")
        registry.register(kept, impl=lambda x: None, kept=True)
        assert kept in registry.kept_primitives()
        # written to directly (as tests do; caught by the table's size), then a registration
        # of a primitive without hooks: the hook tables are made anew all the same
        hooked = Primitive("fc_fresh_direct")
        registry.RULES[hooked] = registry.Rules(impl=np.negative, hooks={"commutative": True})
        other = Primitive("fc_fresh_other")
        registry.register(other, impl=np.negative)
        try:
            assert hooked in registry.hooks_named("commutative")
        finally:
            del registry.RULES[hooked], registry.RULES[other], registry.RULES[kept]
        assert kept not in registry.kept_primitives()
    finally:
        del registry.RULES[plain]
    assert plain not in registry.elementwise_primitives()
