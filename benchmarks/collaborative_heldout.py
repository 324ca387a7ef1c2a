r"""Held-out people: how well each model predicts a new person's answers.

Protocol (every seed is a constant of this script, fixed before any run):

- **Data sets.**
  - ``game``: ``Game.csv``'s 91 students ranking 6 platforms
    (:func:`prefbo.datasets.population.game_rankings`: one-hot items, all 15
    pairs per student, 8 person features: ownership bits, standardised age
    and hours). The students are split into :data:`GAME_FOLDS` folds by a
    permutation of seed :data:`SPLIT_SEED`; each fold is held out once, the
    other four train, so all 91 are held out once.
  - ``synthetic``: :func:`prefbo.datasets.population.planted_population` at
    its defaults with ``num_people = 360`` and seed :data:`SYNTHETIC_SEED`;
    people ``0 … 299`` train, ``300 … 359`` are held out (one fold). People
    are independent given the planted world, so a split is a fresh sample
    of the same world (a second seed would draw another world).
  - ``pool``: the same with :data:`POOL_ITEMS` items, each with an effect
    of its own (``item_effect_scale =`` :data:`POOL_ITEM_EFFECT`, the shared
    utility's sd) that its design does not explain, and seed
    :data:`POOL_SEED`: a pool of items like real ones, whose features miss
    some of their appeal.
  - ``ranked``: :func:`prefbo.datasets.population.planted_rankings`: each
    person ranks :data:`RANKED_PER_PERSON` of :data:`RANKED_ITEMS` items
    (all 45 pairs of their ranking, consistent), the items with own effects
    as the pool's, seed :data:`RANKED_SEED`; :data:`RANKED_TRAIN` people
    train and :data:`RANKED_HELD` are held out: the shape of a survey where
    each respondent orders a few of a large pool's items.
- **A held-out person and k.** For each ``k`` in ``--ks`` (0, 3, 5, 10),
  ``k`` of the person's answers are revealed: the first ``k`` of a random
  order of their answers from a generator seeded :func:`reveal_seed`
  ``(person)``, so the revealed sets are nested in ``k``. The model predicts
  the rest: accuracy is the share of those answers whose winner has the
  higher posterior mean utility for that person, a tie counting ½. On the
  planted worlds (``synthetic``, ``pool``, ``ranked``) the same test pairs
  are also scored against the person's true utility (``accuracy_true``: the
  answers' own noise taken out).
- **Models.** Each is a function ``fit(fold) -> predict`` with
  ``predict(features, revealed) -> n utilities``: ``fit`` sees the fold's
  designs, its training people's answers and features (once per fold, so
  shared parts stay fixed), ``predict`` a held-out person's features and
  ``k x 2`` revealed answers (winner row, loser row).
  - ``per_person``: a :class:`~prefbo.PairwiseLaplaceGP` on the person's
    ``k`` answers alone, hyperparameters fitted on them
    (``fit_gpytorch_mll`` on :class:`~prefbo.PairwiseLaplaceMLL`); ``k = 0``
    gives all utilities 0 (accuracy ½).
  - ``pooled``: one ``PairwiseLaplaceGP`` on every training answer, people
    ignored, fitted once per fold; the revealed answers are then added to
    the training answers and the posterior recomputed with the fitted
    hyperparameters (conditioned, not refitted).
  - ``population``: the exact population model
    (:func:`prefbo.models.population.population_model`, Laplace), fitted
    once per fold on the training people; the revealed answers join as a
    new participant and the posterior is recomputed with the fitted
    hyperparameters. Its cost grows as the cube of its latent values (one
    per person and item that person compared), so it gets the first
    training people up to ``--population-max-latents`` of them: all of
    Game's, about 40 of the planted worlds' 300 (stated on the page).
  - ``collaborative``: :class:`prefbo.models.collaborative.CollaborativePreferenceGP`
    with ``--tastes`` tastes, fitted (``fit(seed=FIT_SEED)``) once per fold
    on the training people with their features; each held-out person is
    added (``add_person(features=u)``) and their revealed answers observed
    online (the shared part stays fixed), each person's posterior by EP
    (the model's default), and item effects as the model's default has them
    (on the pool, whose 100 items outnumber the 64 inducing points; not on
    Game or the synthetic world); ``collaborative_laplace`` the same with
    Laplace posteriors (modes); ``collaborative_items`` and
    ``collaborative_no_items`` the same with an effect of its own for each
    item (``item_effects=True``) and without (``item_effects=False``).
  - ``features_only``: the person features alone (:func:`fit_features_only`).
  - ``ranking_prior`` (data sets of at most
    :data:`~benchmarks.harness.ranking_prior.MAX_ITEMS` items: Game): the
    training people's rankings as a prior over the person's ranking, by
    Bayes' rule (:mod:`benchmarks.harness.ranking_prior`), its spread chosen
    once per fold by leave-one-out over the training people, pooled over
    the run's ``k`` above 0.
- **Open pairs.** A test pair whose order follows from the revealed answers
  by transitivity is *closed*: on consistent rankings the per-person model
  already gets it right. ``accuracy_open`` scores the open pairs alone
  (:func:`open_pairs`), where the models can differ.
- **Report.** Per data set and ``k``: each model's mean accuracy ± s.e.
  over held-out people; the paired difference collaborative − other
  (mean ± s.e., two-sided Wilcoxon signed-rank p over people, zero
  differences dropped); each model's fit and prediction times.

Torch's global seed is set to :data:`FIT_SEED` before every fit. Every
held-out person × ``k`` × model appends one JSON record to ``--store`` (with
one record per fit and one per invocation: command, threads, machine), so
``--report`` writes the page from the store alone (a later record of the
same person, ``k`` and model replaces an earlier one; do not mix ``--quick``
and full runs in one store). A run made to another store and then copied
to the one a page is written from is shown with its options as recorded,
the copy, and the commands that make it in place and write the page again.

Usage::

    python -m benchmarks collaborative_heldout --store runs.jsonl
    python -m benchmarks collaborative_heldout --report --store runs.jsonl
    python -m benchmarks collaborative_heldout --models per_person pooled \
        --datasets game --output /tmp/page.md     # the baselines only
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from botorch.fit import fit_gpytorch_mll
from scipy.stats import wilcoxon
from torch import Tensor

from benchmarks.harness import environment, reports, stores
from benchmarks.harness.ranking_prior import MAX_ITEMS, RankingPrior, choose_theta
from benchmarks.harness.runner import REPO
from prefbo import PairwiseLaplaceGP, PairwiseLaplaceMLL
from prefbo.datasets import (
    Population,
    game_rankings,
    planted_population,
    planted_rankings,
)
from prefbo.models.population import population_model, utility_posterior

RESULTS = Path(__file__).resolve().parent / "results"
#: The script's name in the suite (``python -m benchmarks NAME``).
NAME = "collaborative_heldout"
#: The page written where ``--output`` is not given.
PAGE = RESULTS / f"{NAME}.md"
#: The versions a run records (after the machine, in its ``machine`` text).
VERSIONED = ("torch", "botorch", "gpytorch", "scipy")
DATASETS = ("game", "synthetic", "pool", "ranked")
KS = (0, 3, 5, 10)
REFERENCE = "collaborative"

#: Game: the permutation of the students into folds.
SPLIT_SEED = 0
GAME_FOLDS = 5
#: Synthetic: the planted world and its people.
SYNTHETIC_SEED = 0
SYNTHETIC_TRAIN, SYNTHETIC_HELD = 300, 60
#: Pool: a planted world of 100 items, each with an own effect of sd 1 (the
#: shared utility's), its people split as the synthetic world's.
POOL_SEED = 10
POOL_ITEMS = 100
POOL_ITEM_EFFECT = 1.0
#: Ranked: a planted world where each person ranks 10 of 100 items with own
#: effects (sd 1, as the pool's); 200 people train, 50 are held out.
RANKED_SEED = 20
RANKED_ITEMS, RANKED_PER_PERSON = 100, 10
RANKED_TRAIN, RANKED_HELD = 200, 50
#: Which answers of a held-out person are revealed (see :func:`reveal_seed`).
REVEAL_SEED = 1
#: Torch's global seed before every fit; the collaborative model's fit seed.
FIT_SEED = 0
#: The population model's latent values at most (its training people: the
#: first ones whose compared items add up to at most this many).
POPULATION_MAX_LATENTS = 1200
#: The collaborative model's number of tastes: the model's default, not the
#: synthetic world's planted 2 (unused tastes shrink away).
TASTES = 3
#: The ridge penalty of the features-only reference (fixed before its run).
FEATURES_RIDGE = 1.0
#: A held-out person's id in the population model (no training person's).
NEW = 1_000_000

Predict = Callable[[Tensor, Tensor], Tensor]


def reveal_seed(person: int) -> int:
    r"""The seed of the order in which ``person``'s answers are revealed."""
    return REVEAL_SEED * 1_000_003 + person


