"""``benchmarks/inducing_bo.py``: problems, the anchored-CVR control, a tiny
resumable run and its report."""

from __future__ import annotations

import json
import math
import tempfile

import pytest
import torch

from benchmarks.harness import environment, stores
from prefbo.utils.threads import describe

TINY = (
    "--seeds 0-1 --rounds 2 --batch-size 5 --num-init 30 --inducing 8 "
    "--adam-steps 5 --raw-samples 16 --num-restarts 2 --ts-steps 3 "
    "--problems hartmann6 --methods cvr,cvr_anchored,ent_0.5,ent_0.002,gir"
).split()


def test_problems_are_negated_and_their_optima_attained(load_benchmark):
    bench = load_benchmark("inducing_bo")
    for name, dim in (("ackley5", 5), ("hartmann6", 6)):
        f, optimum, x_star = bench.make_problem(name)
        assert x_star.shape == (1, dim)
        assert float(f(x_star)) == pytest.approx(optimum, abs=1e-4)
        assert (f(torch.rand(200, dim, dtype=torch.float64)) <= optimum + 1e-9).all()
    assert bench.make_problem("ackley5")[1] == 0.0
    assert bench.make_problem("hartmann6")[1] == pytest.approx(3.32237, abs=1e-4)
    test = bench.test_set("ackley5")
    assert len(test["top"]) == int(0.05 * len(test["X"]))
    assert float(test["f"][test["top"]].min()) >= float(test["f"].quantile(0.94))


class _Mean:
    """A stand-in model whose posterior mean is a given function."""

    num_outputs = 1

    def __init__(self, fn):
        self.fn = fn

    def posterior(self, X):
        from types import SimpleNamespace

        return SimpleNamespace(mean=self.fn(X).unsqueeze(-1))


def _brute_force_cvr(K: torch.Tensor, chosen: list[int], m: int) -> list[int]:
    """Greedy maximal conditional variance from an explicit kernel matrix."""
    chosen = list(chosen)
    while len(chosen) < m:
        Kzz = K[chosen][:, chosen]
        Kxz = K[:, chosen]
        var = K.diag() - (Kxz @ torch.linalg.solve(Kzz, Kxz.T)).diag()
        var[chosen] = -math.inf
        chosen.append(int(var.argmax()))
    return chosen


def test_anchored_cvr_starts_at_the_best_mean_then_is_cvr(load_benchmark):
    bench = load_benchmark("inducing_bo")
    g = torch.Generator().manual_seed(3)
    X = torch.rand(40, 3, generator=g, dtype=torch.float64)
    kernel = bench._new_kernel(3)
    kernel.base_kernel.lengthscale = 0.3
    model = _Mean(lambda Z: -((Z - 0.7) ** 2).sum(-1))
    idx = bench.select("cvr_anchored", X, kernel, 10, model)[0].tolist()
    best = int(model.fn(X).argmax())
    assert idx[0] == best
    with torch.no_grad():
        K = kernel(X).to_dense()
    assert idx == _brute_force_cvr(K, [best], 10)
    # plain CVR starts at X[0]: every prior variance ties
    assert bench.select("cvr", X, kernel, 10, model)[0].tolist() == _brute_force_cvr(
        K, [0], 10
    )


