r"""The comparison graph of pairwise answers, and what it says about the data.

Designs are nodes; each answer ``[w, l]`` is an undirected edge ``w - l``
(repeated answers add weight). The answers alone order two designs only when
a path of answers joins them: designs in different connected components are
ordered by the kernel's smoothness assumption alone. The weighted graph
Laplacian ``L = D - W`` summarises this: its second-smallest eigenvalue, the
algebraic connectivity (Fiedler value), is ``0`` exactly when the graph is
disconnected and grows as more independent paths of answers join the designs.

:func:`comparison_graph_summary` returns components, degrees and the algebraic
connectivity, and warns (:class:`ComparisonGraphWarning`) about several
components, isolated designs and star-shaped components (every answer of the
component involves one design, so the others are ordered only against it).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from prefbo.exceptions import ComparisonGraphWarning, InputDataError
from prefbo.utils.checks import check_int

# a component with at least this many leaves around one hub counts as a star
STAR_MIN_LEAVES = 3


@dataclass(frozen=True)
class ComparisonGraphSummary:
    r"""Structure of a comparison graph on ``n`` designs.

    Attributes:
        n: Number of designs (nodes).
        num_comparisons: Number of answers (edges, with multiplicity).
        components: Node lists of the connected components, ordered by their
            smallest node; each list is sorted.
        labels: ``n`` long tensor, the component index of each node.
        degrees: ``n`` long tensor, answers involving each node (multiplicity
            counted).
        laplacian: ``n x n`` float64 weighted Laplacian ``D - W``.
        algebraic_connectivity: Second-smallest eigenvalue of ``laplacian``
            (``0.0`` when disconnected or ``n < 2``).
        isolated: Nodes in no answer.
        star_centers: Hubs of star-shaped components (at least
            ``STAR_MIN_LEAVES`` leaves, every edge touching the hub).
    """

    n: int
    num_comparisons: int
    components: list[list[int]]
    labels: Tensor
    degrees: Tensor
    laplacian: Tensor
    algebraic_connectivity: float
    isolated: list[int]
    star_centers: list[int]

    @property
    def num_components(self) -> int:
        r"""Number of connected components."""
        return len(self.components)

    @property
    def messages(self) -> list[str]:
        r"""Human-readable findings (empty when the graph is well connected)."""
        out = []
        if self.num_components > 1:
            sizes = sorted((len(c) for c in self.components), reverse=True)
            out.append(
                f"the answers split the {self.n} designs into {self.num_components} "
                f"groups (sizes {sizes[:8]}{'...' if len(sizes) > 8 else ''}) that "
                "no chain of answers connects; designs in different groups are "
                "ordered only through the kernel. Ask questions that pair designs "
                "across groups (e.g. keep the previous winner)."
            )
        if self.isolated:
            out.append(
                f"{len(self.isolated)} design(s) appear in no answer: "
                f"{self.isolated[:10]}{'...' if len(self.isolated) > 10 else ''}."
            )
        if self.star_centers:
            out.append(
                "star-shaped group(s) around design(s) "
                f"{self.star_centers[:10]}: every answer involves the hub, so the "
                "other designs are compared only with it, not with each other."
            )
        return out


def _validate(comparisons: Tensor, n: int) -> Tensor:
    n = check_int("n", n, 0)
    if not isinstance(comparisons, Tensor):
        raise InputDataError(
            "comparisons must be a (m, 2) integer tensor; got "
            f"{type(comparisons).__name__}."
        )
    if comparisons.numel() == 0:
        return comparisons.new_zeros(0, 2, dtype=torch.long).cpu()
    if (
        comparisons.ndim != 2
        or comparisons.shape[-1] != 2
        or comparisons.is_floating_point()
        or comparisons.dtype == torch.bool
    ):
        raise InputDataError(
            "comparisons must be a (m, 2) integer tensor of indices into the "
            f"designs (n={n}); got {tuple(comparisons.shape)=} of "
            f"{comparisons.dtype}."
        )
    comparisons = comparisons.long().cpu()
    mn, mx = int(comparisons.min()), int(comparisons.max())
    if mn < 0 or mx >= n:
        raise InputDataError(
            "comparisons must be a (m, 2) integer tensor of indices into the "
            f"designs (n={n}); got indices from {mn} to {mx}."
        )
    self_loops = (comparisons[:, 0] == comparisons[:, 1]).nonzero().reshape(-1)
    if self_loops.numel():
        r = int(self_loops[0])
        raise InputDataError(
            "comparisons must compare two different designs; got row "
            f"{r} = {comparisons[r].tolist()} (and {self_loops.numel() - 1} more)."
        )
    return comparisons


def _components(adj: list[set[int]]) -> list[list[int]]:
    r"""Connected components by union-find with path halving."""
    parent = list(range(len(adj)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, nbrs in enumerate(adj):
        for j in nbrs:
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[int]] = {}
    for i in range(len(adj)):
        groups.setdefault(find(i), []).append(i)
    return [groups[r] for r in sorted(groups)]


def comparison_graph_summary(
    comparisons: Tensor, n: int, *, warn: bool = True
) -> ComparisonGraphSummary:
    r"""Summarise the comparison graph of pairwise answers.

    Args:
        comparisons: ``m x 2`` integer tensor of ``[winner, loser]`` indices
            into ``n`` designs (direction is ignored; repeats add weight).
            For a ``q``-option choice, pass its ``q - 1`` rows
            ``[winner, other]``.
        n: Number of designs.
        warn: Emit a :class:`ComparisonGraphWarning` listing the findings of
            :attr:`ComparisonGraphSummary.messages`, if any.

    Returns:
        A :class:`ComparisonGraphSummary`.

    Example:
        >>> s = comparison_graph_summary(torch.tensor([[0, 1], [2, 3]]), 4)
        >>> s.num_components, s.algebraic_connectivity
        (2, 0.0)
    """
    comparisons = _validate(comparisons, n)
    W = torch.zeros(n, n, dtype=torch.float64)  # n x n edge multiplicities
    if comparisons.shape[0]:
        ones = torch.ones(comparisons.shape[0], dtype=torch.float64)
        W.index_put_((comparisons[:, 0], comparisons[:, 1]), ones, accumulate=True)
        W = W + W.T
    degrees = W.sum(-1)
    laplacian = torch.diag(degrees) - W
    adj = [set(W[i].nonzero().reshape(-1).tolist()) for i in range(n)]
    components = _components(adj)
    labels = torch.empty(n, dtype=torch.long)
    for k, comp in enumerate(components):
        labels[comp] = k
    if n >= 2 and len(components) == 1:
        fiedler = float(torch.linalg.eigvalsh(laplacian)[1].clamp_min(0.0))
    else:
        fiedler = 0.0
    stars = []
    for comp in components:
        if len(comp) < STAR_MIN_LEAVES + 1:
            continue
        hub = max(comp, key=lambda i: len(adj[i]))
        if len(adj[hub]) == len(comp) - 1 and all(
            adj[i] == {hub} for i in comp if i != hub
        ):
            stars.append(hub)
    summary = ComparisonGraphSummary(
        n=n,
        num_comparisons=int(comparisons.shape[0]),
        components=components,
        labels=labels,
        degrees=degrees.round().long(),
        laplacian=laplacian,
        algebraic_connectivity=fiedler,
        isolated=[c[0] for c in components if len(c) == 1],
        star_centers=stars,
    )
    if warn and summary.messages:
        warnings.warn(
            "comparison graph: " + " ".join(summary.messages),
            ComparisonGraphWarning,
            stacklevel=2,
        )
    return summary
