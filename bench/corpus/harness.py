"""The corpus's checks: each registered program through xform's transforms (jit, grad or
jacrev, vmap and vmap(grad), hessian, jvp(grad)), every transformed object called alternately
at its points, compared with eager numpy, autograd (where it runs the program) and central
finite differences. One line per check; a summary at the end."""
import copy
import sys
import warnings

import numpy as onp
import xform

PROGRAMS = []


def prog(points, grad=True, vmap=True, hess=True, jvpgrad=True, ag=True, jac=False, static=None,
         tol=1e-5, fresh=None):
    """points: list of argument tuples; the first argument is differentiated.
    fresh: a function returning extra args each call (generators), appended."""
    def deco(f):
        PROGRAMS.append(dict(f=f, points=points, grad=grad, vmap=vmap, hess=hess,
                             jvpgrad=jvpgrad, ag=ag, jac=jac, tol=tol, fresh=fresh))
        return f
    return deco


def _args(p, pt):
    a = tuple(copy.deepcopy(pt))
    if p['fresh'] is not None:
        a = a + tuple(p['fresh']())
    return a


def fd_grad(f, args, eps=1e-6):
    x = onp.asarray(args[0], dtype=float)
    scalar = x.ndim == 0
    x = onp.atleast_1d(x).astype(float)
    out = []
    for i in range(x.size):
        e = onp.zeros_like(x); e.flat[i] = eps
        xp = x + e; xm = x - e
        fp = f(*((xp[0] if scalar else xp),) + tuple(args[1:]))
        fm = f(*((xm[0] if scalar else xm),) + tuple(args[1:]))
        out.append((onp.asarray(fp, float) - onp.asarray(fm, float)) / (2 * eps))
    out = onp.array(out)
    if scalar:
        return out[0]
    # jacobian shape: out_shape + in_shape
    out = onp.moveaxis(out, 0, -1).reshape(onp.shape(out[0]) + x.shape)
    return out


def close(a, b, tol):
    a = onp.asarray(a, dtype=complex if onp.iscomplexobj(a) else float)
    b = onp.asarray(b, dtype=complex if onp.iscomplexobj(b) else float)
    if a.shape != b.shape:
        return False, f"shape {a.shape} vs {b.shape}"
    ok = onp.allclose(a, b, rtol=tol, atol=tol)
    return ok, "" if ok else f"maxdiff {onp.max(onp.abs(a - b)):.3g}"


RESULTS = []


def ag_version(f):
    import types, autograd.numpy as anp
    g = dict(f.__globals__)
    g['np'] = anp
    return types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)


def record(name, check, status, msg=""):
    RESULTS.append((name, check, status, msg))
    print(f"{status:5s} {name:28s} {check:10s} {msg}", flush=True)


def run_one(p, only=None):
    f = p['f']; name = f.__name__
    pts = p['points']
    order = [pts[i % len(pts)] for i in range(2 * len(pts))]
    # eager values
    try:
        eager = [f(*_args(p, pt)) for pt in pts]
    except Exception as e:
        record(name, 'eager', 'SKIP', repr(e)); return
    checks = [('jit', None)]
    if p['grad']:
        checks.append(('grad', None))
    if p['vmap']:
        checks.append(('vmap', None))
    if p['hess']:
        checks.append(('hess', None))
    if p['jvpgrad']:
        checks.append(('jvpgrad', None))
    for check, _ in checks:
        if only and check not in only:
            continue
        try:
            with warnings.catch_warnings(record=True) as ws:
                warnings.simplefilter('always')
                _run_check(p, check, order, pts, eager)
            for w in ws:
                if 'xform' in type(w.message).__module__ or 'Warning' in type(w.message).__name__:
                    text = type(w.message).__name__ + ': ' + str(w.message)[:300]
                    record(name, check, 'WARN', text.replace('\n', ' | '))
        except AssertionError as e:
            record(name, check, 'WRONG', str(e)[:300])
        except Exception as e:
            text = (type(e).__name__ + ': ' + str(e)).replace('\n', ' | ')
            record(name, check, 'ERROR', text[:600])


