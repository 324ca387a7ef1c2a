r"""A population of people's utilities: a shared utility plus each person's own
deviation.

Participant ``p``'s utility is ``f_p(x) = g(x) + h_p(x)``: ``g`` the
population's utility, shared by all, and ``h_p`` the person's deviation,
independent between people. With ``g ~ GP(0, k_pop)`` and ``h_p ~ GP(0,
k_ind)`` the utilities are one GP over (design, participant) pairs,

.. math::
    k((x, p), (x', p')) = k_{pop}(x, x') + \delta_{p p'}\, k_{ind}(x, x'),

the hierarchical model of multi-task and grouped GPs (e.g. Hensman, Lawrence
& Rattray 2013, "Hierarchical Bayesian modelling of gene expression time
series across irregularly sampled replicates and clusters"; Bonilla, Chai &
Williams 2008 for the general multi-task form). A preference model with this
kernel (Laplace, EP or variational) learns one population utility from
everyone's answers, every person's deviation from their own, and the
hyperparameters of both from all; :class:`PopulationKernel` takes the
participant from the inputs' last column.

Participant ids are integers ``≥ 0``. The id :data:`POPULATION` (``-1``)
stands for ``g`` alone: its covariance with any design is ``k_pop``, so a
posterior at ``(x, -1)`` is the population utility's. A participant without
answers (an id not in the data) gets the population posterior plus the prior
of a deviation: the warm start of a new person.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from linear_operator import to_dense
from torch import Tensor

from prefbo.exceptions import InputTypeError

#: The participant id of the population utility ``g`` alone.
POPULATION = -1


class PopulationKernel(Kernel):
    r"""``k_pop(x, x') + δ(p, p') k_ind(x, x')`` over inputs ``[x, p]`` (the
    participant id ``p`` in the last column; see the module docstring).

    Args:
        population_kernel: ``k_pop`` on the designs ``x``.
        individual_kernel: ``k_ind`` on the designs ``x``.

    Example:
        >>> k = PopulationKernel(
        ...     default_preference_covar_module(2), default_preference_covar_module(2)
        ... )
        >>> X = torch.tensor([[0.1, 0.2, 0.0], [0.1, 0.2, 1.0]], dtype=torch.float64)
        >>> K = k(X).to_dense()  # the two people share k_pop only
    """

    has_lengthscale = False

    def __init__(self, population_kernel: Kernel, individual_kernel: Kernel) -> None:
        for name, k in (
            ("population_kernel", population_kernel),
            ("individual_kernel", individual_kernel),
        ):
            if not isinstance(k, Kernel):
                raise InputTypeError(
                    f"{name} must be a gpytorch Kernel; got {type(k).__name__}."
                )
        super().__init__()
        self.population_kernel = population_kernel
        self.individual_kernel = individual_kernel

    def forward(
        self,
        x1: Tensor,
        x2: Tensor,
        diag: bool = False,
        last_dim_is_batch: bool = False,
        **params,
    ) -> Tensor:
        if last_dim_is_batch:
            raise InputTypeError("PopulationKernel does not take last_dim_is_batch.")
        z1, p1 = x1[..., :-1], x1[..., -1]
        z2, p2 = x2[..., :-1], x2[..., -1]
        pop = to_dense(self.population_kernel(z1, z2, diag=diag))
        ind = to_dense(self.individual_kernel(z1, z2, diag=diag))
        if diag:
            same = (p1 == p2) & (p1 >= 0)
        else:
            same = (p1.unsqueeze(-1) == p2.unsqueeze(-2)) & (p1 >= 0).unsqueeze(-1)
        return pop + ind * same.to(ind.dtype)


def with_participant(X: Tensor, participant: int) -> Tensor:
    r"""``n x d`` designs with the participant id appended as the last column
    (``n x (d + 1)``; :data:`POPULATION` for the population utility)."""
    column = torch.full(
        (*X.shape[:-1], 1), float(participant), dtype=X.dtype, device=X.device
    )
    return torch.cat([X, column], dim=-1)
