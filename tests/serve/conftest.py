import pytest

from prefbo.serve.config import study_from_dict
from prefbo.serve.store import Store

SPACE = [
    {"name": "sweetness", "type": "continuous", "lower": 0.0, "upper": 10.0},
    {"name": "size", "type": "integer", "lower": 1, "upper": 5},
]


@pytest.fixture
def make_config(tmp_path):
    def make(**fields):
        data = {"space": SPACE, "answers_per_participant": 4, **fields}
        return study_from_dict(data, root=tmp_path, name="study.toml")

    return make


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'study.db'}")
    yield s
    s.engine.dispose()
