"""Suites: the bundled one, inline files and folders, and refusals that name the field."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from orchestrator.eval.runner import CHECK_OUTPUT_LIMIT, run_check
from orchestrator.eval.suite import (
    MAX_SUITE_BYTES,
    MAX_TASK_BYTES,
    SuiteError,
    bundled_suite_path,
    load_suite,
)


def test_the_bundled_suite_has_six_multi_step_tasks_with_checks_and_steps() -> None:
    suite = load_suite(bundled_suite_path())
    assert suite.name == "bundled"
    assert len(suite.tasks) == 6
    assert suite.arms == ("board", "no-board")
    for task in suite.tasks:
        assert task.check and task.prompt and task.check_files
        assert len(task.steps) >= 4
    split = next(task for task in suite.tasks if task.name == "split-module")
    assert set(split.files) == {"app.py", "prices.txt"}  # read from the folder beside the suite


def test_every_bundled_check_fails_before_the_work_is_done(tmp_path: Path) -> None:
    for task in load_suite(bundled_suite_path()).tasks:
        workdir = tmp_path / task.name
        for name, content in {**task.files, **task.check_files}.items():
            (workdir / name).parent.mkdir(parents=True, exist_ok=True)
            (workdir / name).write_text(content, encoding="utf-8")
        code, output = run_check(task.check, workdir, task.check_timeout)
        assert code != 0, f"{task.name}: the check passes on the untouched files: {output}"


def test_a_check_that_hangs_is_killed_and_fails(tmp_path: Path) -> None:
    code, output = run_check("sleep 30", tmp_path, 0.3)
    assert code == 124
    assert "timed out after 0.3s" in output


def test_a_check_is_judged_by_its_exit_though_a_process_it_left_holds_its_output(
    tmp_path: Path,
) -> None:
    # The detached sleep keeps the output pipe open long after the check has passed.
    code, output = run_check("setsid sleep 5 & echo passed", tmp_path, 2)
    assert (code, output) == (0, "passed\n")


def test_a_check_that_prints_without_end_keeps_only_the_tail(tmp_path: Path) -> None:
    code, output = run_check("yes", tmp_path, 0.5)
    assert code == 124
    assert len(output) == CHECK_OUTPUT_LIMIT
    assert output.endswith("y\n\n[check timed out after 0.5s]")


def test_python_in_a_check_is_the_running_interpreter(tmp_path: Path) -> None:
    code, output = run_check("python -c 'import sys; print(sys.executable)'", tmp_path, 10)
    assert code == 0
    assert os.path.dirname(output.strip()) == os.path.dirname(sys.executable)


def _write_suite(folder: Path, text: str) -> Path:
    path = folder / "suite.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_inline_files_win_over_the_folder_and_defaults_apply(tmp_path: Path) -> None:
    (tmp_path / "start" / "pkg").mkdir(parents=True)
    (tmp_path / "start" / "pkg" / "a.py").write_text("A = 1\n")
    (tmp_path / "start" / "b.txt").write_text("from the folder\n")
    path = _write_suite(
        tmp_path,
        'max_rounds = 7\n[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "true"\n'
        'files_from = "start"\ntags = ["x"]\n[tasks.files]\n"b.txt" = "inline"\n',
    )
    suite = load_suite(path)
    task = suite.tasks[0]
    assert task.files == {"pkg/a.py": "A = 1\n", "b.txt": "inline"}
    assert task.max_rounds == 7
    assert task.tags == ("x",)
    assert suite.name == "suite"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[[tasks]]\nname = "t"\nprompt = "p"\n', r"task 1 \(t\): check must be a non-empty"),
        ('[[tasks]]\nname = "a b"\nprompt = "p"\ncheck = "c"\n', "name must be 1-64 letters"),
        (
            '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\n[tasks.files]\n"../x" = "y"\n',
            "'../x' must be a relative path without '..'",
        ),
        (
            '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\n[tasks.files]\n"./" = "y"\n',
            "'./' must be a relative path without '..', naming a file",
        ),
        (
            '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\n[tasks.files]\n"a" = "y"\n'
            '[tasks.check_files]\n"a/b.py" = "z"\n',
            "'a' is a file, so 'a/b.py' cannot be inside it",
        ),
        (
            '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\nfiles_from = "missing"\n',
            "is not a folder",
        ),
        ('[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\ncolour = 1\n', "colour is not a known"),
        ('arms = ["nope"]\n[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\n', "unknown arm"),
        ("name = 'x'\n", "at least one"),
        ("[[tasks]\n", "not valid TOML"),
        (
            'check_timeout = inf\n[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\n',
            "check_timeout must be a finite number of seconds above 0, got inf",
        ),
        (
            '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\ncheck_timeout = nan\n',
            "check_timeout must be a finite number of seconds above 0, got nan",
        ),
        (
            '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\nmax_rounds = 0\n',
            "max_rounds must be a whole number of at least 1, got 0",
        ),
        (
            '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\n[[tasks.steps]]\ntool = "bash"\n',
            "step 1: title must be",
        ),
    ],
)
def test_a_bad_suite_is_refused_naming_the_field(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(SuiteError, match=message):
        load_suite(_write_suite(tmp_path, body))


def test_two_tasks_with_one_name_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    task = '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\n'
    with pytest.raises(SuiteError, match="name 't' is used twice"):
        load_suite(_write_suite(tmp_path, task + task))
    with pytest.raises(SuiteError, match="no such suite file"):
        load_suite(tmp_path / "absent.toml")


def test_select_keeps_the_named_tasks_and_refuses_unknown_ones() -> None:
    suite = load_suite(bundled_suite_path())
    assert [t.name for t in suite.select(("split-module", "refactor-hello")).tasks] == [
        "refactor-hello",
        "split-module",
    ]
    with pytest.raises(SuiteError, match="no task named 'nope'"):
        suite.select(("nope",))


def test_a_folder_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    (tmp_path / "start").mkdir()
    with (tmp_path / "start" / "disk.img").open("wb") as image:
        image.truncate(MAX_TASK_BYTES + 1)  # sparse: costs no disk, and would cost memory
    body = '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\nfiles_from = "start"\n'
    with pytest.raises(SuiteError, match=r"disk\.img takes the folder over the"):
        load_suite(_write_suite(tmp_path, body))


def test_links_in_the_folder_are_not_followed_out_of_it(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    (tmp_path / "start" / "sub").mkdir(parents=True)
    (tmp_path / "start" / "sub" / "kept.txt").write_text("kept\n")
    (tmp_path / "start" / "linked").symlink_to(tmp_path / "outside")
    (tmp_path / "start" / "secret.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    body = '[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "c"\nfiles_from = "start"\n'
    assert load_suite(_write_suite(tmp_path, body)).tasks[0].files == {"sub/kept.txt": "kept\n"}


def test_a_suite_that_is_a_device_or_too_big_is_refused_unread(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="/dev/zero: not a regular file"):
        load_suite(Path("/dev/zero"))
    big = tmp_path / "big.toml"
    with big.open("wb") as stream:
        stream.truncate(MAX_SUITE_BYTES + 1)  # sparse
    with pytest.raises(SuiteError, match="over the 67108864 bytes a suite file may hold"):
        load_suite(big)
