r"""The designs' box and the map between it and the models' inputs.

A :class:`DesignBox` is the one place the loop turns designs (points of the
box ``[lower, upper]``, or a :class:`~prefbo.space.Space`'s model points in
its unit box) into what the models see and back: the unit cube
``[0, 1]^d`` (every default prior, like BoTorch's, is set for inputs
there), or the box's own units where ``unit_cube`` is off (logs written
before the unit cube). It also draws uniformly random designs, the
questions asked before the model is used.
:class:`~prefbo.loop.PreferentialOptimizer` holds one (``opt.box``) and so
does :class:`~prefbo.loop.PopulationStudy`.

Example:
    >>> box = DesignBox(torch.tensor([[0.0, -5.0], [1.0, 5.0]]))
    >>> box.to_model(torch.tensor([[0.5, 0.0]]))     # 1 x 2
    tensor([[0.5000, 0.5000]], dtype=torch.float64)
"""

from __future__ import annotations

import torch
from torch import Tensor

from prefbo.loop.options import SEED_MOD
from prefbo.loop.spaces import random_designs
from prefbo.space import Space

#: Two questions whose options differ by at most this (in the unit cube)
#: are the same question.
SAME_QUESTION_TOL = 1e-9


class DesignBox:
    r"""The box of the designs, and the models' coordinates of them.

    Args:
        bounds: The ``2 x d`` float64 box ``[lower, upper]`` of the designs
            (checked already, e.g. by
            :class:`~prefbo.loop.settings.LoopSettings`; a space's: the unit
            box of its ``space.dim`` model columns).
        space: The :class:`~prefbo.space.Space` of the designs, or ``None``
            for a box.
        unit_cube: The models see the unit cube of the box; ``False``: the
            box's own units.
    """

    def __init__(
        self, bounds: Tensor, space: Space | None = None, unit_cube: bool = True
    ) -> None:
        self.bounds = bounds
        self.space = space
        self.unit_cube = bool(unit_cube)

    @property
    def dim(self) -> int:
        r"""Number of columns ``d`` of a design."""
        return self.bounds.shape[-1]

    def to_unit(self, X: Tensor) -> Tensor:
        r"""Designs of the box as points of the unit cube.

        Args:
            X: ``... x d`` designs (not checked: designs outside the box map
                outside the cube).

        Returns:
            ``(X - lower) / (upper - lower)``, float64, ``... x d``.
        """
        lo, hi = self.bounds
        return (X.to(lo) - lo) / (hi - lo)

    def from_unit(self, Z: Tensor) -> Tensor:
        r"""Points of the unit cube as designs of the box (inverse of
        :meth:`to_unit` on the cube; the result is clamped to the box, which
        also moves points given outside the cube onto its faces).

        Args:
            Z: ``... x d`` points of ``[0, 1]^d``.

        Returns:
            ``lower + (upper - lower) Z``, float64, ``... x d``.
        """
        lo, hi = self.bounds
        return torch.minimum(torch.maximum(lo + (hi - lo) * Z.to(lo), lo), hi)

    def same_question(self, a: Tensor, b: Tensor) -> bool:
        r"""Whether ``q x d`` questions ``a`` and ``b`` are the same: their
        options in order within :data:`SAME_QUESTION_TOL` of the box's
        width (a space's options told as dicts round)."""
        if a.shape != b.shape:
            return False
        diff = self.to_unit(a) - self.to_unit(b)
        return bool(diff.abs().max() <= SAME_QUESTION_TOL)

    def to_model(self, X: Tensor) -> Tensor:
        r"""``... x d`` designs as the models' ``... x d`` inputs (the unit
        cube, or the box itself without ``unit_cube``), float64."""
        return self.to_unit(X) if self.unit_cube else X.to(self.bounds)

    def from_model(self, Z: Tensor) -> Tensor:
        r"""The models' ``... x d`` inputs as ``... x d`` designs (inverse of
        :meth:`to_model`)."""
        return self.from_unit(Z) if self.unit_cube else Z

    @property
    def model_bounds(self) -> Tensor:
        r"""The ``2 x d`` box of the models' inputs (``[0, 1]^d``, or
        :attr:`bounds` without ``unit_cube``)."""
        if not self.unit_cube:
            return self.bounds
        cube = torch.zeros_like(self.bounds)
        cube[1] = 1.0
        return cube

    def uniform(self, k: int, seed: int, avoid: Tensor | None = None) -> Tensor:
        r"""``k`` designs drawn uniformly at random under ``seed``.

        Args:
            k: How many.
            seed: The draw's seed (any int; taken modulo
                :data:`~prefbo.loop.options.SEED_MOD`).
            avoid: With a space, a ``d`` design none of them equals (e.g.
                a kept winner); the space's designs are also distinct.

        Returns:
            A ``k x d`` float64 tensor of designs.
        """
        if self.space is not None:
            return random_designs(self.space, k, seed % SEED_MOD, avoid)
        gen = torch.Generator().manual_seed(seed % SEED_MOD)
        u = torch.rand(k, self.dim, generator=gen, dtype=torch.float64)  # k x d
        return self.bounds[0] + (self.bounds[1] - self.bounds[0]) * u