@dataclass(frozen=True)
class HeldOut:
    r"""A held-out person: their id in the data set, ``e`` features, ``m_p x 2``
    answers (winner row, loser row) and, in a planted world, ``n`` true
    utilities."""

    person: int
    features: Tensor
    answers: Tensor
    utilities: Tensor | None


@dataclass(frozen=True)
class Fold:
    r"""One split: ``n x d`` designs, the training people's ``m x 3`` answers
    (renumbered ``0 … P - 1``) and ``P x e`` features, and the held-out
    people."""

    dataset: str
    index: int
    designs: Tensor
    answers: Tensor
    features: Tensor
    held: tuple[HeldOut, ...]

    @property
    def num_people(self) -> int:
        r"""The number of training people ``P``."""
        return self.features.shape[0]


def split(
    pop: Population, dataset: str, index: int, train: list[int], held: list[int]
) -> Fold:
    r"""The fold of ``pop`` whose training people are ``train`` (renumbered
    in that order) and whose held-out people are ``held``."""
    new_id = torch.full((pop.num_people,), -1, dtype=torch.long)
    new_id[torch.tensor(train)] = torch.arange(len(train))
    person = pop.answers[:, 0]
    keep = new_id[person] >= 0
    answers = torch.cat([new_id[person[keep]].unsqueeze(-1), pop.answers[keep, 1:]], -1)
    truth = getattr(pop, "utilities", None)
    people = tuple(
        HeldOut(
            person=p,
            features=pop.person_features[p],
            answers=pop.answers[person == p, 1:],
            utilities=None if truth is None else truth[p],
        )
        for p in held
    )
    return Fold(
        dataset, index, pop.designs, answers, pop.person_features[train], people
    )


