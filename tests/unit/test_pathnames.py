"""Paths the user gives, against the file system's limits: one line naming the option and the fix."""

from pai_launch.placement import pathnames


def test_a_name_longer_than_255_bytes_is_named_with_its_option_and_the_fix():
    long = "a" * 256
    found = pathnames.problem("--save-name", f"runs/{long}")
    assert found.startswith("--save-name runs/") and "is 256 bytes, more than a file name may be (255)" in found
    assert "give a shorter name" in found and len(found) < 300
    assert pathnames.problem("--save-name", "runs/" + "a" * 255) is None


def test_bytes_are_counted_not_characters():
    assert pathnames.problem("the script", "é" * 128 + ".py") is not None  # 256 bytes in UTF-8, 131 characters


def test_a_whole_path_past_path_max_is_refused():
    found = pathnames.problem("--log-dir", "/".join(["d" * 200] * 21))
    assert found is not None and "more than a path may be (4095)" in found
