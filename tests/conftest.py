import pytest
import torch

from prefbo.utils.testing import test_configurations

CONFIGS = test_configurations()


@pytest.fixture(params=CONFIGS, ids=[f"{d.type}-{str(t)[6:]}" for d, t in CONFIGS])
def tkwargs(request):
    device, dtype = request.param
    return {"device": device, "dtype": dtype}


@pytest.fixture(
    params=[c for c in CONFIGS if c[1] == torch.float64],
    ids=[d.type for d, t in CONFIGS if t == torch.float64],
)
def tkwargs64(request):
    device, dtype = request.param
    return {"device": device, "dtype": dtype}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
