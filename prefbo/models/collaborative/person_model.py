r"""One person's utility in a collaborative model, as a BoTorch ``Model``.

:class:`PersonModel` is what BoTorch's acquisition functions (EUBO,
Thompson sampling) and the loop's question maker see of one person of a
:class:`~prefbo.models.collaborative.CollaborativePreferenceGP`: their
utility's posterior, at their stored latent posterior or at one given
(``latent``, e.g. after comparisons imagined with
:func:`~prefbo.models.collaborative.questions.imagined_posteriors`, which
a question made with virtual comparisons at the box's faces is asked at).

Example:
    >>> view = model.person_model(3)                       # person 3
    >>> acqf = AnalyticExpectedUtilityOfBestOption(pref_model=view)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from torch import Tensor

from prefbo.exceptions import InputDataError
from prefbo.models.collaborative.people import PersonPosterior
from prefbo.utils.checks import describe

if TYPE_CHECKING:  # the model module imports this one
    from prefbo.models.collaborative.model import CollaborativePreferenceGP


class PersonModel(Model):
    r"""One person's utility in a collaborative model (see the module
    docstring).

    Args:
        model: The collaborative model.
        person: The person's id, or ``None``: the population's utility (a
            newcomer's without features).
        latent: The person's latent posterior to use (one person's:
            ``1 x D`` mean and ``1 x D x D`` precision factor); default
            their stored one.

    Raises:
        InputDataError: ``latent`` is not one person's posterior of the
            model's latent size.
    """

    def __init__(
        self,
        model: CollaborativePreferenceGP,
        person: int | None,
        latent: PersonPosterior | None = None,
    ) -> None:
        super().__init__()
        D = model.latent_dim
        if latent is not None and (
            not isinstance(latent, PersonPosterior)
            or tuple(latent.mean.shape) != (1, D)
            or tuple(latent.precision_chol.shape) != (1, D, D)
        ):
            got = (
                f"means {tuple(latent.mean.shape)} and precision factors "
                f"{tuple(latent.precision_chol.shape)}"
                if isinstance(latent, PersonPosterior)
                else describe(latent)
            )
            raise InputDataError(
                f"latent must be one person's PersonPosterior (a 1 x {D} mean and "
                f"a 1 x {D} x {D} precision factor); got {got}."
            )
        self.model, self.person, self.latent = model, person, latent
        self.likelihood = model.likelihood

    @property
    def num_outputs(self) -> int:  # noqa: D102
        return 1

    @property
    def datapoints(self) -> Tensor:
        r"""The model's design table (BoTorch's EUBO reads its dtype and device)."""
        return self.model.designs

    def posterior(self, X: Tensor, *args: Any, **kwargs: Any) -> GPyTorchPosterior:  # noqa: D102
        return self.model.posterior(
            X, *args, person=self.person, latent=self.latent, **kwargs
        )