def game_folds(quick: bool = False) -> list[Fold]:
    r"""Game's :data:`GAME_FOLDS` folds (``quick``: the first, 12 training and
    3 held-out students)."""
    pop = game_rankings()
    order = torch.randperm(
        pop.num_people, generator=torch.Generator().manual_seed(SPLIT_SEED)
    )
    parts = [c.tolist() for c in order.chunk(GAME_FOLDS)]
    folds = []
    for f in range(1 if quick else GAME_FOLDS):
        train = [p for g, part in enumerate(parts) if g != f for p in part]
        held = parts[f]
        if quick:
            train, held = train[:12], held[:3]
        folds.append(split(pop, "game", f, train, held))
    return folds


def synthetic_folds(quick: bool = False) -> list[Fold]:
    r"""The synthetic split (``quick``: 20 training and 4 held-out people
    over 12 items)."""
    train, held = (20, 4) if quick else (SYNTHETIC_TRAIN, SYNTHETIC_HELD)
    sizes = {"num_items": 12} if quick else {}
    pop = planted_population(num_people=train + held, seed=SYNTHETIC_SEED, **sizes)
    people = list(range(train + held))
    return [split(pop, "synthetic", 0, people[:train], people[train:])]


def pool_folds(quick: bool = False) -> list[Fold]:
    r"""The pool split: items with an effect of their own (``quick``: 20
    training and 4 held-out people over 12 items)."""
    train, held = (20, 4) if quick else (SYNTHETIC_TRAIN, SYNTHETIC_HELD)
    pop = planted_population(
        num_people=train + held,
        num_items=12 if quick else POOL_ITEMS,
        item_effect_scale=POOL_ITEM_EFFECT,
        seed=POOL_SEED,
    )
    people = list(range(train + held))
    return [split(pop, "pool", 0, people[:train], people[train:])]


def ranked_folds(quick: bool = False) -> list[Fold]:
    r"""The ranked split: each person orders a few items of a pool (``quick``:
    20 training and 4 held-out people ranking 6 of 12 items)."""
    train, held = (20, 4) if quick else (RANKED_TRAIN, RANKED_HELD)
    pop = planted_rankings(
        num_people=train + held,
        num_items=12 if quick else RANKED_ITEMS,
        items_per_person=6 if quick else RANKED_PER_PERSON,
        item_effect_scale=POOL_ITEM_EFFECT,
        seed=RANKED_SEED,
    )
    people = list(range(train + held))
    return [split(pop, "ranked", 0, people[:train], people[train:])]


# ------------------------------------------------------------------ models


def fit(model: Any) -> tuple[Any, int]:
    r"""``model`` fitted on its Laplace evidence from torch seed
    :data:`FIT_SEED`, in eval mode, and the number of warnings the fit gave
    (L-BFGS stopping early on a few answers; counted, not shown)."""
    torch.manual_seed(FIT_SEED)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_gpytorch_mll(PairwiseLaplaceMLL(model.likelihood, model))
    return model.eval(), len(caught)


def person_data(designs: Tensor, answers: Tensor) -> tuple[Tensor, Tensor]:
    r"""A person's ``k x 2`` answers (rows of ``designs``) as their compared
    designs and comparisons into them."""
    items, inverse = answers.unique(return_inverse=True)
    return designs[items], inverse  # k' x d, k x 2


def fit_per_person(fold: Fold, options: argparse.Namespace) -> tuple[Predict, dict]:
    r"""A Laplace GP of the person's own answers, fitted on them alone."""
    designs = fold.designs

    def predict(features: Tensor, revealed: Tensor) -> Tensor:
        if len(revealed) == 0:  # the prior: every item equally good
            return torch.zeros(len(designs), dtype=designs.dtype)
        model, _ = fit(PairwiseLaplaceGP(*person_data(designs, revealed)))
        with torch.no_grad():
            return model.posterior(designs).mean.reshape(-1)

    return predict, {}


def fit_pooled(fold: Fold, options: argparse.Namespace) -> tuple[Predict, dict]:
    r"""One Laplace GP of every training answer; a held-out person's answers
    are added with the fitted hyperparameters."""
    designs, train = fold.designs, fold.answers[:, 1:]
    fitted, caught = fit(PairwiseLaplaceGP(designs, train))
    with torch.no_grad():
        prior_mean = fitted.posterior(designs).mean.reshape(-1)

    def predict(features: Tensor, revealed: Tensor) -> Tensor:
        if len(revealed) == 0:
            return prior_mean
        model = PairwiseLaplaceGP(
            designs,
            torch.cat([train, revealed]),
            likelihood=fitted.likelihood,
            covar_module=fitted.covar_module,
        ).eval()
        with torch.no_grad():
            return model.posterior(designs).mean.reshape(-1)

    return predict, {"fit_warnings": caught}


