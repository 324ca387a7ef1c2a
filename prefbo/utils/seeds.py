r"""Every seed prefbo derives from a user's seed, each with a name.

A loop, a study and a served study each take one seed and derive from it a
seed per random step: a fit, a question, a uniform draw. Each derivation
mixes the user's seed with counters (answers so far, a participant's id) by
multiplying by a prime and adding, so that different steps and different
participants get different streams while equal inputs replay equal
questions. They are the contract of a resumed log and a replay: changing
one changes what a study asks.

Example:
    >>> fit_seed(3, 10)
    23767
    >>> question_seed(3, 10)
    3000019
"""

from __future__ import annotations

#: The primes of the derivations.
FIT_PRIME = 7919
STEP_PRIME = 1_000_003
PERSON_PRIME = 1_009
PARTICIPANT_PRIME = 100_003
SEQ_PRIME = 10_007
SALT_PRIME = 101


def fit_seed(seed: int, count: int = 0) -> int:
    r"""A fit's seed: its start and optimiser draws at ``count`` answers."""
    return seed * FIT_PRIME + count


def revive_seed(seed: int) -> int:
    r"""The seed of the parts a fit of seed ``seed`` revives: another
    stream than the model's start, drawn from the same seed."""
    return seed * SALT_PRIME + 1


def retry_seed(seed: int, attempt: int) -> int:
    r"""The seed of the ``attempt``-th repeated draw of designs after
    ``seed``'s (a draw that gave duplicates)."""
    return seed + attempt * FIT_PRIME


def question_seed(seed: int, answers: int) -> int:
    r"""The seed of a loop's question after ``answers`` answers."""
    return seed * STEP_PRIME + answers


def participant_question_seed(seed: int, answers: int, participant: int) -> int:
    r"""The seed of a study participant's question when the study holds
    ``answers`` answers."""
    return question_seed(seed, answers) * PERSON_PRIME + participant


def person_question_seed(seed: int, fitted_at: int, own: int, person: int) -> int:
    r"""The seed of a collaborative study person's question: from the
    study's answers at the last fit and the person's ``own`` answers."""
    return participant_question_seed(seed, fitted_at, own) * PERSON_PRIME + person


def participant_seed(seed: int, participant: int) -> int:
    r"""The seed of a served participant's own loop."""
    return seed * PARTICIPANT_PRIME + participant


def batch_question_seed(seed: int, index: int) -> int:
    r"""The seed of the ``index``-th question of a batched step of seed
    ``seed`` (a uniform one: the step's strategy uses no model)."""
    return seed + index


def uniform_question_seed(seed: int, participant: int, seq: int, salt: int = 0) -> int:
    r"""The seed of a served participant's uniform question ``seq`` (``salt``:
    which replacement of it)."""
    return (question_seed(seed, participant) * SEQ_PRIME + seq) * SALT_PRIME + salt
