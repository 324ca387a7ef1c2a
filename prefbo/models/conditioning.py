r"""Conditioning a pairwise preference GP on new answers.

BoTorch's ``fantasize`` conditions a model on sampled real-valued outcomes,
which a preference model cannot take (BoTorch issue #733). The mixin here
conditions on sampled *answers* instead, and adds designs and comparisons to
a copy of the model warm-started at the current approximation, so that
``qKnowledgeGradient`` and ``qMaxValueEntropy`` with pending points run on
prefbo's pairwise models.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import torch
from botorch.models.model import Model
from torch import Tensor

from prefbo.data.validation import validate_comparisons, validate_datapoints
from prefbo.exceptions import InputDataError, UnsupportedError


class PairwiseConditioningMixin:
    r"""``fantasize`` and ``condition_on_observations`` for
    :class:`~prefbo.models.PairwisePreferenceGP` (listed before BoTorch's
    ``Model`` in its bases, so that these replace ``Model``'s).

    Subclasses may override :meth:`_conditioned_start`, the warm start of a
    conditioned model.
    """

    def fantasize(
        self,
        X: Tensor,
        sampler: Any,
        observation_noise: Tensor | bool | None = None,
        **kwargs: Any,
    ) -> Model:
        r"""A fantasy model conditioned on sampled *answers* about ``X``.

        BoTorch's ``fantasize`` conditions on sampled real-valued outcomes,
        which a preference model cannot take (BoTorch issue #733). Here each
        fantasy samples the noisy utilities of the ``q`` options in ``X`` (the
        posterior plus the answer noise ``σ²`` of the likelihood, i.e. the
        Thurstone answer model) and records the option with the largest one as
        the winner over each other option. So ``qKnowledgeGradient`` and
        ``qMaxValueEntropy`` with pending points run on prefbo models.

        Args:
            X: ``batch_shape x q x d`` options; with ``q = 1`` each option is
                asked against the current best design (highest posterior mean
                among the training designs), as for max-value entropy.
            sampler: A BoTorch ``MCSampler`` with ``sample_shape = (F,)``.
            observation_noise: Ignored beyond the default (the likelihood's
                noise is always used: answers are noisy by definition).

        Returns:
            A model with batch shape ``F x batch_shape`` (and the model's), with
            ``q - 1`` new comparisons per fantasy.
        """
        if self._has_no_data():
            raise UnsupportedError("fantasize needs a model with data.")
        if X.shape[-2] == 1:  # one option: asked against the current best design
            with torch.no_grad():
                mean = self.posterior(self.datapoints.unsqueeze(-2)).mean
                best_idx = mean.squeeze(-1).squeeze(-1).argmax(-1)  # batch
                best = (
                    self.datapoints[..., best_idx, :]
                    if self.datapoints.ndim == 2
                    else (
                        self.datapoints.gather(
                            -2,
                            best_idx[..., None, None].expand(
                                best_idx.shape + (1, self.dim)
                            ),
                        ).squeeze(-2)
                    )
                )
            X = torch.cat([X, best.unsqueeze(-2).expand_as(X).to(X)], dim=-2)
        q = X.shape[-2]
        with torch.no_grad():
            post = self.posterior(X, observation_noise=True)
            Y = sampler(post).squeeze(-1)  # F x batch x q
        winner = Y.argmax(dim=-1, keepdim=True)  # F x batch x 1
        idx = torch.arange(q, device=X.device).expand(Y.shape)  # F x batch x q
        # the q - 1 losers of each fantasy, in their original order
        losers = idx[idx != winner].reshape(Y.shape[:-1] + (q - 1,))
        comps = torch.stack([winner.expand_as(losers), losers], dim=-1)
        Xf = X.expand(Y.shape[:-1] + X.shape[-2:])
        return self.condition_on_observations(Xf, comps, **kwargs)

    def condition_on_observations(self, X: Tensor, Y: Tensor, **kwargs: Any) -> Model:
        r"""A copy of the model with new designs and comparisons added.

        Args:
            X: ``batch_shape x n' x d`` new designs.
            Y: ``batch_shape x m' x 2`` comparisons indexing into ``X`` (0 is
                the first new design), as in BoTorch ``PairwiseGP``.

        Returns:
            The conditioned model (warm-started at the current mode).
        """
        X = validate_datapoints(X, name="X")
        d = None if self._has_no_data() else self.unconsolidated_datapoints.shape[-1]
        if d is not None and X.shape[-1] != d:
            raise InputDataError(
                f"X must have d={d} features like the training designs; got X of "
                f"shape {tuple(X.shape)}."
            )
        if not isinstance(Y, Tensor) or Y.shape[-1:] != (2,) or Y.ndim < 2:
            raise InputDataError(
                "Y must be a batch_shape x m x 2 tensor of comparisons indexing into "
                f"X; got {type(Y).__name__}"
                + (f" of shape {tuple(Y.shape)}" if isinstance(Y, Tensor) else "")
                + "."
            )
        Y = validate_comparisons(Y, n=X.shape[-2], name="Y")
        new_model = deepcopy(self)
        if self._has_no_data():
            new_model.set_train_data(X, Y, update_model=True)
            return new_model
        batch = torch.broadcast_shapes(
            Y.shape[:-2], X.shape[:-2], self.unconsolidated_datapoints.shape[:-2]
        )
        old_dp = self.unconsolidated_datapoints.expand(
            batch + self.unconsolidated_datapoints.shape[-2:]
        )
        old_cp = self.unconsolidated_comparisons.expand(
            batch + self.unconsolidated_comparisons.shape[-2:]
        )
        X = X.to(old_dp).expand(batch + X.shape[-2:])
        Y = Y.expand(batch + Y.shape[-2:])
        new_dp = torch.cat([old_dp, X], dim=-2)
        new_cp = torch.cat([old_cp, Y + old_dp.shape[-2]], dim=-2)
        # padding stays padding; the new designs and comparisons are real
        masks = {}
        for name, old, new in (
            ("design_mask", self.design_mask, X.shape[-2]),
            ("comparison_mask", self.comparison_mask, Y.shape[-2]),
        ):
            if old is not None:
                old = old.expand(batch + old.shape[-1:])
                masks[name] = torch.cat([old, old.new_ones(batch + (new,))], dim=-1)
        with torch.no_grad():
            new_mean = self.posterior(X).mean.squeeze(-1)  # batch x n'
            init = torch.cat([self.utility.expand(batch + (self.n,)), new_mean], dim=-1)
        new_model.set_train_data(new_dp, new_cp, update_model=False, **masks)
        # warm start at [current mode, predicted mean] unless designs were merged
        same_layout = new_model.n == self.n + X.shape[-2] and (
            self.consolidated_indices is None
            or bool(
                (
                    self.consolidated_indices
                    == torch.arange(len(self.consolidated_indices), device=X.device)
                ).all()
            )
        )
        new_model._warm = self._conditioned_start(init) if same_layout else None
        new_model._get_state()
        return new_model

    def _conditioned_start(self, init: Tensor) -> Any:
        r"""Warm start of :meth:`condition_on_observations`'s model: ``init``,
        the current mode followed by the predicted means of the new designs."""
        return init