def fit_population(fold: Fold, options: argparse.Namespace) -> tuple[Predict, dict]:
    r"""The exact population model of the first training people up to
    ``options.population_max_latents`` latent values; a held-out person's
    answers join as a new participant with the fitted hyperparameters."""
    designs, data, latents = fold.designs, {}, 0
    for p in range(fold.num_people):
        X, comps = person_data(designs, fold.answers[fold.answers[:, 0] == p, 1:])
        if latents + len(X) > options.population_max_latents:
            break
        data[p], latents = (X, comps), latents + len(X)
    fitted, caught = fit(population_model(data, model="laplace"))

    def predict(features: Tensor, revealed: Tensor) -> Tensor:
        model = fitted
        if len(revealed):
            model = population_model(
                {**data, NEW: person_data(designs, revealed)},
                model="laplace",
                covar_module=fitted.covar_module,
                likelihood=fitted.likelihood,
            ).eval()
        with torch.no_grad():
            return utility_posterior(model, designs, NEW).mean.reshape(-1)

    note = {"train_people": len(data), "latents": latents, "fit_warnings": caught}
    return predict, note


def fit_collaborative(
    fold: Fold,
    options: argparse.Namespace,
    people_inference: str = "auto",
    item_effects: bool | None = None,
) -> tuple[Predict, dict]:
    r"""The collaborative model of the training people; each held-out person
    is added and observed online (people's posteriors by
    ``people_inference``: the model's default, EP for its probit)."""
    from prefbo.models.collaborative import CollaborativePreferenceGP

    model = CollaborativePreferenceGP(
        fold.designs,
        fold.answers,
        num_people=fold.num_people,
        person_features=fold.features,
        num_tastes=options.tastes,
        people_inference=people_inference,
        item_effects=item_effects,
    )
    model.fit(seed=FIT_SEED)

    def predict(features: Tensor, revealed: Tensor) -> Tensor:
        pid = model.add_person(features=features)
        if len(revealed):
            model.observe(pid, revealed[:, 0], revealed[:, 1])
        with torch.no_grad():
            return model.utility_mean(pid).reshape(-1)

    note = {"tastes": options.tastes, "people": model.people_inference}
    return predict, {**note, "items": model.num_items}


def fit_collaborative_laplace(
    fold: Fold, options: argparse.Namespace
) -> tuple[Predict, dict]:
    r"""As :func:`fit_collaborative` with Laplace posteriors for the people
    (their modes), to show what EP's means add."""
    return fit_collaborative(fold, options, people_inference="laplace")


def fit_collaborative_items(
    fold: Fold, options: argparse.Namespace
) -> tuple[Predict, dict]:
    r"""As :func:`fit_collaborative` with an effect of its own for each item
    (``item_effects=True``) whatever the default."""
    return fit_collaborative(fold, options, item_effects=True)


def fit_collaborative_no_items(
    fold: Fold, options: argparse.Namespace
) -> tuple[Predict, dict]:
    r"""As :func:`fit_collaborative` without the items' own effects
    (``item_effects=False``) whatever the default."""
    return fit_collaborative(fold, options, item_effects=False)


def fit_features_only(fold: Fold, options: argparse.Namespace) -> tuple[Predict, dict]:
    r"""What the person features alone tell: each item's utility linear in
    them, ``f_p(i) = a_i + c_i^T u_p``, by ridge least squares
    (:data:`FEATURES_RIDGE`) on the training answers' differences set to 1;
    the revealed answers are ignored (the ceiling of features at ``k = 0``)."""
    n, (e,) = fold.designs.shape[0], fold.features.shape[1:]
    person, winners, losers = fold.answers.unbind(-1)
    step = torch.zeros(len(person), n, dtype=fold.features.dtype)
    rows = torch.arange(len(person))
    step[rows, winners], step[rows, losers] = 1.0, -1.0
    u = torch.cat([torch.ones(fold.num_people, 1), fold.features], -1)
    X = (step.unsqueeze(-1) * u[person].unsqueeze(1)).reshape(len(person), -1)
    gram = X.T @ X + FEATURES_RIDGE * torch.eye(X.shape[1], dtype=X.dtype)
    coef = torch.linalg.solve(gram, X.sum(0)).reshape(n, e + 1)

    def predict(features: Tensor, revealed: Tensor) -> Tensor:
        return coef @ torch.cat([torch.ones(1), features])

    return predict, {}


def fit_ranking_prior(fold: Fold, options: argparse.Namespace) -> tuple[Predict, dict]:
    r"""Bayes' rule with the training people's rankings as the prior
    (:mod:`benchmarks.harness.ranking_prior`), its spread chosen by
    leave-one-out over the training people at ``options.ks``."""
    n = fold.designs.shape[0]
    person = fold.answers[:, 0]
    people = [fold.answers[person == q, 1:] for q in range(fold.num_people)]
    order = [
        torch.randperm(len(a), generator=torch.Generator().manual_seed(reveal_seed(q)))
        for q, a in enumerate(people)
    ]
    theta = choose_theta(n, people, options.ks, order)
    prior = RankingPrior(n, people, theta)

    def predict(features: Tensor, revealed: Tensor) -> Tensor:
        return prior.utility(revealed)

    return predict, {"theta": theta}


