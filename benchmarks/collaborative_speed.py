r"""Speed of the collaborative model: one answer's round trip, batched
questions, and a fit at 10^5 people.

Protocol (every seed is a constant of this script, fixed before any run; the
model is :class:`prefbo.models.collaborative.CollaborativePreferenceGP` at its
constructor defaults, with person features):

- **Participants.** :func:`prefbo.datasets.population.planted_population`
  with ``num_people = --people + WAITING`` (1,000 + 100), 60 items,
  ``answers_per_person = 10`` and seed :data:`POPULATION_SEED`, its other
  arguments at their defaults. The first ``--people`` are the participants:
  the model is fitted on their answers and features (``fit()`` at its
  defaults, 300 steps at 1,000 people; ``--quick``: 20 steps), torch's
  global seed :data:`FIT_SEED` before the fit. The last :data:`WAITING` are
  the waiting people of part 2.
- **1. Latency** (``--parts latency``). Every participant gets a current
  question from one batched call of
  :func:`~prefbo.models.collaborative.questions.next_questions` (EUBO over
  the 60 items). Then ``--events`` (2,000) events: a
  participant drawn uniformly at random (generator seed
  :data:`EVENT_SEED`) answers their current question, the answer simulated
  from their true utility with the generator's probit noise (the winner has
  the larger ``f_p(x) + ε``, ``ε ~ N(0, noise_std²)`` per option,
  ``noise_std`` the generator's default 1.25; same generator). The timer
  covers ``model.observe(p, winner, loser)`` and
  ``next_questions(model, tensor([p]), items)``, the new pair becoming the
  participant's current question. Reported: the p50, p95, p99 and max of
  the events' milliseconds, and the p50 of each of the two calls.
- **2. Batched questions** (``--parts batch``). On a copy of the fitted
  model (before part 1's answers) the :data:`WAITING` people are added with
  their features; waiting person ``i`` then reveals the first ``i mod 11``
  of their answers (``observe``), so 10 newcomers have none and the others
  1 to 10. One ``next_questions`` call gives all of them their pair, over
  the 60 items or over :data:`RANDOM_CANDIDATES` uniform random designs
  (seed :data:`CANDIDATE_SEED`), with EUBO or Thompson sampling (call
  ``r``'s seed ``QUESTION_SEED + r``); each of the four is repeated
  ``--repeats`` (50) times in turn. Reported: the p50 and p95 ms per call
  and questions per second (``WAITING`` over the p50 seconds).
- **3. Fit at scale** (``--parts fit``). ``--fit-people`` (10^5) people with
  10 answers each over the same 60 items. ``planted_population`` holds a
  ``P x 512 x 60`` float64 table of random-feature values for the people's
  residuals (about 0.5 MB per person, 25 GB at 10^5 people), so this part
  draws the people itself (:func:`scale_population`, by the generator's
  law: the world of ``planted_population(seed=SCALE_SEED)``, i.e. its
  items, shared utility and tastes; a feature map ``B`` with unit-norm rows;
  per person ``u ~ N(0, I_2)``, ``w = B u + N(0, I_K)``, a residual drawn
  exactly from the RBF GP at the items (sd 0.2, lengthscale 0.3), 10
  distinct pairs and probit answers; in chunks of :data:`CHUNK` people, one
  generator of seed :data:`SCALE_SEED`). A fresh subprocess draws them,
  builds the model and runs ``model.fit()`` at its defaults; it reports the
  fit's wall seconds and its peak resident memory
  (``getrusage(RUSAGE_SELF).ru_maxrss``: the whole process, data included;
  also read before the model is built). ``planted_population`` itself is
  timed in another fresh subprocess at ``min(--fit-people,``
  :data:`PLANTED_TIMED` ``)`` people.

**Threads.** Parts 1 and 2 run in one fresh subprocess per setting of
``--settings`` (one fit serves both): ``user``, the environment a user has
(``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and ``PREFBO_THREADS`` removed, so
prefbo's thread policy is on; the headline), and ``omp1``
(``OMP_NUM_THREADS=1``). Part 3 runs in the ``user`` setting. Each record
carries its process's :func:`prefbo.utils.threads.describe` and load
averages.

Every measurement appends one JSON record to ``--store`` (one per fit, per
part and setting, and one per invocation: command, machine), so
``--report`` writes the page from the store alone (a later record of the
same part and setting replaces an earlier one; do not mix ``--quick`` and
full runs in one store).

Usage::

    python -m benchmarks collaborative_speed --store runs.jsonl
    python -m benchmarks collaborative_speed --report --store runs.jsonl
    python -m benchmarks collaborative_speed --parts fit --fit-people 10000
    python -m benchmarks collaborative_speed --quick --output /tmp/page.md
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor

from benchmarks.harness import environment, reports, stores
from benchmarks.harness.runner import REPO, child_command
from prefbo.datasets import planted_population
from prefbo.datasets.population import LENGTHSCALE, PlantedPopulation

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("latency", "batch", "fit")
#: Thread settings of the subprocesses: the variables set once
#: :data:`THREAD_VARIABLES` are removed from the environment.
SETTINGS = {"user": {}, "omp1": {"OMP_NUM_THREADS": "1"}}
THREAD_VARIABLES = environment.THREAD_VARIABLES

#: The participants' and waiting people's planted population.
POPULATION_SEED = 0
#: Torch's global seed before every fit; the model's seed.
FIT_SEED = 0
#: Who answers in part 1, and the answers' noise.
EVENT_SEED = 1
#: Part 2's random candidates.
CANDIDATE_SEED = 2
#: ``next_questions``' seed (Thompson's draws): part 1's, and part 2's first.
QUESTION_SEED = 3
#: Part 3's world (``planted_population``'s) and its people.
SCALE_SEED = 4

ITEMS = 60
ANSWERS = 10
WAITING = 100
RANDOM_CANDIDATES = 128
STRATEGIES = ("eubo", "thompson")
#: People drawn at once by :func:`scale_population`.
CHUNK = 10_000
#: ``planted_population`` is timed at most at this many people.
PLANTED_TIMED = 5_000

#: Sizes by mode (an option given on the command line wins).
FULL = {"people": 1000, "events": 2000, "repeats": 50, "fit_people": 100_000}
QUICK = {"people": 50, "events": 100, "repeats": 5, "fit_people": 2000}
#: Fit steps of the ``--quick`` runs (``None``: the model's default).
QUICK_STEPS = 20

#: The targets the page sets beside the measurements.
TARGETS = {
    "p99_ms": 20.0,
    "questions_per_s": 1000.0,
    "fit_s": 600.0,
    "rss_mb": 2048.0,
}

_PLANTED = inspect.signature(planted_population).parameters
NOISE_STD = _PLANTED["noise_std"].default
RESIDUAL_SCALE = _PLANTED["residual_scale"].default
FEATURE_DIM = _PLANTED["person_feature_dim"].default
TASTES = _PLANTED["num_tastes"].default


# ------------------------------------------------------------------ data


def population(people: int) -> PlantedPopulation:
    r"""The planted population of parts 1 and 2: ``people`` participants and
    then :data:`WAITING` waiting people."""
    return planted_population(
        num_people=people + WAITING,
        num_items=ITEMS,
        answers_per_person=ANSWERS,
        seed=POPULATION_SEED,
    )


def participants(pop: PlantedPopulation, people: int) -> tuple[Tensor, Tensor]:
    r"""The ``m x 3`` answers and ``people x e`` features of the first
    ``people`` of ``pop``."""
    return pop.answers[pop.answers[:, 0] < people], pop.person_features[:people]


def simulate_answer(
    utilities: Tensor, a: int, b: int, generator: torch.Generator
) -> tuple[int, int]:
    r"""``(winner, loser)`` of the pair ``(a, b)`` for a person with ``n``
    true ``utilities``: the larger ``f + ε``, ``ε ~ N(0, NOISE_STD²)`` per
    option (``planted_population``'s answers)."""
    noise = NOISE_STD * torch.randn(2, dtype=utilities.dtype, generator=generator)
    if utilities[a] + noise[0] >= utilities[b] + noise[1]:
        return a, b
    return b, a


def scale_population(
    num_people: int, seed: int = SCALE_SEED, truth: bool = False
) -> dict[str, Tensor]:
    r"""``num_people`` people of ``planted_population``'s world of ``seed``,
    drawn in chunks of :data:`CHUNK` (see the module docstring).

    Args:
        num_people: ``P``.
        seed: The world's seed and the people's generator's.
        truth: Whether to return the people's true utilities too.

    Returns:
        ``designs`` ``60 x 3``, ``answers`` ``m x 3`` (``m = 10 P``, grouped
        by person in order), ``person_features`` ``P x 2`` and, with
        ``truth``, ``utilities`` ``P x 60``.
    """
    world = planted_population(
        num_people=1, num_items=ITEMS, answers_per_person=ANSWERS, seed=seed
    )
    X, shared, tastes = world.designs, world.shared, world.tastes  # n x d, n, n x K
    n, K = tastes.shape
    g = torch.Generator().manual_seed(seed)
    loadings = torch.randn(K, FEATURE_DIM, dtype=X.dtype, generator=g)
    loadings = loadings / loadings.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    kernel = torch.exp(-0.5 * torch.cdist(X, X) ** 2 / LENGTHSCALE**2)
    root = torch.linalg.cholesky(kernel + 1e-8 * torch.eye(n, dtype=X.dtype))
    pairs = torch.triu_indices(n, n, offset=1).T  # pairs x 2
    features, answers, truths = [], [], []
    for start in range(0, num_people, CHUNK):
        B = min(CHUNK, num_people - start)
        u = torch.randn(B, FEATURE_DIM, dtype=X.dtype, generator=g)
        w = u @ loadings.T + torch.randn(B, K, dtype=X.dtype, generator=g)
        z = torch.randn(B, n, dtype=X.dtype, generator=g)
        utilities = shared + w @ tastes.T + RESIDUAL_SCALE * z @ root.T  # B x n
        keys = torch.rand(B, len(pairs), generator=g)
        chosen = pairs[keys.topk(ANSWERS, dim=-1).indices]  # B x a x 2
        f = utilities.gather(1, chosen.flatten(1)).view(chosen.shape)
        f = f + NOISE_STD * torch.randn(f.shape, dtype=X.dtype, generator=g)
        first = f[..., 0] >= f[..., 1]  # B x a: the first wins
        ordered = torch.where(first.unsqueeze(-1), chosen, chosen.flip(-1))
        who = torch.arange(start, start + B).repeat_interleave(ANSWERS)
        answers.append(torch.cat([who.unsqueeze(-1), ordered.reshape(-1, 2)], -1))
        features.append(u)
        if truth:
            truths.append(utilities)
    out = {
        "designs": X,
        "answers": torch.cat(answers),
        "person_features": torch.cat(features),
    }
    return out | ({"utilities": torch.cat(truths)} if truth else {})


# ------------------------------------------------------------------ measuring


def quantile(values: list[float], q: float) -> float:
    r"""The ``q`` quantile of ``values`` (linear interpolation)."""
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    lo = math.floor(at)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (at - lo) * (ordered[hi] - ordered[lo])


def peak_rss_mb() -> float:
    r"""This process's peak resident memory so far, in MB (Linux:
    ``ru_maxrss`` is in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fitted_model(options: argparse.Namespace, pop: PlantedPopulation, emit):
    r"""The model fitted on ``pop``'s participants (emits a ``model_fit``
    record)."""
    from prefbo.models.collaborative import CollaborativePreferenceGP

    answers, features = participants(pop, options.people)
    torch.manual_seed(FIT_SEED)
    model = CollaborativePreferenceGP(
        pop.designs,
        answers,
        num_people=options.people,
        person_features=features,
        seed=FIT_SEED,
    )
    t0 = time.perf_counter()
    history = model.fit(steps=options.steps)
    seconds = time.perf_counter() - t0
    emit(
        {
            "kind": "model_fit",
            "people": options.people,
            "answers": len(answers),
            "steps": len(history),
            "seconds": seconds,
        }
    )
    return model


def latency(options: argparse.Namespace, model, pop: PlantedPopulation, emit) -> None:
    r"""Part 1 on ``model`` (changed: the events' answers are observed)."""
    from prefbo.models.collaborative.questions import next_questions

    items = pop.designs
    t0 = time.perf_counter()
    current = next_questions(model, torch.arange(options.people), items)
    first_s = time.perf_counter() - t0
    g = torch.Generator().manual_seed(EVENT_SEED)
    who = torch.randint(options.people, (options.events,), generator=g).tolist()
    total, observe, question = [], [], []
    for p in who:
        a, b = current[p].tolist()
        winner, loser = simulate_answer(pop.utilities[p], a, b, g)
        t0 = time.perf_counter()
        model.observe(p, torch.tensor([winner]), torch.tensor([loser]))
        t1 = time.perf_counter()
        pair = next_questions(model, torch.tensor([p]), items, seed=QUESTION_SEED)
        t2 = time.perf_counter()
        current[p] = pair[0]
        total.append(1e3 * (t2 - t0))
        observe.append(1e3 * (t1 - t0))
        question.append(1e3 * (t2 - t1))
    emit(
        {
            "kind": "latency",
            "people": options.people,
            "events": options.events,
            "first_questions_s": first_s,
            "ms": total,
            "observe_ms": observe,
            "question_ms": question,
        }
    )
    print(
        f"latency: p50 {quantile(total, 0.5):.2f} ms, p99 "
        f"{quantile(total, 0.99):.2f} ms, max {max(total):.2f} ms",
        flush=True,
    )


def waiting_people(model, pop: PlantedPopulation, people: int) -> Tensor:
    r"""Add the :data:`WAITING` people to ``model``, person ``i`` with the
    first ``i mod 11`` of their answers; their ``WAITING`` new ids."""
    ids = []
    for i in range(WAITING):
        person = people + i
        pid = model.add_person(features=pop.person_features[person])
        k = i % (ANSWERS + 1)
        if k:
            mine = pop.answers[pop.answers[:, 0] == person][:k]
            model.observe(pid, mine[:, 1], mine[:, 2])
        ids.append(pid)
    return torch.tensor(ids)


def batch(options: argparse.Namespace, model, pop: PlantedPopulation, emit) -> None:
    r"""Part 2 on ``model`` (changed: the waiting people are added)."""
    from prefbo.models.collaborative.questions import next_questions

    ids = waiting_people(model, pop, options.people)
    g = torch.Generator().manual_seed(CANDIDATE_SEED)
    candidates = {
        f"{ITEMS} items": pop.designs,
        f"{RANDOM_CANDIDATES} random": torch.rand(
            RANDOM_CANDIDATES,
            pop.designs.shape[-1],
            dtype=pop.designs.dtype,
            generator=g,
        ),
    }
    for name, C in candidates.items():
        for strategy in STRATEGIES:
            ms = []
            for r in range(options.repeats):
                t0 = time.perf_counter()
                next_questions(model, ids, C, strategy=strategy, seed=QUESTION_SEED + r)
                ms.append(1e3 * (time.perf_counter() - t0))
            emit(
                {
                    "kind": "batch",
                    "candidates": name,
                    "strategy": strategy,
                    "waiting": len(ids),
                    "newcomers": sum(i % (ANSWERS + 1) == 0 for i in range(WAITING)),
                    "ms": ms,
                }
            )
            print(
                f"batch {name} {strategy}: p50 {quantile(ms, 0.5):.1f} ms per call",
                flush=True,
            )


def fit_at_scale(options: argparse.Namespace, emit) -> None:
    r"""Part 3: draw the people, build the model and fit it (in this process,
    which should be fresh: its peak memory is reported)."""
    from prefbo.models.collaborative import CollaborativePreferenceGP

    rss_start = peak_rss_mb()
    t0 = time.perf_counter()
    data = scale_population(options.fit_people)
    generate_s = time.perf_counter() - t0
    rss_data = peak_rss_mb()
    torch.manual_seed(FIT_SEED)
    t0 = time.perf_counter()
    model = CollaborativePreferenceGP(
        data["designs"],
        data["answers"],
        num_people=options.fit_people,
        person_features=data["person_features"],
        seed=FIT_SEED,
    )
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    history = model.fit(steps=options.steps)
    fit_s = time.perf_counter() - t0
    emit(
        {
            "kind": "scale_fit",
            "people": options.fit_people,
            "answers": len(data["answers"]),
            "steps": len(history),
            "generate_s": generate_s,
            "build_s": build_s,
            "fit_s": fit_s,
            "rss_start_mb": rss_start,
            "rss_data_mb": rss_data,
            "rss_mb": peak_rss_mb(),
        }
    )
    print(f"fit: {fit_s:.1f} s, peak RSS {peak_rss_mb():.0f} MB", flush=True)


def time_planted(options: argparse.Namespace, emit) -> None:
    r"""``planted_population`` at ``min(--fit-people, PLANTED_TIMED)`` people
    (in this process, which should be fresh)."""
    people = min(options.fit_people, PLANTED_TIMED)
    t0 = time.perf_counter()
    planted_population(
        num_people=people,
        num_items=ITEMS,
        answers_per_person=ANSWERS,
        seed=SCALE_SEED,
    )
    emit(
        {
            "kind": "planted",
            "people": people,
            "seconds": time.perf_counter() - t0,
            "rss_mb": peak_rss_mb(),
        }
    )


def child(options: argparse.Namespace) -> None:
    r"""The subprocess's work: ``options.child`` names it; its records go to
    ``options.child_output`` as JSON lines."""
    out = options.child_output.open("a")

    def emit(rec: dict) -> None:
        load = os.getloadavg()[0]
        rec |= {
            "setting": options.setting,
            "threads": environment.threads(),
            "load": load,
        }
        out.write(json.dumps(rec) + "\n")
        out.flush()

    if options.child == ["planted"]:
        time_planted(options, emit)
    elif options.child == ["fit"]:
        fit_at_scale(options, emit)
    else:
        pop = population(options.people)
        model = fitted_model(options, pop, emit)
        pristine = copy.deepcopy(model) if "batch" in options.child else None
        if "latency" in options.child:
            latency(options, model, pop, emit)
        if pristine is not None:
            batch(options, pristine, pop, emit)
    out.close()


def thread_environment(setting: str) -> dict[str, str]:
    r"""The subprocess environment of ``setting`` (:data:`SETTINGS`)."""
    return environment.without_thread_variables() | SETTINGS[setting]


def spawn(options: argparse.Namespace, work: list[str], setting: str) -> list[dict]:
    r"""Run ``work`` (:func:`child`) in a fresh interpreter with ``setting``'s
    environment; its records."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "records.jsonl"
        args = child_command("collaborative_speed", "--child", *work)
        args += ["--setting", setting]
        args += ["--child-output", str(out), "--people", str(options.people)]
        args += ["--events", str(options.events), "--repeats", str(options.repeats)]
        args += ["--fit-people", str(options.fit_people)]
        if options.steps is not None:
            args += ["--steps", str(options.steps)]
        proc = subprocess.run(args, env=thread_environment(setting), cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(
                f"the {setting} subprocess for {work} failed with exit status "
                f"{proc.returncode}; its output is above."
            )
        return [json.loads(line) for line in out.read_text().splitlines() if line]


#: The versions the page records.
VERSIONED = ("torch", "botorch", "gpytorch", "linear_operator")


def machine() -> str:
    r"""The machine and library versions, for the page."""
    return environment.machine_and_versions(VERSIONED)


def measure(options: argparse.Namespace) -> list[dict]:
    r"""Run the parts asked for in subprocesses; the records, each also
    appended to ``options.store`` where given."""
    records: list[dict] = []
    stamp = {"argv": options.argv, "machine": machine(), "quick": options.quick}

    def emit(rec: dict) -> None:
        records.append(rec)
        if options.store is not None:
            stores.append(options.store, rec)

    start, load = time.perf_counter(), os.getloadavg()[0]
    near = [p for p in ("latency", "batch") if p in options.parts]
    if near:
        for setting in options.settings:
            for rec in spawn(options, near, setting):
                emit(rec | stamp)
    if "fit" in options.parts:
        for work in (["planted"], ["fit"]):
            for rec in spawn(options, work, "user"):
                emit(rec | stamp)
    emit(
        {
            "kind": "run",
            "threads": environment.threads(),
            "load": [load, os.getloadavg()[0]],
            "seconds": time.perf_counter() - start,
            "parts": list(options.parts),
            "settings": list(options.settings),
        }
        | stamp
    )
    return records


def main(argv: list[str] | None = None) -> str | None:
    r"""Run (or, with ``--report``, read the store) and write the page."""
    options = parse_args(argv)
    if options.child:
        child(options)
        return None
    records = stores.read(options.store) if options.report else measure(options)
    text = page(records)
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(text)
    print(f"wrote {options.output}")
    return text


# ------------------------------------------------------------------ report


def latest(records: list[dict], kind: str, *keys: str) -> list[dict]:
    r"""The records of ``kind``, the last one of each ``keys`` value kept, in
    first-seen order."""
    kept: dict[tuple, dict] = {}
    for r in records:
        if r["kind"] == kind:
            kept[tuple(r[k] for k in keys)] = r
    return list(kept.values())


def _made(rows: list[dict]) -> list[str]:
    r"""The commands, machines and thread settings behind ``rows``."""
    lines = []
    for argv, where in dict.fromkeys((tuple(r["argv"]), r["machine"]) for r in rows):
        lines.append(f"- Command: `{reports.command('collaborative_speed', argv, {})}`")
        lines.append(f"- Machine: {where}")
    for setting, threads in dict.fromkeys((r["setting"], r["threads"]) for r in rows):
        lines.append(f"- Threads ({setting}): {threads}")
    loads = [r["load"] for r in rows]
    lines.append(
        f"- Load average (1 min) as the records were written: {min(loads):.2f} "
        f"to {max(loads):.2f}"
    )
    return lines


def _ms(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


HOW = (
    "How made: `benchmarks/collaborative_speed.py` (its docstring is the full "
    "protocol). A planted population (`planted_population`, 60 items in "
    "[0, 1]^3, 10 answers per person, person features) is fitted with "
    "`CollaborativePreferenceGP` at its constructor defaults; part 1 times one "
    "simulated answer's `observe` plus that person's next EUBO question, part 2 "
    "one `next_questions` call for 100 waiting people, part 3 `fit()` on "
    "`--fit-people` people (10^5 by default) in a fresh subprocess. Fits run "
    "at the model's default settings (fewer steps with `--quick`: the tables "
    "give the steps). Parts 1 and 2 run in a "
    "fresh subprocess per thread setting: `user` has no thread variables set "
    "(`OMP_NUM_THREADS`, `MKL_NUM_THREADS`, `PREFBO_THREADS` removed), `omp1` "
    "has `OMP_NUM_THREADS=1`. Seeds: population "
    f"{POPULATION_SEED}, fit {FIT_SEED}, events {EVENT_SEED}, candidates "
    f"{CANDIDATE_SEED}, questions {QUESTION_SEED}, scale {SCALE_SEED}."
)


def page(records: list[dict]) -> str:
    r"""The markdown page of ``records`` (as :func:`measure` returns them or
    :func:`load` reads them)."""
    lines = [
        "# Collaborative model: answer latency, batched questions, fit at scale",
        "",
        HOW,
        "",
        "## Runs",
        "",
        "Each run's command, machine and threads are listed with its tables; "
        "this page is written again from the store alone by the same command "
        "with `--report`.",
        "",
    ]
    runs = [r for r in records if r["kind"] == "run"]
    for run in runs:
        lines.append(
            f"- `{reports.command('collaborative_speed', run['argv'], {})}`: "
            f"{run['seconds']:.0f} s; parts {', '.join(run['parts'])}; settings "
            f"{', '.join(run['settings'])}{'; quick sizes' if run['quick'] else ''}; "
            f"load average {run['load'][0]:.2f} at the start, {run['load'][1]:.2f} "
            "at the end."
        )
    if not runs:
        lines.append("(no finished run in the store)")
    fits = {r["setting"]: r for r in latest(records, "model_fit", "setting")}

    rows = latest(records, "latency", "setting")
    lines += ["", "## 1. Answer → updated posterior → next question", ""]
    if rows:
        lines += _made(rows) + [""]
        lines += [
            "Each event: `observe(p, winner, loser)` + `next_questions(model, "
            "tensor([p]), items)` (EUBO, 60 items); answers simulated from the "
            "person's true utility with the generator's probit noise.",
            "",
            "| setting | people | fit steps | fit s | events | p50 ms | p95 ms "
            "| p99 ms | target p99 ms | max ms | observe p50 ms | question p50 ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            f = fits.get(r["setting"])
            fit = f"{f['steps']} | {f['seconds']:.1f}" if f else "– | –"
            ms = r["ms"]
            lines.append(
                f"| {r['setting']} | {r['people']} | {fit} | {r['events']} | "
                f"{_ms(quantile(ms, 0.5))} | {_ms(quantile(ms, 0.95))} | "
                f"{_ms(quantile(ms, 0.99))} | {TARGETS['p99_ms']:.0f} | "
                f"{_ms(max(ms))} | {_ms(quantile(r['observe_ms'], 0.5))} | "
                f"{_ms(quantile(r['question_ms'], 0.5))} |"
            )
    else:
        lines.append("(no latency records in the store)")

    rows = latest(records, "batch", "setting", "candidates", "strategy")
    lines += ["", "## 2. Batched questions for many people", ""]
    if rows:
        first = rows[0]
        lines += _made(rows) + [""]
        lines += [
            f"One `next_questions` call for {first['waiting']} waiting people "
            f"({first['newcomers']} newcomers with no answers, the others 1 to "
            f"{ANSWERS}), repeated {len(first['ms'])} times; questions per second "
            "= people / p50 seconds.",
            "",
            "| setting | candidates | strategy | p50 ms per call | p95 ms per call "
            "| questions / s | target questions / s |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            p50 = quantile(r["ms"], 0.5)
            lines.append(
                f"| {r['setting']} | {r['candidates']} | {r['strategy']} | "
                f"{_ms(p50)} | {_ms(quantile(r['ms'], 0.95))} | "
                f"{r['waiting'] / (p50 / 1e3):,.0f} | "
                f"{TARGETS['questions_per_s']:,.0f} |"
            )
    else:
        lines.append("(no batch records in the store)")

    rows = latest(records, "scale_fit", "people")
    lines += ["", "## 3. Fit at scale", ""]
    if rows:
        lines += _made(rows) + [""]
        lines += [
            "`fit()` at its defaults in a fresh subprocess; peak RSS is "
            "`ru_maxrss` of that process (data, model and fit); the people are "
            "drawn by the script (`scale_population`), not by "
            "`planted_population` (see the planted row below).",
            "",
            "| people | answers | steps | fit s | target s | peak RSS MB "
            "| target MB | RSS before the model MB | drawing the people s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['people']:,} | {r['answers']:,} | {r['steps']} | "
                f"{r['fit_s']:.1f} | {TARGETS['fit_s']:.0f} | {r['rss_mb']:.0f} | "
                f"{TARGETS['rss_mb']:.0f} | {r['rss_data_mb']:.0f} | "
                f"{r['generate_s']:.2f} |"
            )
    else:
        lines.append("(no fit records in the store)")
    planted = latest(records, "planted", "people")
    if planted:
        lines += ["", "`planted_population` alone, in a fresh subprocess:", ""]
        lines += ["| people | seconds | peak RSS MB |", "|---|---|---|"]
        for r in planted:
            lines.append(
                f"| {r['people']:,} | {r['seconds']:.2f} | {r['rss_mb']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    r"""The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    p.add_argument(
        "--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS)
    )
    p.add_argument("--people", type=int, default=None, help="participants (1000)")
    p.add_argument("--events", type=int, default=None, help="part 1 events (2000)")
    p.add_argument("--repeats", type=int, default=None, help="part 2 calls (50)")
    p.add_argument("--fit-people", type=int, default=None, help="part 3 (100000)")
    p.add_argument(
        "--steps", type=int, default=None, help="fit steps (default: the model's)"
    )
    p.add_argument("--store", type=Path, default=None, help="JSON-lines store")
    p.add_argument(
        "--report", action="store_true", help="write the page from --store alone"
    )
    p.add_argument("--output", type=Path, default=RESULTS / "collaborative_speed.md")
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    p.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-output", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--setting", default="user", help=argparse.SUPPRESS)
    options = p.parse_args(argv)
    if options.report and options.store is None:
        p.error("--report needs --store")
    sizes = QUICK if options.quick else FULL
    for name, value in sizes.items():
        if getattr(options, name) is None:
            setattr(options, name, value)
        elif getattr(options, name) < 1:
            p.error(
                f"--{name.replace('_', '-')} must be >= 1; got {getattr(options, name)}"
            )
    if options.steps is not None and options.steps < 0:
        p.error(f"--steps must be >= 0; got {options.steps}")
    if options.quick and options.steps is None:
        options.steps = QUICK_STEPS
    options.argv = list(sys.argv[1:] if argv is None else argv)
    return options
