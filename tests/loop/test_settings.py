"""``prefbo.loop.settings``: the loop's settings, frozen and versioned, and the
log headers of every layout prefbo has written read back as they were meant."""

import dataclasses

import pytest
import torch

from prefbo.exceptions import (
    InputDataError,
    InputTypeError,
    SessionLogError,
    SettingsVersionError,
    UnsupportedError,
)
from prefbo.loop.optimizer import PreferentialOptimizer
from prefbo.loop.options import SCIPY_FTOL
from prefbo.loop.session import encode_record, read_session_log
from prefbo.loop.settings import (
    SETTINGS_VERSION,
    LoopSettings,
    migrate,
    settings_from,
)
from prefbo.space import Categorical, Continuous, Space

BOUNDS = [[0.0, -1.0], [1.0, 2.0]]

#: What every setting added after layout 1's first headers becomes when a
#: header lacks it: the behaviour the log was written with.
WRITTEN_WITH = {
    "warm_start_fits": False,
    "unit_cube": False,
    "avoid_resolved": False,
    "boundary_step": None,
    "fit_options": {"maxfun": 15000, "ftol": SCIPY_FTOL},
}


def _layout(settings, drop=(), drop_acqf=()):
    r"""``settings``' header as an older layout wrote it: without ``version``,
    the settings in ``drop`` and the acquisition options in ``drop_acqf``."""
    config = settings.to_dict()
    for key in ("version", *drop):
        del config[key]
    for key in drop_acqf:
        del config["acqf_options"][key]
    return config


# layout 1's headers as prefbo wrote them, oldest first: each later one has
# the settings added since (and the current layout less its version)
LAYOUTS = {
    "first": (
        ("warm_start_fits", "fit_options", "unit_cube", "avoid_resolved")
        + ("boundary_step",),
        ("optimizer", "ftol"),
    ),
    "warm starts": (("unit_cube", "avoid_resolved", "boundary_step"), ("ftol",)),
    "tolerances": (("unit_cube", "avoid_resolved", "boundary_step"), ()),
    "repeat rule": (("boundary_step",), ()),
    "boundary step": ((), ()),
}


def test_the_settings_round_trip_through_the_header_with_their_version():
    space = Space([Continuous("x", 0, 2), Categorical("c", ["a", "b", "c"])])
    for bounds in (BOUNDS, space):
        settings = LoopSettings(bounds, strategy="random", q=3, seed=2**64 - 1)
        header = settings.to_dict()
        assert header["version"] == SETTINGS_VERSION == settings.version == 2
        assert LoopSettings.from_dict(header) == settings
        assert PreferentialOptimizer(settings=settings).config == header
    assert LoopSettings(BOUNDS) != LoopSettings(BOUNDS, seed=1)
    assert LoopSettings(BOUNDS) != BOUNDS


def test_the_settings_are_checked_kept_normalised_and_frozen():
    given = torch.tensor(BOUNDS)  # float32
    settings = LoopSettings(given, acqf_options={"maxiter": 5}, boundary_step=0.25)
    assert settings.bounds.dtype == torch.float64
    given[0, 0] = 0.5  # a copy: the settings do not move
    assert settings.bounds[0, 0] == 0.0
    assert settings.acqf_options["maxiter"] == 5
    assert settings.acqf_options["num_restarts"] == 4  # the defaults filled in
    assert settings.fit_options == {"maxfun": 30, "ftol": 1e-6}
    assert settings.space is None and torch.equal(settings.box, settings.bounds)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.q = 3
    with pytest.raises(InputDataError, match=r"q must be an int >= 2; got q=1\."):
        dataclasses.replace(settings, q=1)  # checked again
    with pytest.raises(InputTypeError, match=r"unit_cube must be a bool; got"):
        LoopSettings(BOUNDS, unit_cube=1)
    with pytest.raises(UnsupportedError, match=r"eubo"):
        LoopSettings(BOUNDS, q=3)
    with pytest.raises(TypeError, match=r"version"):
        LoopSettings(BOUNDS, version=1)  # written by the object, never given


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_older_header_layout_reads_as_the_behaviour_it_was_written_with(
    layout,
):
    drop, drop_acqf = LAYOUTS[layout]
    current = LoopSettings(BOUNDS, seed=4, acqf_options={"raw_samples": 64})
    old = _layout(current, drop, drop_acqf)
    copy = {k: (dict(v) if isinstance(v, dict) else v) for k, v in old.items()}
    migrated = migrate(old)
    assert old == copy  # not edited
    assert migrated["version"] == SETTINGS_VERSION
    settings = LoopSettings.from_dict(old)
    for key in drop:
        assert getattr(settings, key) == WRITTEN_WITH[key]
    for key in set(WRITTEN_WITH) - set(drop):
        assert getattr(settings, key) == getattr(current, key)
    acqf = settings.acqf_options
    assert acqf["raw_samples"] == 64 and acqf["optimizer"] == "scipy"
    assert acqf["ftol"] == (None if "ftol" in drop_acqf else 1e-6)
    if "fit_options" not in drop and layout != "first":
        assert settings.fit_options == {"maxfun": 30, "ftol": 1e-6}


