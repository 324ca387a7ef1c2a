from collections import deque

import numpy as np
import pytest
import torch

from prefbo.data.graph import ComparisonGraphWarning, comparison_graph_summary
from prefbo.exceptions import InputDataError, InputTypeError


def _bfs_components(comparisons, n):
    adj = [[] for _ in range(n)]
    for w, l in comparisons.tolist():
        adj[w].append(l)
        adj[l].append(w)
    seen, comps = [False] * n, []
    for s in range(n):
        if seen[s]:
            continue
        seen[s], queue, comp = True, deque([s]), []
        while queue:
            i = queue.popleft()
            comp.append(i)
            for j in adj[i]:
                if not seen[j]:
                    seen[j] = True
                    queue.append(j)
        comps.append(sorted(comp))
    return comps


def _numpy_laplacian(comparisons, n):
    L = np.zeros((n, n))
    for w, l in comparisons.tolist():
        L[w, l] -= 1
        L[l, w] -= 1
        L[w, w] += 1
        L[l, l] += 1
    return L


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_match_bfs_and_numpy_eigenvalues(seed):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(2, 12, (1,), generator=g))
    m = int(torch.randint(1, 3 * n, (1,), generator=g))
    comps = torch.randint(0, n, (m, 2), generator=g)
    comps = comps[comps[:, 0] != comps[:, 1]]
    s = comparison_graph_summary(comps, n, warn=False)
    assert s.components == _bfs_components(comps, n)
    L = _numpy_laplacian(comps, n)
    np.testing.assert_allclose(s.laplacian.numpy(), L)
    np.testing.assert_array_equal(s.degrees.numpy(), np.diag(L))
    expected = np.sort(np.linalg.eigvalsh(L))[1] if len(s.components) == 1 else 0.0
    assert s.algebraic_connectivity == pytest.approx(max(expected, 0.0), abs=1e-10)
    for k, comp in enumerate(s.components):
        assert (s.labels[comp] == k).all()


def test_multiplicity_counts_in_the_weighted_laplacian():
    # path 0-1-2 with the first answer repeated 3 times (both directions)
    comps = torch.tensor([[0, 1], [1, 0], [0, 1], [1, 2]])
    s = comparison_graph_summary(comps, 3, warn=False)
    assert s.degrees.tolist() == [3, 4, 1]
    lam = np.sort(np.linalg.eigvalsh(_numpy_laplacian(comps, 3)))
    assert s.algebraic_connectivity == pytest.approx(lam[1])
    # closed form for the weighted path a=3, b=1: λ2 = a + b - sqrt(a² - ab + b²)
    assert s.algebraic_connectivity == pytest.approx(4 - np.sqrt(7))


def test_complete_graph_connectivity_is_n():
    n = 5
    comps = torch.tensor([[i, j] for i in range(n) for j in range(i + 1, n)])
    with_no_warning = comparison_graph_summary(comps, n)
    assert with_no_warning.algebraic_connectivity == pytest.approx(n)
    assert with_no_warning.messages == []


def test_disconnected_isolated_and_star_are_flagged():
    # 0 is a hub of 1, 2, 3; 4 - 5 a separate pair; 6 isolated
    comps = torch.tensor([[0, 1], [0, 2], [3, 0], [4, 5]])
    with pytest.warns(ComparisonGraphWarning, match=r"into 3 groups") as rec:
        s = comparison_graph_summary(comps, 7)
    msg = str(rec[0].message)
    assert "ordered only through the kernel" in msg
    assert "appear in no answer: [6]" in msg
    assert "star-shaped group(s) around design(s) [0]" in msg
    assert s.num_components == 3 and s.isolated == [6] and s.star_centers == [0]
    assert s.algebraic_connectivity == 0.0


def test_empty_comparisons():
    s = comparison_graph_summary(torch.empty(0, 2, dtype=torch.long), 2, warn=False)
    assert s.components == [[0], [1]] and s.isolated == [0, 1]


@pytest.mark.parametrize(
    "comps, match",
    [
        (torch.tensor([[0.0, 1.0]]), r"\(m, 2\) integer tensor .*float"),
        (torch.tensor([[0, 3]]), r"\(n=3\); got indices from 0 to 3"),
        (torch.tensor([[1, 1]]), r"two different designs; got row 0 = \[1, 1\]"),
        (torch.tensor([0, 1]), r"got tuple\(comparisons.shape\)=\(2,\)"),
    ],
)
def test_bad_comparisons_are_named(comps, match):
    with pytest.raises(InputDataError, match=match):
        comparison_graph_summary(comps, 3)


def test_bad_number_of_designs_is_named():
    comps = torch.tensor([[0, 1]])
    with pytest.raises(InputDataError, match=r"n must be an int >= 0; got n=-1\."):
        comparison_graph_summary(comps, -1)
    with pytest.raises(InputTypeError, match=r"n must be an int >= 0; got float 3\.0"):
        comparison_graph_summary(comps, 3.0)
