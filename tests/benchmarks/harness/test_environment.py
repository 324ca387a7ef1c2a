"""``benchmarks/harness/environment.py``: what a run ran on."""

from __future__ import annotations

import importlib.metadata
import os
import platform

import pytest

from benchmarks.harness import environment
from prefbo.utils.threads import describe


def test_the_machine_names_the_processor_and_its_cores():
    text = environment.machine()
    assert text.endswith(f", {os.cpu_count()} CPUs")
    assert text.startswith(platform.processor() or platform.machine())


def test_versions_are_pythons_then_the_named_distributions():
    found = environment.versions(("torch", "scipy"))
    assert list(found) == ["python", "torch", "scipy"]
    assert found["python"] == platform.python_version()
    assert found["scipy"] == importlib.metadata.version("scipy")
    assert list(environment.versions()) == ["python", *environment.VERSIONED]
    text = environment.versions_text(("torch",))
    assert text == f"Python {platform.python_version()}, torch {found['torch']}"
    both = environment.machine_and_versions(("torch",))
    assert both == f"{environment.machine()}; {text}"


def test_the_thread_variables_are_those_set(monkeypatch):
    for name in environment.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert environment.thread_variables() == {}
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PREFBO_THREADS", "")  # empty: not set
    assert environment.thread_variables() == {"OMP_NUM_THREADS": "1"}


def test_a_record_holds_the_machine_threads_versions_and_load():
    rec = environment.record()
    assert rec["machine"] == environment.machine()
    assert rec["threads"] == describe()
    assert rec["versions"] == environment.versions()
    assert rec["load"] is None or rec["load"] >= 0


def test_the_page_lines_of_a_stored_record_and_of_a_run_before_records():
    stored = {"machine": "m, 2 CPUs", "threads": "t", "versions": {"python": "3"}}
    assert environment.lines(stored) == [
        "- machine: m, 2 CPUs",
        "- threads: t",
        "- versions: python 3",
    ]
    assert environment.lines({"threads": "t"}) == [
        "- machine: not recorded",
        "- threads: t",
        "- versions: not recorded",
    ]
    here = environment.lines()
    assert here[1] == f"- threads: {describe()}"


def test_no_load_average_where_the_platform_has_none(monkeypatch):
    def missing() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", missing)
    assert environment.load_average() is None
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.25, 0.125))
    assert environment.load_average() == pytest.approx(0.5)


def test_without_thread_variables_is_the_environment_less_them(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("PREFBO_THREADS", "off")
    monkeypatch.setenv("PREFBO_TEST_MARK", "kept")
    env = environment.without_thread_variables()
    assert not set(environment.THREAD_VARIABLES) & set(env)
    assert env["PREFBO_TEST_MARK"] == "kept"
    assert set(env) | {"OMP_NUM_THREADS", "PREFBO_THREADS"} >= set(os.environ)