def applies(name: str, fold: Fold) -> bool:
    r"""Whether model ``name`` is run on ``fold`` (the ranking prior
    enumerates every ranking: at most
    :data:`~benchmarks.harness.ranking_prior.MAX_ITEMS` items)."""
    return name != "ranking_prior" or fold.designs.shape[0] <= MAX_ITEMS


MODELS: dict[str, Callable[[Fold, argparse.Namespace], tuple[Predict, dict]]] = {
    "per_person": fit_per_person,
    "pooled": fit_pooled,
    "population": fit_population,
    "collaborative": fit_collaborative,
    "collaborative_laplace": fit_collaborative_laplace,
    "collaborative_items": fit_collaborative_items,
    "collaborative_no_items": fit_collaborative_no_items,
    "features_only": fit_features_only,
    "ranking_prior": fit_ranking_prior,
}


def collaborative_available() -> bool:
    r"""Whether :mod:`prefbo.models.collaborative` can be imported."""
    try:
        import prefbo.models.collaborative  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------- runs


def accuracy(mean: Tensor, answers: Tensor) -> float:
    r"""The share of ``m x 2`` answers (winner, loser) whose winner has the
    higher ``mean``; a tie counts ½."""
    gap = mean[answers[:, 0]] - mean[answers[:, 1]]
    return float(torch.where(gap == 0, 0.5, (gap > 0).double()).mean())


def open_pairs(revealed: Tensor, tested: Tensor, n: int) -> Tensor:
    r"""Which ``m x 2`` ``tested`` pairs the ``k x 2`` ``revealed`` answers
    leave open: neither order follows from them by transitivity (``a ≻ b``
    and ``b ≻ c`` give ``a ≻ c``). A closed pair is one a person-by-person
    model already gets right from the revealed answers alone (on consistent
    rankings), so it cannot tell models apart."""
    reach = torch.zeros(n, n, dtype=torch.bool)
    reach[revealed[:, 0], revealed[:, 1]] = True
    for via in range(n):  # Warshall's transitive closure
        reach |= reach[:, via : via + 1] & reach[via : via + 1, :]
    w, l = tested.unbind(-1)
    return ~(reach[w, l] | reach[l, w])


def true_answers(utilities: Tensor, answers: Tensor) -> Tensor:
    r"""The ``m x 2`` pairs of ``answers`` ordered by the true ``utilities``."""
    swap = utilities[answers[:, 0]] < utilities[answers[:, 1]]
    return torch.where(swap.unsqueeze(-1), answers.flip(-1), answers)


def run_fold(
    fold: Fold, name: str, options: argparse.Namespace, emit: Callable[[dict], None]
) -> None:
    r"""Fit model ``name`` on ``fold`` and predict each held-out person at each
    ``k``, emitting one record per fit and per person × ``k``."""
    key = {"dataset": fold.dataset, "fold": fold.index, "model": name}
    t0 = time.perf_counter()
    predict, note = MODELS[name](fold, options)
    emit({"kind": "fit", **key, "seconds": time.perf_counter() - t0, **note})
    for person in fold.held:
        order = torch.randperm(
            len(person.answers),
            generator=torch.Generator().manual_seed(reveal_seed(person.person)),
        )
        for k in options.ks:
            if k >= len(person.answers):
                continue  # nothing left to predict
            revealed, rest = person.answers[order[:k]], person.answers[order[k:]]
            t0 = time.perf_counter()
            mean = predict(person.features, revealed)
            seconds = time.perf_counter() - t0
            rec = {"kind": "person", **key, "person": person.person, "k": k}
            rec |= {"accuracy": accuracy(mean, rest), "tested": len(rest)}
            left = open_pairs(revealed, rest, fold.designs.shape[0])
            if bool(left.any()):
                rec |= {"accuracy_open": accuracy(mean, rest[left])}
                rec |= {"tested_open": int(left.sum())}
            if person.utilities is not None:
                truth = true_answers(person.utilities, rest)
                rec["accuracy_true"] = accuracy(mean, truth)
            emit(rec | {"seconds": seconds})


def measure(options: argparse.Namespace) -> list[dict]:
    r"""Run every data set, fold and model; the records, each also appended to
    ``options.store`` where given."""
    records: list[dict] = []

    def emit(rec: dict) -> None:
        records.append(rec)
        if options.store is not None:
            stores.append(options.store, rec)

    start, load = time.perf_counter(), environment.load_average()
    makers = {
        "game": game_folds,
        "synthetic": synthetic_folds,
        "pool": pool_folds,
        "ranked": ranked_folds,
    }
    for dataset in options.datasets:
        for fold in makers[dataset](options.quick):
            for name in options.models:
                if not applies(name, fold):
                    print(f"{dataset}: {name} left out ({fold.designs.shape[0]} items)")
                    continue
                run_fold(fold, name, options, emit)
                done = [
                    r["accuracy"]
                    for r in records
                    if r["kind"] == "person"
                    and (r["dataset"], r["fold"], r["model"])
                    == (dataset, fold.index, name)
                ]
                print(
                    f"{dataset} fold {fold.index} {name}: mean accuracy "
                    f"{sum(done) / max(len(done), 1):.3f} over {len(done)} person-k "
                    f"({time.perf_counter() - start:.0f} s so far)",
                    flush=True,
                )
    settings = {
        "ks": list(options.ks),
        "models": list(options.models),
        "datasets": list(options.datasets),
        "quick": options.quick,
        "population_max_latents": options.population_max_latents,
        "tastes": options.tastes,
    }
    emit(
        {
            "kind": "run",
            "argv": options.argv,
            "threads": environment.threads(),
            "machine": environment.machine_and_versions(VERSIONED),
            "load": [load, environment.load_average()],
            "seconds": time.perf_counter() - start,
            "settings": settings,
        }
    )
    return records


