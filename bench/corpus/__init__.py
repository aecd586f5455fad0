"""A newcomer's scientific programs, written as people write numpy (ODE steppers, root
finders, PDE grids, tables, quadrature, Monte Carlo, n-body, option trees, likelihoods,
filters, fits, FEM assembly, state in dicts, classes and dataclasses): session 16's audit of
issue 30, kept to measure xform on real programs and not only on the rows an issue names.

`python -m bench.corpus [--only=jit,grad,...] [--names=a,b]`: every check of every program
(bench/corpus/harness.py). `python -m bench.corpus --first-calls [--samples N]`: each
program's first gradient call, xform's against autograd's, after warm-up (fresh copies of the
function, so nothing is cached; alternating; CPU medians), for the programs both run.
"""
