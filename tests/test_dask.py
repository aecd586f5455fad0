"""threaded_map over dask arrays: values and derivatives against the numpy path under dask's
local schedulers and a 2-process dask.distributed cluster (started once per session; a failure
to start fails the tests), workers that never stage, a worker killed mid-computation, and a
chunk that raises."""
import multiprocessing
import os
import signal
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import cloudpickle
import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

import xform
from xform.ir.registry import register
from xform.rules.helpers import elementwise_abstract_eval

# Workers cannot import this file: what its functions reference travels with them.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

RNG = np.random.default_rng(7)
N, D = 600, 4
X_NP = RNG.normal(size=(N, D))
Y_NP = np.sign(RNG.normal(size=N))
W0 = RNG.normal(size=D) * 0.3
X_DASK = da.from_array(X_NP, chunks=(130, D))  # 5 row blocks, the last one shorter


def logistic_loss(X, y):
    def loss(w):
        per_row = xform.threaded_map(lambda x, t: np.logaddexp(0.0, -t * (x @ w)), X, y,
                                     axis=0, chunk_size=32)
        return np.mean(per_row)
    return loss


def mlp_loss(X, y):
    def loss(params):
        W1, w2 = params
        per_row = xform.threaded_map(lambda x, t: (np.tanh(x @ W1) @ w2 - t) ** 2, X, y,
                                     axis=0)
        return np.sum(per_row)
    return loss


def numpy_and_dask(make):
    return make(X_NP, Y_NP), make(X_DASK, Y_NP)


@pytest.fixture(scope="session")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as running:
        yield running


@pytest.fixture
def client(cluster):
    with Client(cluster, set_as_default=False) as connected:
        with dask.config.set(scheduler=connected):
            yield connected


def check_against_numpy():
    ref, lazy = numpy_and_dask(logistic_loss)
    np.testing.assert_allclose(np.asarray(lazy(W0)), ref(W0), rtol=1e-12)
    np.testing.assert_allclose(xform.grad(lazy)(W0), xform.grad(ref)(W0), rtol=1e-12)
    value, grad = xform.value_and_grad(lazy)(W0)
    assert type(grad) is np.ndarray
    np.testing.assert_allclose(value, ref(W0), rtol=1e-12)
    np.testing.assert_allclose(grad, xform.grad(ref)(W0), rtol=1e-12)
    direction = np.arange(1.0, D + 1)
    np.testing.assert_allclose(xform.jvp(lazy, (W0,), (direction,))[1],
                               xform.jvp(ref, (W0,), (direction,))[1], rtol=1e-12)
    ref, lazy = numpy_and_dask(mlp_loss)
    params = (RNG.normal(size=(D, 3)), RNG.normal(size=3))
    for got, expected in zip(xform.grad(lazy)(params), xform.grad(ref)(params)):
        assert type(got) is np.ndarray
        np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads", "processes"])
def test_local_schedulers_match_numpy(scheduler):
    if scheduler != "processes":
        with dask.config.set(scheduler=scheduler):
            check_against_numpy()
        return
    # One pool for all computes (dask would start one per compute otherwise); spawned, as
    # dask's own default, so the workers import xform afresh and never see the client's state.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        with dask.config.set(scheduler="processes", pool=pool):
            check_against_numpy()


def test_results_stay_lazy_until_computed():
    per_row = xform.threaded_map(lambda x: np.sum(np.sin(x)), X_DASK, axis=0)
    assert isinstance(per_row, da.Array) and per_row.chunks == ((130,) * 4 + (80,),)
    total = per_row @ np.ones(N) / 2  # dask's own protocols: still lazy
    assert isinstance(total, da.Array)
    np.testing.assert_allclose(total.compute(), np.sum(np.sin(X_NP)) / 2, rtol=1e-12)
    # element-wise over 2-d blocks, with a numpy input split like the dask one
    other = RNG.normal(size=X_NP.shape)
    blocks = da.from_array(X_NP, chunks=(250, 3))
    product = xform.threaded_map(lambda a, b: np.cos(a) * b, blocks, other)
    assert isinstance(product, da.Array)
    np.testing.assert_allclose(product.compute(), np.cos(X_NP) * other, rtol=1e-12)


