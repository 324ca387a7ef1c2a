r"""The study file of ``prefbo serve``: TOML or JSON.

Example (``study.toml``)::

    title = "Which colour do you prefer?"
    instructions = "Click the one you prefer, or press its number."
    q = 2                          # options per question, 2-4
    answers_per_participant = 15   # the stopping rule: a participant is done
    max_participants = 200         # joining closes after (optional)
    no_preference = true           # offer "no preference" (stored, not fitted)
    seed = 0

    [model]
    kind = "collaborative"  # (default at q = 2) one model of everyone: each
                          # answer updates its person in milliseconds; or
                          # "population" (q = 2; one exact model, refitted
                          # at every answer: small studies); or
                          # "individual" (a model per participant; the
                          # default at q = 3 or 4)
    inference = "ep"      # or "laplace" (population and individual kinds)
    strategy = "eubo"     # population: eubo | random; collaborative: eubo |
                          # thompson | random; individual: any strategy for
                          # q (default eubo at q = 2, else qeubo)
    initial_random = 2
    # boundary_step = 0.1 # individual and collaborative: options keep off
                          # the faces (false: a participant's best may lie
                          # on a face)

    [[space]]             # as space.json's entries (or space = "space.json")
    name = "hue"
    type = "continuous"
    lower = 0
    upper = 360

    [display]
    kind = "values"       # the values with names (built in)
    # kind = "files";    folder = "photos"; pattern = "{photo}.jpg"
    # kind = "callable"; function = "render:swatch"  (values -> bytes, mime)

Every error names the file and the field: :class:`StudyFileError`.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefbo.exceptions import InputDataError, PrefboError
from prefbo.loop import PreferentialOptimizer
from prefbo.loop.boundary import DEFAULT_STEP, MAX_STEP, MIN_STEP
from prefbo.space import ItemPool, Space
from prefbo.space.space import variable_from_dict

MODEL_KINDS = ("population", "collaborative", "individual")
INFERENCES = ("ep", "laplace")
POPULATION_STRATEGIES = ("eubo", "random")
COLLABORATIVE_STRATEGIES = ("eubo", "thompson", "random")
DISPLAY_KINDS = ("values", "files", "callable")
#: The fields of ``[display]`` for each kind.
DISPLAY_FIELDS = {
    "values": ("kind",),
    "files": ("folder", "kind", "pattern"),
    "callable": ("function", "kind"),
}
TOP_LEVEL = {
    "title",
    "instructions",
    "q",
    "answers_per_participant",
    "max_participants",
    "no_preference",
    "seed",
    "model",
    "space",
    "display",
}


class StudyFileError(InputDataError):
    r"""A study file that cannot be served; the message names the field."""


@dataclass(frozen=True)
class StudyConfig:
    r"""A checked study (see the module docstring for the fields).

    Attributes:
        space: The :class:`~prefbo.space.Space` of the designs.
        root: The folder relative paths (display files, a callable's module)
            are read from: the study file's.
        source: The study as read, JSON-serialisable (stored in the
            database, so a replay needs no file).
        name: What the messages call the study: its file's path.
    """

    title: str
    instructions: str
    q: int
    answers_per_participant: int
    max_participants: int | None
    no_preference: bool
    seed: int
    model_kind: str
    inference: str
    strategy: str
    initial_random: int
    boundary_step: float | None
    space: Space
    display: dict[str, Any]
    root: Path
    source: dict[str, Any] = field(repr=False)
    name: str = "study"


def load_study(path: str | Path) -> StudyConfig:
    r"""Read and check a study file (``.toml``, else JSON).

    Raises:
        StudyFileError: The file is missing or unreadable, or a field is
            missing, of the wrong type or out of range (the message names it).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise StudyFileError(f"{path}: cannot read the study file ({e}).") from e
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as e:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise StudyFileError(f"{path}: not valid {kind}: {e}") from e
    if not isinstance(data, dict):
        raise StudyFileError(f"{path}: the study must be a table/object.")
    return study_from_dict(data, root=path.parent, name=str(path))


def study_from_dict(
    data: dict[str, Any],
    root: Path | str = ".",
    name: str = "study",
    check_files: bool = True,
) -> StudyConfig:
    r"""A :class:`StudyConfig` from the parsed study (see :func:`load_study`);
    ``check_files=False`` leaves the display's files unchecked (a replay or
    export reads the database only)."""
    root = Path(root)

    def fail(where: str, message: str) -> StudyFileError:
        return StudyFileError(f"{name}: {where} {message}")

    unknown = sorted(set(data) - TOP_LEVEL)
    if unknown:
        raise fail(unknown[0], f"is not a study field (known: {sorted(TOP_LEVEL)}).")
    source = json.loads(json.dumps(data))  # plain JSON types, a copy
    q = _int(data, "q", 2, 2, 4, fail)
    answers = _int(data, "answers_per_participant", 20, 1, 10_000, fail)
    most = data.get("max_participants")
    if most is not None:
        most = _int(data, "max_participants", None, 1, 10**7, fail)
    seed = _int(data, "seed", 0, 0, 2**31 - 1, fail)
    no_pref = data.get("no_preference", False)
    if not isinstance(no_pref, bool):
        raise fail("no_preference", f"must be true or false; got {no_pref!r}.")
    title = _text(data, "title", "Which do you prefer?", fail)
    instructions = _text(
        data,
        "instructions",
        "Click the option you prefer, or press its number on the keyboard.",
        fail,
    )
    model = data.get("model", {})
    if not isinstance(model, dict):
        raise fail("model", f"must be a table; got {model!r}.")
    fields = {"kind", "inference", "strategy", "initial_random", "boundary_step"}
    extra = sorted(set(model) - fields)
    if extra:
        raise fail(f"model.{extra[0]}", "is not a model field.")
    default_kind = "collaborative" if q == 2 else "individual"
    kind = _choice(model, "kind", default_kind, MODEL_KINDS, fail, "model.")
    if kind == "collaborative" and "inference" in model:
        named = "" if "kind" in model else " (the default kind at q = 2)"
        raise fail(
            "model.inference",
            "applies to model.kind = 'population' or 'individual' only; the "
            f"collaborative model{named} has its own.",
        )
    inference = _choice(model, "inference", "ep", INFERENCES, fail, "model.")
    strategy = model.get("strategy", "eubo")
    if kind in ("population", "collaborative"):
        known = (
            POPULATION_STRATEGIES if kind == "population" else COLLABORATIVE_STRATEGIES
        )
        strategy = _choice(model, "strategy", "eubo", known, fail, "model.")
        if q != 2:
            raise fail(
                "q",
                f"must be 2 with model.kind = {kind!r}; got {q} "
                "(use model.kind = 'individual' for 3 or 4 options).",
            )
    else:
        strategy = model.get("strategy", "eubo" if q == 2 else "qeubo")
        if not isinstance(strategy, str):
            raise fail("model.strategy", f"must be a strategy name; got {strategy!r}.")
    initial = _int(model, "initial_random", 2, 1, 10_000, fail, "model.")
    step = _boundary_step(model, kind, fail)
    space = _space(data.get("space"), root, fail)
    if kind == "individual":
        try:  # what each participant's optimiser will be: checked now
            PreferentialOptimizer(
                space, model=inference, strategy=strategy, q=q, boundary_step=step
            )
        except PrefboError as e:
            raise fail("model.strategy", f"= {strategy!r} does not fit: {e}") from e
    entry = data.get("display", {"kind": "values"})
    display = _display(entry, space, root, fail) if check_files else dict(entry)
    return StudyConfig(
        title=title,
        instructions=instructions,
        q=q,
        answers_per_participant=answers,
        max_participants=most,
        no_preference=no_pref,
        seed=seed,
        model_kind=kind,
        inference=inference,
        strategy=strategy,
        initial_random=initial,
        boundary_step=step,
        space=space,
        display=display,
        root=root,
        source=source,
        name=name,
    )


def _int(data, key, default, lo, hi, fail, prefix=""):
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"{prefix}{key}", f"must be an integer; got {value!r}.")
    if not lo <= value <= hi:
        raise fail(f"{prefix}{key}", f"must be in [{lo}, {hi}]; got {value}.")
    return value


