import os
import threading

import pytest
import torch

from prefbo.utils import threads
from prefbo.utils.threads import limited, threads_for


@pytest.fixture
def policy(monkeypatch):
    r"""The policy as a user without thread settings meets it, on a
    machine with two threads that is not busy."""
    if threads._openmp() is None:
        pytest.skip("this torch has no OpenMP runtime to limit")
    for name in (*threads.USER_VARIABLES, "PREFBO_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(threads, "machine_busy", lambda: False)
    if torch.get_num_threads() < 2:
        pytest.skip("torch runs one thread here: nothing to limit")
    monkeypatch.setattr(threads, "IMPORT_THREADS", torch.get_num_threads())


def test_small_work_runs_on_one_thread_and_large_work_keeps_them(policy):
    before = torch.get_num_threads()
    with limited(threads.SMALL - 1):
        assert torch.get_num_threads() == 1
        with limited(10):  # nested: still one
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with limited(threads.SMALL):
        assert torch.get_num_threads() == before


def test_a_busy_machine_gets_one_thread_for_large_work(policy, monkeypatch):
    monkeypatch.setattr(threads, "machine_busy", lambda: True)
    assert threads_for(10 * threads.SMALL) == 1


@pytest.mark.parametrize("variable", ["OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_a_users_variable_wins(policy, monkeypatch, variable):
    monkeypatch.setenv(variable, "2")
    assert threads_for(10) is None


def test_variables_prefbo_set_for_its_own_process_keep_the_policy(policy, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads()))
    monkeypatch.setenv("PREFBO_THREADS", "auto")
    assert threads_for(10) == 1


def test_prefbo_threads_off_wins(policy, monkeypatch):
    monkeypatch.setenv("PREFBO_THREADS", "off")
    assert threads_for(10) is None


def test_a_users_set_num_threads_wins(policy, monkeypatch):
    monkeypatch.setattr(threads, "IMPORT_THREADS", torch.get_num_threads() + 1)
    with limited(10):
        assert torch.get_num_threads() != 1


def test_the_limit_is_the_calling_threads_only(policy):
    seen = {}
    inside, release = threading.Event(), threading.Event()

    def other():
        inside.wait(5)
        seen["other"] = torch.get_num_threads()
        release.set()

    worker = threading.Thread(target=other)
    worker.start()
    with limited(10):
        inside.set()
        release.wait(5)
        seen["caller"] = torch.get_num_threads()
    worker.join(5)
    assert seen == {"caller": 1, "other": torch.get_num_threads()}


def _problems(seed: int):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(64, 50, 50, generator=g, dtype=torch.float64)
    S = A @ A.mT + 50 * torch.eye(50, dtype=torch.float64)
    B = torch.randn(64, 50, 3, generator=g, dtype=torch.float64)
    return A, S, B


def _solves(A, S, B):
    LU, pivots = torch.linalg.lu_factor(A)
    return (
        torch.linalg.lu_solve(LU, pivots, B),
        torch.cholesky_solve(B, torch.linalg.cholesky(S)),
        torch.cholesky_inverse(torch.linalg.cholesky(S)),
    )


def test_batched_lu_and_cholesky_agree_across_limits_and_threads(policy):
    # the rule against torch.set_num_threads came from batched LU results
    # that changed mid-process: here the scoped limit is switched on and off
    # 40 times, from four threads at once, and every batched LU, Cholesky
    # and inverse is checked against a solve of the same problem before
    problems = [_problems(seed) for seed in range(4)]
    reference = [_solves(*p) for p in problems]
    A, S, B = problems[0]  # the reference solves what it should
    assert torch.allclose(A @ reference[0][0], B, atol=1e-9)
    assert torch.allclose(S @ reference[0][1], B, atol=1e-9)
    failures = []

    def run(k: int) -> None:
        for i in range(40):
            p = problems[(k + i) % 4]
            want = reference[(k + i) % 4]
            with limited(10) if (i + k) % 2 else limited(threads.SMALL):
                got = _solves(*p)
            for g, w in zip(got, want, strict=True):
                if not torch.allclose(g, w, rtol=1e-10, atol=1e-12):
                    failures.append((k, i, float((g - w).abs().max())))

    workers = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert failures == []


def test_describe_names_every_setting(monkeypatch):
    for name in (*threads.USER_VARIABLES, "PREFBO_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(threads, "IMPORT_THREADS", torch.get_num_threads())
    text = threads.describe()
    assert text.startswith(f"torch threads {torch.get_num_threads()}; ")
    assert "OMP_NUM_THREADS unset, MKL_NUM_THREADS unset, PREFBO_THREADS unset" in text
    assert "policy on" in text and "usable cores" in text
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert "OMP_NUM_THREADS=1" in threads.describe()
    assert "policy off (the user's setting)" in threads.describe()


def test_numpys_blas_runs_one_thread_while_any_small_work_runs(policy):
    if threads._blas() is None:
        pytest.skip("no BLAS library outside torch to limit")

    def blas_threads():
        return [c.num_threads for c in threads._blas().lib_controllers]

    before = blas_threads()
    inside, release = threading.Event(), threading.Event()

    def other():
        with limited(10):
            inside.set()
            release.wait(5)

    worker = threading.Thread(target=other)
    worker.start()
    inside.wait(5)
    with limited(10):
        assert set(blas_threads()) == {1}
    assert set(blas_threads()) == {1}  # the other thread is still inside
    release.set()
    worker.join(5)
    assert blas_threads() == before  # the last one out restored it


def test_a_busy_machine_is_read_from_other_processes_threads(monkeypatch):
    monkeypatch.setattr(threads, "_busy", [-float("inf"), False])
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    monkeypatch.setattr(threads, "others_running", lambda: 2)
    assert threads.machine_busy() is False  # two cores free
    monkeypatch.setattr(threads, "others_running", lambda: 3)
    assert threads.machine_busy() is False  # the reading is reused a while
    monkeypatch.setattr(threads, "_busy", [-float("inf"), False])
    assert threads.machine_busy() is True


def test_other_processes_threads_are_counted_without_ours():
    others = threads.others_running()
    if others is None:
        pytest.skip("this platform does not count runnable threads")
    assert others >= 0


def test_child_threads_share_the_cores_unless_the_user_chose(monkeypatch):
    child_threads = threads.child_threads
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PREFBO_THREADS"):
        monkeypatch.delenv(name, raising=False)
    assert [child_threads(k) for k in (1, 3, 8, 20)] == [8, 2, 1, 1]
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    assert child_threads(2) is None
    monkeypatch.delenv("MKL_NUM_THREADS")
    monkeypatch.setenv("PREFBO_THREADS", "off")
    assert child_threads(2) is None


def test_children_get_their_threads_in_the_environment_for_the_block(monkeypatch):
    children_with_threads = threads.children_with_threads
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("PREFBO_THREADS", "mine")
    count = torch.get_num_threads()
    with children_with_threads(3):
        assert os.environ["OMP_NUM_THREADS"] == "3"
        assert os.environ["PREFBO_THREADS"] == "auto"
    assert "OMP_NUM_THREADS" not in os.environ
    assert os.environ["PREFBO_THREADS"] == "mine"  # restored
    assert torch.get_num_threads() == count  # this process's own count
    with children_with_threads(None):
        assert "OMP_NUM_THREADS" not in os.environ
