r"""A collaborative preference model: a shared utility, a few shared tastes,
and each person's weights on them (see
:mod:`~prefbo.models.collaborative.model`)."""

from prefbo.models.collaborative.ep import ep_people
from prefbo.models.collaborative.model import CollaborativePreferenceGP
from prefbo.models.collaborative.people import PersonPosterior, laplace_people
from prefbo.models.collaborative.person_model import PersonModel
from prefbo.models.collaborative.training import fit_collaborative

__all__ = [
    "CollaborativePreferenceGP",
    "PersonModel",
    "ep_people",
    "PersonPosterior",
    "fit_collaborative",
    "laplace_people",
]