def main(argv: list[str] | None = None) -> str:
    r"""Run (or, with ``--report``, read the store) and write the page."""
    options = parse_args(argv)
    if options.report:
        records = stores.read(options.store)
    else:
        if REFERENCE in options.models and not collaborative_available():
            sys.exit(
                "prefbo.models.collaborative cannot be imported; leave it out "
                "(--models per_person pooled population)."
            )
        records = measure(options)
    text = page(records, options.store, options.output)
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(text)
    print(f"wrote {options.output}")
    return text


# ------------------------------------------------------------------ report

#: The protocol as the page states it.
PROTOCOL = (
    f"- Game: 91 students, {GAME_FOLDS} folds (a permutation of seed "
    f"{SPLIT_SEED}); each student held out once, the other folds train. "
    "Items one-hot; person features: 6 ownership bits, standardised age and "
    "hours.",
    f"- Synthetic: `planted_population(num_people={SYNTHETIC_TRAIN + SYNTHETIC_HELD},"
    f" seed={SYNTHETIC_SEED})` at its other defaults; people 0 to "
    f"{SYNTHETIC_TRAIN - 1} train, the last {SYNTHETIC_HELD} are held out. "
    "`accuracy_true` scores the same test pairs against the true utility.",
    "- Pool: as Synthetic with "
    f"`num_items={POOL_ITEMS}, item_effect_scale={POOL_ITEM_EFFECT}, "
    f"seed={POOL_SEED}`: each item has an effect of its own (sd "
    f"{POOL_ITEM_EFFECT}, the shared utility's) that its design does not explain.",
    f"- Ranked: `planted_rankings(num_people={RANKED_TRAIN + RANKED_HELD}, "
    f"num_items={RANKED_ITEMS}, items_per_person={RANKED_PER_PERSON}, "
    f"item_effect_scale={POOL_ITEM_EFFECT}, seed={RANKED_SEED})`: each person "
    f"ranks {RANKED_PER_PERSON} of the {RANKED_ITEMS} items (all "
    f"{RANKED_PER_PERSON * (RANKED_PER_PERSON - 1) // 2} pairs of their ranking); "
    f"people 0 to {RANKED_TRAIN - 1} train, the last {RANKED_HELD} are held out.",
    f"- Revealed answers: the first `k` of a random order of the person's "
    f"answers (generator seed `{REVEAL_SEED} * 1000003 + person`), nested in "
    "`k`; the rest are predicted.",
    "- per_person: a PairwiseLaplaceGP on the `k` revealed answers alone, "
    "hyperparameters fitted on them; `k = 0` is all ties (½).",
    "- pooled: one PairwiseLaplaceGP on every training answer, fitted once per "
    "fold; the revealed answers are added and the posterior recomputed with "
    "the fitted hyperparameters (conditioned, not refitted).",
    '- population: `population_model(..., model="laplace")` fitted once per fold '
    "on the first training people up to the latent limit (see Notes); the "
    "revealed answers join as a new participant, posterior recomputed with the "
    "fitted hyperparameters (conditioned, not refitted).",
    "- collaborative: `CollaborativePreferenceGP` fitted once per fold "
    f"(`fit(seed={FIT_SEED})`) on the training people and their features; each "
    "held-out person added with their features and the revealed answers "
    "observed online, the shared part fixed; people's posteriors by EP (the "
    "model's default for the probit); item effects where the model's default "
    "has them: on the pool (more items than the 64 inducing points, each "
    "compared over and over), not on Game or the synthetic world.",
    "- collaborative_laplace: the same with Laplace posteriors (the modes) "
    "for the people instead of EP's means.",
    "- collaborative_items, collaborative_no_items: the collaborative model "
    "with an effect of its own for each item (`item_effects=True`) and without "
    "(`item_effects=False`), whatever the default.",
    "- Open pairs: a person's test pairs whose order does not follow from "
    "their revealed answers by transitivity; `accuracy_open` scores those "
    "alone.",
    "- features_only: each item's utility linear in the person's features "
    "(an intercept and a coefficient per feature and item), ridge least "
    f"squares (penalty {FEATURES_RIDGE}) on the training answers; the revealed "
    "answers are ignored. Its `k = 0` column is what the person features "
    "alone can tell about a newcomer.",
    "- ranking_prior (Game only: it enumerates the 720 rankings of 6 items): "
    "Bayes' rule with the training students' rankings as the prior, a "
    "mixture of Mallows models exp(-θ d) centred on them (d: the answers a "
    "ranking reverses); the revealed answers keep the rankings they agree "
    "with, and an item's utility is its posterior mean rank, negated. θ is "
    "chosen once per fold from (0.25, 0.5, 1, 2, 4) by leave-one-out over the "
    "training students, pooled over the run's k above 0 "
    "(`benchmarks/harness/ranking_prior.py`). "
    "It is what the other students' rankings tell about a student's unrevealed "
    "pairs without a model of the items.",
    f"- Torch's global seed is {FIT_SEED} before every fit.",
)


