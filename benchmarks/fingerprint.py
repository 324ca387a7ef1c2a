r"""Behaviour fingerprint: the numbers a refactor must leave unchanged.

Records, for fixed seeds and data,

- the questions asked and the regret after every answer of
  :class:`~prefbo.loop.PreferentialOptimizer` for every model kind and every
  questioning strategy (a simulated probit person on Hartmann-3);
- the fitted hyperparameters, posterior means and covariances of the Laplace,
  EP, skew and variational models on one data set (BoTorch's fit on the
  Laplace and EP evidences);
- EUBO, BALD and the EUBO maximiser's output on the fitted Laplace model;

``python -m benchmarks fingerprint save FILE`` writes them to ``FILE`` (a
``torch.save`` dictionary); ``python -m benchmarks fingerprint compare FILE``
recomputes them and prints, per entry, whether it is bit-for-bit equal, equal
to rounding (``max |a - b| <= 1e-10 (1 + |a|)``) or different, and exits
non-zero if any entry differs or is missing. Run both on the same machine and
torch build: the loop's regret curves are compared to the bit.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable

import torch
from torch import Tensor

from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.test_functions import Hartmann3, SimulatedPerson

RUNS = (
    ("ep", "eubo", 2),
    ("laplace", "eubo", 2),
    ("laplace", "qeubo", 2),
    ("laplace", "bald", 2),
    ("laplace", "mes", 2),
    ("laplace", "ts", 2),
    ("laplace", "random", 2),
    ("skew", "eubo", 2),
    ("variational", "eubo", 2),
)
SEEDS = (0, 1)
ANSWERS = 10
RTOL = 1e-10


def loop_runs() -> dict[str, Tensor]:
    r"""Questions and regret curves of the loop, per model kind and strategy."""
    out = {}
    problem = Hartmann3()
    for model, strategy, q in RUNS:
        for seed in SEEDS:
            person = SimulatedPerson(problem, noise_std=0.1, seed=seed)
            options = {"num_samples": 64, "burnin": 20} if model == "skew" else None
            if model == "variational":
                options = {"fit": {"epochs": 40}}
            opt = PreferentialOptimizer(
                problem.bounds,
                model=model,
                strategy=strategy,
                q=q,
                seed=seed,
                refit_every=3,
                initial_random=2,
                acqf_options={"num_restarts": 2, "raw_samples": 32, "maxiter": 30},
                model_options=options,
            )
            questions, regret = [], []
            for _ in range(ANSWERS):
                X = opt.ask()
                questions.append(X.clone())
                opt.tell(person.compare(X[0], X[1]))
                x, _, _ = opt.best()
                regret.append(problem.optimal_value - problem(x).item())
            key = f"loop/{model}-{strategy}/seed{seed}"
            out[key + "/questions"] = torch.stack(questions)
            out[key + "/regret"] = torch.tensor(regret, dtype=torch.float64)
    return out


def _data(n: int = 30, m: int = 60, d: int = 3) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(7)
    X = torch.rand(n, d, generator=g, dtype=torch.float64)
    u = -((X - 0.4) ** 2).sum(-1)
    pairs = torch.randint(0, n, (m, 2), generator=g)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    noisy = u[pairs] + 0.05 * torch.randn(pairs.shape, generator=g, dtype=X.dtype)
    flip = noisy[:, 0] < noisy[:, 1]
    comps = torch.where(flip[:, None], pairs.flip(-1), pairs)
    return X, comps


def _state(model: torch.nn.Module, prefix: str, out: dict[str, Tensor]) -> None:
    for name, p in model.named_parameters():
        out[f"{prefix}/param/{name}"] = p.detach().clone()


def model_runs() -> dict[str, Tensor]:
    r"""Fitted models' hyperparameters and posteriors on one data set."""
    from botorch.fit import fit_gpytorch_mll

    import prefbo

    out: dict[str, Tensor] = {}
    X, comps = _data()
    Xt = torch.rand(12, 3, generator=torch.Generator().manual_seed(3), dtype=X.dtype)
    fitted = {}
    for name, cls, mll_cls in (
        ("laplace", prefbo.PairwiseLaplaceGP, prefbo.PairwiseLaplaceMLL),
        ("ep", prefbo.PairwiseEPGP, prefbo.PairwiseEPMLL),
    ):
        model = cls(X, comps)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(mll_cls(model.likelihood, model))
        model.eval()
        post = model.posterior(Xt)
        _state(model, name, out)
        out[f"{name}/mean"] = post.mean.detach().clone()
        out[f"{name}/covariance"] = post.covariance_matrix.detach().clone()
        fitted[name] = model
    torch.manual_seed(0)
    skew = prefbo.SkewGP(X, comps, num_samples=128, burnin=20, seed=0)
    post = skew.posterior(Xt)
    out["skew/mean"] = post.mean.detach().clone()
    out["skew/variance"] = post.variance.detach().clone()
    torch.manual_seed(0)
    from prefbo.data import PairwiseComparisons

    var = prefbo.VariationalPreferenceGP(PairwiseComparisons(X, comps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prefbo.fit_variational(var, epochs=30, seed=0)
    var.eval()
    post = var.posterior(Xt)
    _state(var, "variational", out)
    out["variational/mean"] = post.mean.detach().clone()
    out["variational/covariance"] = post.covariance_matrix.detach().clone()

    from prefbo.acquisition import FastAnalyticEUBO, PairwiseBALD, maximize_eubo

    lap = fitted["laplace"]
    pairs = torch.rand(8, 2, 3, generator=torch.Generator().manual_seed(5)).double()
    with torch.no_grad():
        out["acq/eubo"] = FastAnalyticEUBO(lap)(pairs).clone()
        out["acq/bald"] = PairwiseBALD(lap)(pairs).clone()
    bounds = torch.stack([torch.zeros(3), torch.ones(3)]).double()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = maximize_eubo(lap, bounds, seed=0, return_value=True)
    if isinstance(res, tuple):
        for i, r in enumerate(res):
            if isinstance(r, Tensor):
                out[f"acq/maximize_eubo/{i}"] = r.detach().clone()
    else:
        out["acq/maximize_eubo"] = res.detach().clone()
    return out


SECTIONS: dict[str, Callable[[], dict[str, Tensor]]] = {
    "models": model_runs,
    "loop": loop_runs,
}


def compute(sections: list[str]) -> dict[str, Tensor]:
    out = {}
    for s in sections:
        out.update(SECTIONS[s]())
    return out


def compare(old: dict[str, Tensor], new: dict[str, Tensor]) -> bool:
    ok = True
    for key in sorted(set(old) | set(new)):
        if key not in new or key not in old:
            print(f"MISSING  {key} ({'new' if key not in new else 'old'})")
            ok = False
            continue
        a, b = old[key], new[key]
        if a.shape != b.shape:
            print(f"DIFFER   {key}: shapes {tuple(a.shape)} vs {tuple(b.shape)}")
            ok = False
        elif torch.equal(a, b):
            print(f"BITWISE  {key}")
        else:
            diff = (a.double() - b.double()).abs()
            err = diff.max().item()
            tol = (RTOL * (1 + a.double().abs())).min().item()
            same = bool((diff <= RTOL * (1 + a.double().abs())).all())
            strict = key.startswith("loop/")
            if same and not strict:
                print(f"ROUNDING {key}: max |diff| {err:.2e}")
            else:
                print(f"DIFFER   {key}: max |diff| {err:.2e} (tol {tol:.1e})")
                ok = False
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("save", "compare"))
    p.add_argument("file")
    p.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS)
    args = p.parse_args(argv)
    new = compute(args.sections)
    if args.action == "save":
        torch.save(new, args.file)
        print(f"saved {len(new)} entries to {args.file}")
        return 0
    old = torch.load(args.file)
    in_loop = "loop" in args.sections
    in_models = "models" in args.sections
    old = {
        k: v
        for k, v in old.items()
        if (in_loop if k.startswith("loop/") else in_models)
    }
    return 0 if compare(old, new) else 1
