import os

import pytest
from sqlalchemy import create_engine

from prefbo.serve.config import study_from_dict
from prefbo.serve.schema import metadata
from prefbo.serve.store import Store

SPACE = [
    {"name": "sweetness", "type": "continuous", "lower": 0.0, "upper": 10.0},
    {"name": "size", "type": "integer", "lower": 1, "upper": 5},
]

# an SQLAlchemy URL of an empty PostgreSQL database the tests may fill and
# drop (.ci/run starts one): the store's tests then run on it too
POSTGRES = os.environ.get("PREFBO_TEST_POSTGRES")


@pytest.fixture
def make_config(tmp_path):
    def make(**fields):
        # the exact population kind unless a test names another: most tests
        # here are of the serving around the model, pinned to one kind
        model = {"kind": "population", **fields.pop("model", {})}
        data = {"space": SPACE, "answers_per_participant": 4, "model": model, **fields}
        return study_from_dict(data, root=tmp_path, name="study.toml")

    return make


def _drop_all(url):
    engine = create_engine(url)
    metadata.drop_all(engine)
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'study.db'}"
    elif POSTGRES is None:
        pytest.skip("PREFBO_TEST_POSTGRES names no PostgreSQL database")
    else:
        url = POSTGRES
        _drop_all(url)
    s = Store(url)
    yield s
    s.engine.dispose()
    if request.param == "postgresql":
        _drop_all(url)