def summary(values: list[float]) -> tuple[float, float]:
    r"""Mean and standard error (``nan`` for fewer than two values)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def paired(a: dict[int, float], b: dict[int, float]) -> tuple[float, float, float, int]:
    r"""``a − b`` over the people both have: mean, s.e., the two-sided
    Wilcoxon signed-rank p (zero differences dropped; 1 when every
    difference is zero) and the number of people."""
    people = sorted(a.keys() & b.keys())
    diff = [a[p] - b[p] for p in people]
    if not diff:
        return math.nan, math.nan, math.nan, 0
    mean, se = summary(diff)
    if all(d == 0 for d in diff):
        return mean, se, 1.0, len(diff)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's note on few or tied values
        p = float(wilcoxon(diff, alternative="two-sided").pvalue)
    return mean, se, p, len(diff)


def _cell(values: list[float]) -> str:
    if not values:
        return "–"
    mean, se = summary(values)
    return f"{mean:.3f}" if math.isnan(se) else f"{mean:.3f} ± {se:.3f}"


def _p(p: float) -> str:
    return "–" if math.isnan(p) else f"{p:.2g}" if p < 0.01 else f"{p:.2f}"


def _shown(path: Path) -> str:
    r"""``path`` as a command writes it: relative to the repository root
    where it lies inside it (the runner runs from there)."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _option(argv: list[str], name: str) -> str | None:
    r"""The value of option ``name`` in ``argv`` (``name v`` or ``name=v``);
    ``None`` where it is not given."""
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(f"{name}="):
            return word.split("=", 1)[1]
    return None