def _boundary_step(model, kind, fail) -> float | None:
    r"""``model.boundary_step`` of an individual or collaborative study: the
    loop's default unless given, ``false`` for none (the exact population
    kind makes none)."""
    if "boundary_step" in model and kind == "population":
        raise fail(
            "model.boundary_step",
            "applies to model.kind = 'individual' or 'collaborative' only.",
        )
    if kind == "population":
        return None
    value = model.get("boundary_step", DEFAULT_STEP)
    if value is False:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "collaborative":  # at half the range every candidate is the centre
        if not number or not MIN_STEP <= value < MAX_STEP:
            raise fail(
                "model.boundary_step",
                f"must be a number from {MIN_STEP} to below {MAX_STEP}, or false; "
                f"got {value!r}.",
            )
    elif not number or not MIN_STEP <= value <= MAX_STEP:
        raise fail(
            "model.boundary_step",
            f"must be a number in [{MIN_STEP}, {MAX_STEP}] or false; got {value!r}.",
        )
    return float(value)


def _text(data, key, default, fail):
    value = data.get(key, default)
    if not isinstance(value, str):
        raise fail(key, f"must be a string; got {value!r}.")
    return value


def _choice(data, key, default, choices, fail, prefix=""):
    value = data.get(key, default)
    if value not in choices:
        raise fail(f"{prefix}{key}", f"must be one of {list(choices)}; got {value!r}.")
    return value


