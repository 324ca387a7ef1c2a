import os

import pytest

from prefbo.exceptions import InputDataError, InputTypeError, SessionLogLockedError
from prefbo.loop.study_folder import check_name, lock_folder


@pytest.mark.parametrize("name", ["ann", "p_0", "A.b-c", "9", "x" * 100])
def test_names_that_make_plain_file_names_pass(name):
    check_name(name)


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "../x", "a/b", "a b", "x" * 101])
def test_names_that_are_no_plain_file_name_are_refused(name):
    with pytest.raises(InputDataError, match=r"1-100 letters, digits"):
        check_name(name)


def test_a_name_must_be_a_str():
    with pytest.raises(InputTypeError, match=r"name must be a str; got int"):
        check_name(3)


def test_a_locked_folder_is_refused_until_its_lock_is_let_go(tmp_path):
    (tmp_path / "study.json").write_text("{}")
    fd = lock_folder(tmp_path)
    with pytest.raises(
        SessionLogLockedError, match=rf"\(pid {os.getpid()}, this process\)"
    ):
        lock_folder(tmp_path)
    os.close(fd)
    os.close(lock_folder(tmp_path))