def test_second_order_and_vmap_match_numpy():
    ref, lazy = numpy_and_dask(logistic_loss)
    with dask.config.set(scheduler="threads"):
        np.testing.assert_allclose(xform.hessian(lazy)(W0), xform.hessian(ref)(W0),
                                   rtol=1e-10, atol=1e-14)
        ws = np.stack([W0, -W0, 2 * W0])
        np.testing.assert_allclose(xform.vmap(lazy)(ws), xform.vmap(ref)(ws), rtol=1e-12)
        np.testing.assert_allclose(xform.vmap(xform.grad(lazy))(ws),
                                   xform.vmap(xform.grad(ref))(ws), rtol=1e-12)


def _install_staging_counter():
    import xform.ir.builder as builder
    if not hasattr(builder, "stagings_seen"):
        builder.stagings_seen = [0]
        original = builder.GraphBuilder.__init__

        def counting_init(self, *args, **kwargs):
            builder.stagings_seen[0] += 1
            original(self, *args, **kwargs)
        builder.GraphBuilder.__init__ = counting_init
    return builder.stagings_seen[0]


def _stagings_and_kernels():
    import xform.ir.builder as builder
    from xform.runtime import dask_backend
    return builder.stagings_seen[0], len(dask_backend._loaded)


def _stage_something():
    xform.make_graph(np.sin)(1.0)
    return _stagings_and_kernels()[0]


def test_cluster_matches_numpy_and_workers_never_stage(client):
    assert set(client.run(_install_staging_counter).values()) == {0}
    check_against_numpy()
    counts = client.run(_stagings_and_kernels)
    assert len(counts) == 2
    assert all(stagings == 0 for stagings, _ in counts.values())
    assert sum(kernels for _, kernels in counts.values()) > 0  # the chunks ran there
    # the counter does see a staging on a worker
    assert all(n > 0 for n in client.run(_stage_something).values())


dies_once_p = xform.Primitive("test_dask_dies_once")


def _dies_once(x, *, marker):
    if not os.path.exists(marker):
        with open(marker, "w"):
            pass
        os.kill(os.getpid(), signal.SIGKILL)  # this worker process, mid-computation
    return x * 2.0


register(dies_once_p, impl=_dies_once, abstract_eval=lambda x, *, marker: x, elementwise=True)


def test_a_killed_worker_is_retried(client, tmp_path):
    marker = str(tmp_path / "killed-once")
    pids = set(client.run(os.getpid).values())
    doubled = xform.threaded_map(lambda x: dies_once_p.bind(x, marker=marker) + 1.0, X_DASK)
    np.testing.assert_array_equal(doubled.compute(), X_NP * 2.0 + 1.0)
    assert os.path.exists(marker)  # the first attempt did die
    assert set(client.run(os.getpid).values()) != pids  # and its worker was replaced


raises_p = xform.Primitive("test_dask_raises")


def _raises_on_negative(x):
    if np.any(x < 0):
        raise ValueError("a negative element")
    return np.sqrt(x)


register(raises_p, impl=_raises_on_negative,
         abstract_eval=elementwise_abstract_eval(np.sqrt), elementwise=True)


@pytest.mark.parametrize("where", ["threads", "cluster"])
def test_a_raising_chunk_names_the_line_and_block(where, request):
    if where == "cluster":
        request.getfixturevalue("client")
    values = np.abs(X_NP)
    values[300, 1] = -1.0  # in the third row block
    data = da.from_array(values, chunks=(130, D))
    out = np.full(values.shape, 7.0)
    with dask.config.set(scheduler="threads" if where == "threads" else dask.config.get(
            "scheduler")):
        with pytest.raises(xform.XformError, match=r"ValueError.*block \(2, 0\)") as err:
            xform.threaded_map(lambda x: raises_p.bind(x) * 2, data, out=out)  # line: f
    assert "line: f" in str(err.value)
    np.testing.assert_array_equal(out, 7.0)  # nothing written


def test_xform_imports_without_dask():
    code = "import sys, xform; assert not any(m.split('.')[0] in ('dask', 'distributed') " \
           "for m in sys.modules), sorted(m for m in sys.modules if 'dask' in m)"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())