def _space(entry: Any, root: Path, fail) -> Space:
    if entry is None:
        raise fail("space", "is missing: a list of variables or a space.json path.")
    if isinstance(entry, str):
        try:
            entry = json.loads((root / entry).read_text())["variables"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise fail("space", f"= {entry!r}: cannot read its variables ({e}).") from e
    if not isinstance(entry, list) or not entry:
        raise fail("space", f"must be a non-empty list of variables; got {entry!r}.")
    variables = []
    for i, v in enumerate(entry):
        try:
            variables.append(variable_from_dict(v))
        except (InputDataError, TypeError) as e:
            raise fail(f"space[{i}]", f"is not a variable: {e}") from e
    try:
        return Space(variables)
    except (InputDataError, TypeError) as e:
        raise fail("space", f"is not a space: {e}") from e


def _display(entry: Any, space: Space, root: Path, fail) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise fail("display", f"must be a table; got {entry!r}.")
    kind = _choice(entry, "kind", "values", DISPLAY_KINDS, fail, "display.")
    known = DISPLAY_FIELDS[kind]
    unknown = sorted(set(entry) - set(known))
    if unknown:
        raise fail(
            f"display.{unknown[0]}",
            f"is not a field of display.kind = {kind!r} (known: {list(known)}); "
            f"got {entry[unknown[0]]!r}.",
        )
    if kind == "files":
        folder, pattern = entry.get("folder"), entry.get("pattern")
        if not isinstance(folder, str) or not (root / folder).is_dir():
            raise fail("display.folder", f"must name a folder; got {folder!r}.")
        if not isinstance(pattern, str):
            raise fail("display.pattern", f"must be a string; got {pattern!r}.")
        for values in _examples(space):
            try:
                file = root / folder / pattern.format(**values)
            except (KeyError, IndexError, ValueError) as e:
                raise fail(
                    "display.pattern", f"{pattern!r} does not fit the space ({e})."
                ) from e
            if not file.is_file():
                raise fail("display.pattern", f"names {str(file)!r}, which is missing.")
        return {"kind": kind, "folder": folder, "pattern": pattern}
    if kind == "callable":
        function = entry.get("function")
        if not isinstance(function, str) or function.count(":") != 1:
            raise fail(
                "display.function", f"must be 'module:function'; got {function!r}."
            )
        return {"kind": kind, "function": function}
    return {"kind": "values"}


def _examples(space: Space) -> list[dict[str, Any]]:
    r"""Every design of a pool-only space, else a few sampled ones."""
    if len(space.variables) == 1 and isinstance(space.variables[0], ItemPool):
        return space.decode(space.grid())
    return space.decode(space.sample(8, seed=0))