def test_a_header_with_only_its_fit_cap_gets_scipys_tolerance():
    # written after the refits' cap and before their tolerance
    old = _layout(LoopSettings(BOUNDS), ("unit_cube",), ("ftol",))
    old["fit_options"] = {"maxfun": 30}
    assert LoopSettings.from_dict(old).fit_options == {
        "maxfun": 30,
        "ftol": SCIPY_FTOL,
    }


def test_a_log_of_the_first_layout_resumes_asking_what_its_writer_asks(
    tmp_path, ask_and_tell
):
    # the writer runs with the behaviour of the first layout's days; its
    # header is then cut to that layout: resumed, it asks the same
    path = tmp_path / "old.jsonl"
    acqf = {"num_restarts": 2, "raw_samples": 32, "ftol": None}
    writer = PreferentialOptimizer(
        BOUNDS, model="laplace", seed=5, log_path=path, acqf_options=acqf,
        **{**WRITTEN_WITH, "fit_options": {"maxfun": 15000, "ftol": SCIPY_FTOL}},
    )  # fmt: skip
    ask_and_tell(writer, [0, 1, 1])
    header, _ = read_session_log(path)
    drop, drop_acqf = LAYOUTS["first"]
    header["config"] = _layout(writer.settings, drop, drop_acqf)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(encode_record(header) + "".join(lines[1:]))
    writer.close()
    resumed = PreferentialOptimizer.resume(path, warm_start_fits=False)
    assert resumed.settings == writer.settings
    assert torch.equal(resumed.ask(), writer.ask())


@pytest.mark.parametrize(
    "version, match",
    [
        (3, r"config version 3 is newer than this prefbo reads \(settings versions "),
        (0, r"config version must be an int >= 1 .*got int 0"),
        ("2", r"config version must be an int >= 1 .*got str"),
        (True, r"config version must be an int >= 1 .*got bool"),
    ],
)
def test_a_layout_this_prefbo_cannot_read_is_named(tmp_path, version, match):
    config = LoopSettings(BOUNDS).to_dict()
    config["version"] = version
    with pytest.raises(SettingsVersionError, match=match):
        LoopSettings.from_dict(config)
    path = tmp_path / "s.jsonl"
    PreferentialOptimizer(BOUNDS, strategy="random", log_path=path).close()
    header, _ = read_session_log(path)
    header["config"]["version"] = version
    path.write_text(encode_record(header))
    with pytest.raises(SessionLogError, match=r"line 1 \(header\) .*" + match):
        PreferentialOptimizer.resume(path)


def test_from_dict_names_what_a_header_lacks_or_adds():
    with pytest.raises(InputDataError, match=r"config must be a dict .*got list"):
        LoopSettings.from_dict([1, 2])
    with pytest.raises(InputDataError, match=r"config has no setting 'bounds'"):
        LoopSettings.from_dict({"seed": 1})
    with pytest.raises(InputDataError, match=r"unknown key\(s\) \['colour'\]"):
        LoopSettings.from_dict({"bounds": BOUNDS, "colour": "red"})
    # layout 1 grew over time: what it lacks has its default; layout 2
    # holds every setting
    assert LoopSettings.from_dict({"bounds": BOUNDS, "seed": 0}).q == 2
    with pytest.raises(InputDataError, match=r"no setting 'model' \(a header of"):
        LoopSettings.from_dict({"bounds": BOUNDS, "version": 2})


def test_the_optimizer_takes_its_settings_whole_or_as_arguments():
    settings = LoopSettings(BOUNDS, strategy="random", seed=3, q=3)
    opt = PreferentialOptimizer(settings=settings)
    assert opt.settings is settings and opt.q == 3 and opt.seed == 3
    same = PreferentialOptimizer(BOUNDS, strategy="random", seed=3, q=3)
    assert same.settings == settings
    assert torch.equal(opt.ask(), same.ask())
    with pytest.raises(AttributeError):
        opt.q = 2  # the settings are read-only
    with pytest.raises(InputDataError, match=r"got also bounds, q\.$"):
        PreferentialOptimizer(BOUNDS, q=3, settings=settings)
    with pytest.raises(InputTypeError, match=r"settings must be a LoopSettings or"):
        PreferentialOptimizer(settings=settings.to_dict())
    given = {"bounds": None, "model": "ep"}
    assert settings_from(given, settings) is settings