def _run_check(p, check, order, pts, eager):
    f = p['f']; tol = p['tol']
    gradfn = xform.jacrev if p['jac'] else xform.grad
    if check == 'jit':
        jf = xform.jit(f, static_argnums=1) if p['fresh'] else xform.jit(f)
        for pt in order:
            a = _args(p, pt)
            want = f(*_args(p, pt))
            got = jf(*a)
            ok, m = close(got, want, 1e-9)
            assert ok, f"jit at {pt!r:.60}: {m}"
        record(f.__name__, check, 'ok')
    elif check == 'grad':
        g = gradfn(f)
        for pt in order:
            got = g(*_args(p, pt))
            fd = fd_grad(lambda *a: f(*(a[:1] + _args(p, pt)[1:])), _args(p, pt))
            ok, m = close(got, fd, tol)
            assert ok, f"grad vs fd at {pt!r:.60}: {m}"
            if p['ag']:
                import autograd
                try:
                    agf = (autograd.jacobian if p['jac'] else autograd.grad)(ag_version(f))
                    want = agf(*_args(p, pt))
                except Exception:       # autograd cannot run every program: no reference
                    pass
                else:
                    ok, m = close(got, want, 1e-8)
                    assert ok, f"grad vs autograd at {pt!r:.60}: {m}"
        record(f.__name__, check, 'ok')
    elif check == 'vmap':
        xs = onp.stack([onp.asarray(pt[0], float) for pt in pts])
        rest = pts[0][1:]
        if any(pt[1:] is not rest and not all(onp.array_equal(a, b)
                                               for a, b in zip(pt[1:], rest)) for pt in pts):
            pass
        vf = xform.vmap(lambda x: f(*((x,) + _args(p, (None,) + tuple(rest))[1:])))
        got = vf(xs)
        want = onp.stack([onp.asarray(f(*((x,) + _args(p, (None,) + tuple(rest))[1:])))
                          for x in xs])
        ok, m = close(got, want, 1e-9)
        assert ok, f"vmap: {m}"
        vg = xform.vmap(gradfn(lambda x: f(*((x,) + _args(p, (None,) + tuple(rest))[1:]))))
        got = vg(xs)
        want = onp.stack([onp.asarray(gradfn(f)(*((x,) + _args(p, (None,) + tuple(rest))[1:])))
                          for x in xs])
        ok, m = close(got, want, 1e-9)
        assert ok, f"vmap(grad): {m}"
        record(f.__name__, check, 'ok')
    elif check == 'hess':
        h = xform.hessian(f)
        g = gradfn(f)
        for pt in order:
            got = h(*_args(p, pt))
            fd = fd_grad(lambda *a: onp.asarray(g(*(a[:1] + _args(p, pt)[1:]))), _args(p, pt),
                         eps=1e-5)
            ok, m = close(got, fd, 1e-4)
            assert ok, f"hess vs fd(grad) at {pt!r:.60}: {m}"
        record(f.__name__, check, 'ok')
    elif check == 'jvpgrad':
        g = gradfn(f)
        for pt in order:
            a = _args(p, pt)
            x = a[0]
            v = onp.ones_like(onp.asarray(x, float)) * 0.5 if onp.ndim(x) else 0.5
            if onp.ndim(x) == 0 and isinstance(x, float):
                v = 0.5
            gx = lambda xx: g(*((xx,) + _args(p, pt)[1:]))
            _, got = xform.jvp(gx, (x,), (v,))
            eps = 1e-5
            x_float = onp.asarray(x, float)
            fd = (onp.asarray(gx(x_float + eps * v))
                  - onp.asarray(gx(x_float - eps * v))) / (2 * eps)
            ok, m = close(got, fd, 1e-4)
            assert ok, f"jvp(grad) vs fd at {pt!r:.60}: {m}"
        record(f.__name__, check, 'ok')


def main(modules):
    only = None
    names = None
    for a in sys.argv[1:]:
        if a.startswith('--only='):
            only = a.split('=', 1)[1].split(',')
        elif a.startswith('--names='):
            names = a.split('=', 1)[1].split(',')
    for p in PROGRAMS:
        if names and p['f'].__name__ not in names:
            continue
        run_one(p, only)
    bad = [r for r in RESULTS if r[2] != 'ok']
    print(f"\n{len(set(r[0] for r in RESULTS))} programs, {len(RESULTS)} checks, {len(bad)} not ok")
    for r in bad:
        print('  ', r[0], r[1], r[2], r[3][:200])
