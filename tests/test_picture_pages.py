"""``show --html`` and ``eval report --html`` as a person types them, and the lines naming them."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.pricing import UsageTotals
from orchestrator.report import RunReport
from orchestrator.sessions import workdir_folder
from orchestrator.team.lead import AgentReport, TeamResult
from tests.picture_traces import RUN_ID, golden_copy


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)


def _invoke(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return done.exit_code, done.stdout, done.stderr


def _data(page: str) -> dict[str, object]:
    match = re.search(r'<script type="application/json" id="picture-data">(.*?)</script>', page)
    assert match is not None
    found: dict[str, object] = json.loads(match.group(1))
    return found


def test_the_page_goes_beside_the_trace_as_its_run_id(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    trace = golden_copy(tmp_path / "traces")
    code, out, err = _invoke("show", str(trace), "--html")
    page = trace.parent / f"{RUN_ID}.html"
    assert (code, out, err) == (0, f"{page}\n", "")
    data = _data(page.read_text(encoding="utf-8"))
    assert data["kind"] == "run" and data["columns"] == 14
    assert page.stat().st_mode & 0o077 == 0  # as private as the trace it shows


def test_out_may_be_a_file_a_folder_or_stdout(tmp_path: Path) -> None:
    trace = golden_copy(tmp_path)
    assert _invoke("show", str(trace), "--html", "mine.html") == (0, "mine.html\n", "")
    assert (tmp_path / "mine.html").is_file()
    (tmp_path / "pages").mkdir()
    code, out, _ = _invoke("show", str(trace), "--html", "pages")
    assert (code, out) == (0, f"pages/{RUN_ID}.html\n")
    code, out, err = _invoke("show", str(trace), "--html", "-")
    assert code == 0 and err == ""
    assert out.startswith("<!DOCTYPE html>") and out.endswith("</html>\n")
    assert _data(out)["columns"] == 14


def test_writing_again_replaces_the_page_whole(tmp_path: Path) -> None:
    trace = golden_copy(tmp_path)
    page = tmp_path / f"{RUN_ID}.html"
    assert _invoke("show", str(trace), "--html")[0] == 0
    first = page.read_text(encoding="utf-8")
    page.write_text(first + "<!-- an older, longer page -->" * 1000, encoding="utf-8")
    assert _invoke("show", str(trace), "--html")[0] == 0
    assert page.read_text(encoding="utf-8") == first
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []


def test_the_page_never_goes_where_its_trace_is(tmp_path: Path) -> None:
    """``show victim.jsonl --html victim.jsonl`` would turn the trace into its page."""
    folder = workdir_folder(tmp_path)
    folder.mkdir(parents=True)
    trace = golden_copy(folder, name=f"20260101T000000Z-{RUN_ID}.jsonl")
    before = trace.read_bytes()
    (tmp_path / "link.jsonl").symlink_to(trace)
    for args in (
        ["show", str(trace), "--html", str(trace)],
        ["show", "--last", "--html", str(trace)],
        ["show", RUN_ID, "--html", str(tmp_path / "link.jsonl")],  # a link to it is it too
        ["show", str(tmp_path / "link.jsonl"), "--html", str(trace)],
    ):
        code, out, err = _invoke(*args)
        assert (code, out) == (2, ""), args
        assert err.count("\n") == 1 and "which this page is drawn from" in err, err
        assert trace.read_bytes() == before
    assert (tmp_path / "link.jsonl").is_symlink()


def test_a_file_that_is_not_a_page_is_never_replaced(tmp_path: Path) -> None:
    trace = golden_copy(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("a week of notes\n", encoding="utf-8")
    code, out, err = _invoke("show", str(trace), "--html", str(notes))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.endswith(
        f"{notes}: exists and is not a page orchestrator wrote; remove it or choose another name\n"
    )
    assert notes.read_text(encoding="utf-8") == "a week of notes\n"
    # The default place too: something else there is not taken for an old page.
    page = tmp_path / f"{RUN_ID}.html"
    page.write_text("<!DOCTYPE html>\n<p>a page of my own</p>\n", encoding="utf-8")
    assert _invoke("show", str(trace), "--html")[0] == 2
    assert page.read_text(encoding="utf-8") == "<!DOCTYPE html>\n<p>a page of my own</p>\n"
    # An empty file is not a page either.
    (tmp_path / "empty.html").touch()
    assert _invoke("show", str(trace), "--html", "empty.html")[0] == 2


def test_a_name_ending_in_a_slash_is_a_folder(tmp_path: Path) -> None:
    trace = golden_copy(tmp_path)
    code, out, err = _invoke("show", str(trace), "--html", "newdir/")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "newdir/: no such directory" in err
    assert not (tmp_path / "newdir").exists()
    (tmp_path / "file").write_text("x", encoding="utf-8")
    code, _, err = _invoke("show", str(trace), "--html", "file/")
    assert code == 2 and "file/: not a folder" in err
    (tmp_path / "newdir").mkdir()
    assert _invoke("show", str(trace), "--html", "newdir/") == (0, f"newdir/{RUN_ID}.html\n", "")


def test_eval_report_html_never_replaces_its_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    rows = results / "results.jsonl"
    rows.write_text("\n", encoding="utf-8")  # no run yet: no plot to draw, so no matplotlib
    code, _, err = _invoke("eval", "report", str(results), "--html", str(rows))
    assert code == 2 and "which this page is drawn from" in err
    assert rows.read_text(encoding="utf-8") == "\n"


def test_a_link_in_the_page_s_place_is_replaced_never_followed(tmp_path: Path) -> None:
    trace = golden_copy(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    page = tmp_path / f"{RUN_ID}.html"
    page.symlink_to(elsewhere)  # planted where the page goes: a folder through a link
    assert _invoke("show", str(trace), "--html")[0] == 0
    assert list(elsewhere.iterdir()) == []
    assert not page.is_symlink() and page.read_text(encoding="utf-8").startswith("<!DOCTYPE")
    page.unlink()
    page.mkdir()  # a real folder there is said, not written into
    code, _, err = _invoke("show", str(trace), "--html")
    assert code == 2 and "a folder is in the page's place" in err and list(page.iterdir()) == []


def test_a_run_id_or_last_finds_the_session(tmp_path: Path) -> None:
    folder = workdir_folder(tmp_path)
    folder.mkdir(parents=True)
    trace = golden_copy(folder, name=f"20260101T000000Z-{RUN_ID}.jsonl")
    page = folder / f"{RUN_ID}.html"
    assert _invoke("show", RUN_ID, "--html") == (0, f"{page}\n", "")
    assert _invoke("show", "--html", RUN_ID) == (0, f"{page}\n", "")  # the value is the run
    page.unlink()
    assert _invoke("show", "--last", "--html") == (0, f"{page}\n", "")
    assert trace.is_file()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["show", "nosuchrun0", "--html"], "no such trace file or run id"),
        (["show", "not-a-trace.txt", "--html"], "not-a-trace.txt:1: not a JSON line"),
        (["show", "empty.jsonl", "--html"], "the trace is empty"),
        (["show", "demo.jsonl", "--html", "nowhere/page.html"], "no such directory nowhere"),
        (["show", "demo.jsonl", "--round", "3", "--html"], "--round and --full"),
    ],
)
def test_a_bad_trace_run_id_or_place_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], says: str
) -> None:
    golden_copy(tmp_path)
    (tmp_path / "not-a-trace.txt").write_text("hello\nworld\n", encoding="utf-8")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    code, out, err = _invoke(*args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and says in err, err
    assert not list(tmp_path.glob("*.html"))


def test_eval_report_html_inlines_the_plot_beside_the_tables(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    rows = [
        {
            "task": "t",
            "arm": arm,
            "repeat": i,
            "model": "m",
            "success": i < wins,
            "status": "done",
            "rounds": 3,
            "input_tokens": 10,
            "output_tokens": 5,
            "cost_usd": 0.01,
        }
        for arm, wins in (("board", 3), ("no-board", 1))
        for i in range(4)
    ]
    (results / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    code, out, err = _invoke("eval", "report", str(results), "--html")
    page = results / "report.html"
    assert (code, out) == (0, f"{page}\n"), err
    data = _data(page.read_text(encoding="utf-8"))
    summary = data["summary"]
    assert isinstance(summary, dict) and summary["arms"]["board"]["successes"] == 3
    plot = data["plot"]
    assert isinstance(plot, str) and plot.startswith("data:image/png;base64,iVBORw0KGgo")
    assert _invoke("eval", "report", str(results), "--html", "--json")[0] == 2


def test_the_closing_line_names_the_run_by_id_where_that_finds_it(tmp_path: Path) -> None:
    folder = workdir_folder(tmp_path)
    folder.mkdir(parents=True)
    stored = folder / f"20260101T000000Z-{RUN_ID}.jsonl"
    stored.write_text("{}\n", encoding="utf-8")
    elsewhere = tmp_path / "my trace.jsonl"

    def report(trace: Path | None) -> RunReport:
        return RunReport("done", "", "", 1, UsageTotals(), "m", trace, (), 0, run_id=RUN_ID)

    assert report(stored).closing_lines()[-1] == f"picture: orchestrator show {RUN_ID} --html"
    quoted = shlex.quote(str(elsewhere))
    assert report(elsewhere).closing_lines()[-1] == f"picture: orchestrator show {quoted} --html"
    assert not any(line.startswith("picture:") for line in report(None).closing_lines())


def test_a_team_closes_with_the_lead_s_page_which_carries_the_board() -> None:
    lead = AgentReport("t1/lead", "done", (), 2, 10, None, ("/s/team/1/lead.jsonl",))
    worker = AgentReport("t1/worker-1", "done", ("1",), 3, 10, None, ("/s/team/1/w-1.jsonl",))
    result = TeamResult("t1", (lead, worker), (), (), "sqlite:///s/team/1/board.db", "ok", ())
    assert result.closing_lines()[-1] == "picture: orchestrator show /s/team/1/lead.jsonl --html"


def test_the_api_prints_the_picture_line_on_its_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from orchestrator import Agent
    from orchestrator.script import ScriptedModel, parse_script

    model = ScriptedModel(parse_script({"name": "api", "turns": [{"text": "done"}]}, source="t"))
    (tmp_path / "work").mkdir()
    trace = tmp_path / "api trace.jsonl"
    agent = Agent(client=model, workdir=tmp_path / "work", trace=trace, console=True)
    assert agent.run("say done").status == "done"
    quoted = shlex.quote(str(trace))
    assert f"picture: orchestrator show {quoted} --html\n" in capsys.readouterr().err
    silent = Agent(
        client=ScriptedModel(parse_script({"name": "api", "turns": [{"text": "x"}]}, source="t")),
        workdir=tmp_path / "work",
    )
    silent.run("again")
    assert "picture:" not in capsys.readouterr().err