def _without(argv: list[str], *names: str) -> list[str]:
    r"""``argv`` without the options ``names`` and their values."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in names:
            skip = True
        elif not word.startswith(tuple(f"{n}=" for n in names)):
            out.append(word)
    return out


def _load(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:.2f}"


def run_line(run: dict, store: Path | None = None, output: Path | None = None) -> str:
    r"""The page's line of a ``run`` record: its command (the recorded options,
    in the runner's form), settings, threads, machine and load.

    Args:
        run: A ``"run"`` record.
        store: The store the page is written from; where the run wrote to
            another one (a scratch path, its store copied here), the line says
            so and gives the commands that make the run in place and write the
            page again from ``store``.
        output: The page's path (given in those commands unless it is
            :data:`PAGE`).

    Returns:
        One markdown bullet.
    """
    s, argv = run["settings"], list(run["argv"])
    line = (
        f"- `{reports.command(NAME, argv, {})}`: {run['seconds']:.0f} s; data "
        f"{', '.join(s['datasets'])}; models {', '.join(s['models'])}; k "
        f"{s['ks']}; population model up to {s['population_max_latents']} "
        f"latent values; {s['tastes']} tastes{'; quick sizes' if s['quick'] else ''}"
        f". Threads: {run['threads']}. Machine: {run['machine']}; load average "
        f"{_load(run['load'][0])} at the start, {_load(run['load'][1])} at the end."
    )
    ran = _option(argv, "--store")
    if store is None or ran is None or Path(ran).resolve() == store.resolve():
        return line
    where = ["--store", _shown(store)]
    if output is not None and output.resolve() != PAGE.resolve():
        where += ["--output", _shown(output)]
    in_place = [*_without(argv, "--store", "--output"), *where]
    return (
        f"{line} This run wrote to a scratch path (`{ran}`); its store was then "
        f"copied to `{_shown(store)}`. The same run in place: "
        f"`{reports.command(NAME, in_place, {})}`; this page again from the store "
        f"alone: `{reports.command(NAME, ['--report', *where], {})}`."
    )


def page(
    records: list[dict], store: Path | None = None, output: Path | None = None
) -> str:
    r"""The markdown page of ``records`` (as :func:`measure` returns them or
    :func:`benchmarks.harness.stores.read` reads them), read from ``store``
    and written to ``output`` where given (see :func:`run_line`)."""
    people: dict[tuple, dict] = {}
    for r in records:
        if r["kind"] == "person":
            people[(r["dataset"], r["person"], r["k"], r["model"])] = r
    fits = [r for r in records if r["kind"] == "fit"]
    runs = [r for r in records if r["kind"] == "run"]
    datasets = [d for d in DATASETS if any(key[0] == d for key in people)]
    models = [m for m in MODELS if any(key[3] == m for key in people)]
    run = {key[::3] for key in people}  # (data set, model) pairs with records
    models_of = {d: [m for m in models if (d, m) in run] for d in datasets}
    lines = [
        "# Held-out people: the collaborative model against per-person, pooled, "
        "population and reference models",
        "",
        "The full protocol is the docstring of "
        "`benchmarks/collaborative_heldout.py`. Accuracy is the share of a "
        "held-out person's unrevealed answers whose winner has the higher "
        "posterior mean utility (a tie counts ½), given `k` revealed answers.",
        "",
        "## Protocol",
        "",
        *PROTOCOL,
        "",
        "## Runs",
        "",
    ]
    lines += [run_line(run, store, output) for run in runs]
    if not runs:
        lines.append("(no finished run in the store)")
    for title, field in (
        ("Accuracy on the held-out answers", "accuracy"),
        ("Planted worlds: accuracy against the true utility", "accuracy_true"),
        ("Accuracy on the pairs the revealed answers leave open", "accuracy_open"),
    ):
        shown = [
            d
            for d in datasets
            if any(field in r for k, r in people.items() if k[0] == d)
        ]
        if not shown:
            continue
        lines += ["", f"## {title}", "", "Mean ± s.e. over held-out people.", ""]
        for d in shown:
            ks = sorted({key[2] for key in people if key[0] == d})
            lines += [f"### {d}", "", "| model | " + " | ".join(f"k = {k}" for k in ks)]
            lines[-1] += " |"
            lines.append("|---|" + "---|" * len(ks))
            for m in models_of[d]:
                cells = [
                    _cell(
                        [
                            r[field]
                            for key, r in people.items()
                            if key[0] == d
                            and key[2] == k
                            and key[3] == m
                            and field in r
                        ]
                    )
                    for k in ks
                ]
                lines.append(f"| {m} | " + " | ".join(cells) + " |")
            lines.append("")
    lines += ["## Paired: collaborative − other", ""]
    if REFERENCE not in models:
        lines.append("(no collaborative records in the store)")
    else:
        lines += [
            "Per held-out person, the collaborative model's accuracy minus the "
            "other's: mean ± s.e., two-sided Wilcoxon signed-rank p (zero "
            "differences dropped), people.",
            "",
            *_paired_lines(people, datasets, models, "accuracy"),
            "",
            "### On the pairs the revealed answers leave open",
            "",
            "The same, on each person's test pairs whose order does not follow "
            "from their revealed answers by transitivity (`open_pairs`; people "
            "with at least one such pair). On Game's consistent rankings the "
            "per-person model gets every closed pair right, so there the "
            "models differ on the open pairs only.",
            "",
            *_paired_lines(people, datasets, models, "accuracy_open"),
        ]
    lines += [
        "",
        "## Time",
        "",
        "Fits: once per fold. Predictions: one per held-out person and k (the "
        "per-person model fits there).",
        "",
        "| data | model | fits | s per fit | predictions | s per prediction "
        "| total s |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in datasets:
        for m in models_of[d]:
            fit_s = [
                r["seconds"] for r in fits if r["dataset"] == d and r["model"] == m
            ]
            pred_s = [
                r["seconds"] for key, r in people.items() if key[0] == d and key[3] == m
            ]
            lines.append(
                f"| {d} | {m} | {len(fit_s)} | {sum(fit_s) / max(len(fit_s), 1):.2f} | "
                f"{len(pred_s)} | {sum(pred_s) / max(len(pred_s), 1):.3f} | "
                f"{sum(fit_s) + sum(pred_s):.0f} |"
            )
    notes = [
        f"- {r['dataset']} fold {r['fold']}: the population model used the first "
        f"{r['train_people']} training people ({r['latents']} latent values)."
        for r in fits
        if r["model"] == "population"
    ]
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def _paired_lines(
    people: dict[tuple, dict], datasets: list[str], models: list[str], field: str
) -> list[str]:
    r"""The paired table (collaborative − each other model) of ``field``."""
    lines = [
        "| data | k | other | difference | p | people | pairs |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in datasets:
        for k in sorted({key[2] for key in people if key[0] == d}):
            mine = {
                m: {
                    key[1]: r
                    for key, r in people.items()
                    if key[0] == d and key[2] == k and key[3] == m and field in r
                }
                for m in models
            }
            tested = "tested_open" if field == "accuracy_open" else "tested"
            for other in models:
                if other == REFERENCE or not mine[REFERENCE] or not mine[other]:
                    continue
                a = {q: r[field] for q, r in mine[REFERENCE].items()}
                b = {q: r[field] for q, r in mine[other].items()}
                mean, se, p, n = paired(a, b)
                pairs = sum(
                    r.get(tested, 0) for q, r in mine[REFERENCE].items() if q in b
                )
                lines.append(
                    f"| {d} | {k} | {other} | {mean:+.3f} ± {se:.3f} | {_p(p)} "
                    f"| {n} | {pairs} |"
                )
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    r"""The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--ks", nargs="+", type=int, default=list(KS))
    p.add_argument("--store", type=Path, default=None, help="JSON-lines store")
    p.add_argument(
        "--report", action="store_true", help="write the page from --store alone"
    )
    p.add_argument("--output", type=Path, default=PAGE)
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    p.add_argument("--population-max-latents", type=int, default=POPULATION_MAX_LATENTS)
    p.add_argument("--tastes", type=int, default=TASTES)
    options = p.parse_args(argv)
    if options.report and options.store is None:
        p.error("--report needs --store")
    if any(k < 0 for k in options.ks):
        p.error(f"--ks must be >= 0; got {options.ks}")
    options.argv = list(sys.argv[1:] if argv is None else argv)
    return options