def test_entropy_dpp_alpha_one_selects_cvr_and_reports_its_quality(load_benchmark):
    bench = load_benchmark("inducing_bo")
    X = torch.rand(
        30, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    kernel = bench._new_kernel(2)
    model = _Mean(lambda Z: Z.sum(-1))
    max_samples = torch.tensor([2.0, 2.5], dtype=torch.float64)
    from prefbo.inducing import EntropyDPP

    ent = EntropyDPP(model, alpha=1.0, max_samples=max_samples)
    cvr = bench.select("cvr", X, kernel, 6, model)[0]
    assert torch.equal(ent.select_indices(X, kernel, 6)[0], cvr)
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        bench.select("nope", X, kernel, 6, model)


def test_tiny_run_resumes_and_writes_its_report(load_benchmark, tmp_path):
    bench = load_benchmark("inducing_bo")
    paths = [
        "--store", str(tmp_path / "runs.jsonl"),
        "--output", str(tmp_path / "report.md"),
        "--plot", str(tmp_path / "plot.png"),
    ]  # fmt: skip
    bench.main(TINY + paths + ["--shard", "0/2"])
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    runs = [json.loads(x) for x in lines if '"kind": "run"' in x]
    assert len(runs) == 5  # every other of 2 seeds x 5 methods
    text = bench.main(TINY + paths)
    records = stores.read(tmp_path / "runs.jsonl")
    runs = [r for r in records if r["kind"] == "run"]
    assert len(runs) == 10 and len({(r["seed"], r["method"]) for r in runs}) == 10
    # every record says the thread settings it ran with, and so does the page
    assert {r["threads"] for r in records} == {describe()}
    assert f"the runs' threads: `{describe()}` (10 runs);" in text
    # and their machine and versions
    assert {r["machine"]["processor"] for r in runs} == {environment.machine()}
    assert "the runs' versions: python " in text and " (10 runs);" in text
    panels = [r for r in records if r["kind"] == "panel"]
    assert sorted((p["seed"], p["round"]) for p in panels) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    assert set(panels[0]["scores"]) == {
        "cvr", "cvr_anchored", "ent_0.5", "ent_0.002", "gir", "elbo_learned", "exact_gp"
    }  # fmt: skip
    by = {(r["seed"], r["method"]): r for r in runs}
    for run in runs:
        assert len(run["rounds"]) == 2
        for rec in run["rounds"]:
            assert 0 <= rec["diff_cvr"] <= 8 and 0 <= rec["diff_anchored"] <= 8
            assert math.isfinite(rec["rmse_top"]) and rec["regret"] >= 0
        if run["method"] == "cvr":
            assert all(rec["diff_cvr"] == 0 for rec in run["rounds"])
        if run["method"].startswith("ent_"):
            assert all(0 < rec["q_min"] <= 1 for rec in run["rounds"])
    # a run that picks CVR's points in CVR's order reproduces CVR's run (the
    # same random numbers); the same set in another order need not
    for s in (0, 1):
        for method in ("cvr_anchored", "ent_0.5", "gir"):
            rounds = by[(s, method)]["rounds"]
            assert all(
                rec["misplaced_cvr"] >= rec["diff_cvr"]
                and rec["misplaced_anchored"] >= rec["diff_anchored"]
                for rec in rounds
            )
            if rounds[0]["misplaced_cvr"] == 0:
                assert rounds[0]["regret"] == by[(s, "cvr")]["rounds"][0]["regret"]
    assert "| hartmann6 | 8 | CVR | 2 |" in text
    assert "ENT-DPP α=0.5 − CVR | 2 |" in text
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"
    # nothing is pending: a third call only rewrites the report
    n = len((tmp_path / "runs.jsonl").read_text().splitlines())
    bench.main(TINY + paths)
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == n


def test_only_the_published_setting_writes_into_the_results_directory(
    load_benchmark, tmp_path, monkeypatch
):
    bench = load_benchmark("inducing_bo")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    scratch = tmp_path / "prefbo-quick"
    published = bench.parse([])
    assert published.store == bench.RESULTS / "inducing_bo.jsonl"
    assert published.output == bench.RESULTS / "inducing_bo.md"
    assert published.plot == bench.RESULTS / "inducing_bo.png"
    assert bench.parse(["--report-only", "--shard", "1/2"]).store == published.store
    for argv in (["--quick"], ["--seeds", "0-1"], ["--adam-steps", "10"], TINY):
        args = bench.parse(argv)
        assert (args.store, args.output, args.plot) == (
            scratch / "inducing_bo.jsonl",
            scratch / "inducing_bo.md",
            scratch / "inducing_bo.png",
        ), argv
    # explicit paths are taken as given, whatever the setting
    args = bench.parse(["--quick", "--store", str(tmp_path / "s.jsonl")])
    assert args.store == tmp_path / "s.jsonl"
    assert args.output == scratch / "inducing_bo.md"


def test_cvr_is_prefbos_conditional_variance_reduction(load_benchmark):
    bench = load_benchmark("inducing_bo")
    from prefbo.inducing import ConditionalVarianceReduction

    X = torch.rand(
        60, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    kernel = bench._new_kernel(4)
    kernel.base_kernel.lengthscale = 0.4
    idx = bench.select("cvr", X, kernel, 12, None)[0]
    expected = ConditionalVarianceReduction().select_indices(X, kernel, 12)[0]
    assert torch.equal(idx, expected)
