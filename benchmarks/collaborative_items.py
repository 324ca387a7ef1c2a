r"""What the items' own effects cost the collaborative model, and what they buy.

For each pool size ``n`` (``--items``; 40, 100, 400 and 1,000 by default) the
script draws one planted world,
:func:`prefbo.datasets.population.planted_population` with ``n`` items whose
own effects have the shared utility's sd (``item_effect_scale=1``), 300
people with 20 answers each (seed :data:`WORLD_SEED`), and fits
:class:`~prefbo.models.collaborative.CollaborativePreferenceGP` on it twice
from the same seed: without item effects (``item_effects=False``, the peer)
and with them (``item_effects=True``: each item's effect a posterior mean and
sd of its own beside each shared function's inducing posterior). It prints
each fit's seconds, their ratio, and each model's accuracy against the true
utilities: over the first :data:`SCORED` people, the share of all pairs of
items their posterior mean orders as their true utility does.

Run: ``python -m benchmarks collaborative_items`` (no thread variable set, as
users run it; ``--quick`` for a small run, written under the scratch folder).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from benchmarks import collaborative_heldout as heldout
from benchmarks.harness import environment, reports
from prefbo.datasets import planted_population

RESULTS = Path(__file__).resolve().parent / "results"
#: The planted worlds' seed, and the fits' (torch's global seed and ``fit``'s).
WORLD_SEED = 10
FIT_SEED = 0
PEOPLE = 300
ANSWERS = 20
#: People whose utilities are scored against the truth.
SCORED = 50
ITEMS = (40, 100, 400, 1000)
QUICK = {"items": [12, 30], "people": 20, "steps": 5}


def accuracy(model, truth: torch.Tensor, people: int) -> float:
    r"""Share of item pairs the first ``people`` posterior means order as
    ``truth`` (``P x n`` true utilities) does (the held-out page's
    :func:`~benchmarks.collaborative_heldout.accuracy` on every pair, ordered
    by :func:`~benchmarks.collaborative_heldout.true_answers`)."""
    n = truth.shape[1]
    pairs = torch.triu_indices(n, n, offset=1).T  # pairs x 2
    with torch.no_grad():
        right = [
            heldout.accuracy(
                model.utility_mean(p).reshape(-1), heldout.true_answers(truth[p], pairs)
            )
            for p in range(people)
        ]
    return sum(right) / len(right)


def run(items: int, people: int, steps: int | None) -> dict:
    r"""Both fits on the world of ``items`` items; their seconds and accuracy."""
    from prefbo.models.collaborative import CollaborativePreferenceGP

    world = planted_population(
        num_people=people,
        num_items=items,
        answers_per_person=ANSWERS,
        item_effect_scale=1.0,
        seed=WORLD_SEED,
    )
    out: dict = {"items": items, "answers": len(world.answers)}
    for name, flag in (("without", False), ("with", True)):
        torch.manual_seed(FIT_SEED)
        t = time.perf_counter()
        model = CollaborativePreferenceGP(
            world.designs,
            world.answers,
            num_people=people,
            person_features=world.person_features,
            item_effects=flag,
            seed=FIT_SEED,
        )
        model.fit(steps=steps, seed=FIT_SEED)
        out[f"{name}_s"] = time.perf_counter() - t
        out[f"{name}_accuracy"] = accuracy(model, world.utilities, min(SCORED, people))
    out["ratio"] = out["with_s"] / out["without_s"]
    return out


HEADER = (
    "| items | answers | fit without items (s) | fit with items (s) | with / "
    "without | accuracy without | accuracy with |\n|---|---|---|---|---|---|---|"
)


def row(r: dict) -> str:
    r"""One table row of :func:`run`'s result."""
    return (
        f"| {r['items']} | {r['answers']} | {r['without_s']:.2f} | "
        f"{r['with_s']:.2f} | {r['ratio']:.2f} | {r['without_accuracy']:.3f} | "
        f"{r['with_accuracy']:.3f} |"
    )


def _load(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> Path:  # noqa: D103
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, nargs="+", default=list(ITEMS))
    p.add_argument("--output", type=Path, default=None)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    people, steps = PEOPLE, None
    if args.quick:
        args.items, people, steps = QUICK["items"], QUICK["people"], QUICK["steps"]
    default = reports.scratch_dir() if args.quick else RESULTS
    output = args.output or default / "collaborative_items.md"
    env = environment.lines()
    load = environment.load_average()
    print("\n".join(env))
    print(HEADER, flush=True)
    rows = []
    start = time.perf_counter()
    for n in args.items:
        rows.append(row(run(n, people, steps)))
        print(rows[-1], flush=True)
    argv = list(argv) if argv is not None else []
    end_load = environment.load_average()
    text = "\n".join(
        [
            "# The items' own effects in the collaborative model: cost and gain",
            "",
            f"- command: `{reports.command('collaborative_items', argv)}` "
            f"({time.perf_counter() - start:.0f} s; load average "
            f"{_load(load)} at the start, {_load(end_load)} at the end)",
            *env,
            "",
            f"{people} planted people with {ANSWERS} answers each over `n` items "
            f"whose own effects have the shared utility's sd (`planted_population("
            f"item_effect_scale=1.0, seed={WORLD_SEED})`); the collaborative model "
            f"fitted from seed {FIT_SEED} without and with item effects (each "
            "item's effect a mean and sd of its own beside each shared function's "
            "inducing posterior). Accuracy: over the first "
            f"{min(SCORED, people)} people, the share of all item pairs their "
            "posterior mean orders as their true utility does.",
            "",
            HEADER,
            *rows,
            "",
        ]
    )
    return reports.write(output, text)
