"""Suppression comments, [tool.dslint] settings, and the isolation of a crashing rule."""


from dslint.config import Settings, load_settings
from dslint.engine import Checker, check_texts
from dslint.findings import Severity
from dslint.rules.base import Diagnostic, Rule
from dslint.suppressions import parse_suppressions

BROKEN = "x = (\n"


def test_same_line_and_line_above():
    s = parse_suppressions("a()  # dslint: ignore[DSL101]\n# dslint: ignore[DSL102, dsl103]\nb()\nc()\n", "python")
    assert s.covers("DSL101", 1) and not s.covers("DSL102", 1)
    assert s.covers("DSL102", 3) and s.covers("DSL103", 3) and not s.covers("DSL101", 3)
    assert not s.covers("DSL102", 4)


def test_trailing_comment_does_not_cover_the_next_line():
    s = parse_suppressions("a()  # dslint: ignore[DSL101]\nb()\n", "python")
    assert not s.covers("DSL101", 2)


def test_bare_ignore_and_file_level():
    s = parse_suppressions("# dslint: ignore-file[DSL302]\nx = 1  # dslint: ignore\n", "python")
    assert s.covers("DSL302", 40) and s.covers("DSL999", 2) and not s.covers("DSL101", 40)


def test_directive_inside_a_string_is_not_a_suppression():
    s = parse_suppressions('x = "# dslint: ignore-file"\n', "python")
    assert not s.covers("DSL101", 1)


def test_select_ignore_prefixes():
    s = Settings(select=["DSL1", "DSL203"], ignore=["DSL104"])
    assert s.code_enabled("DSL101") and s.code_enabled("DSL203")
    assert not s.code_enabled("DSL104") and not s.code_enabled("DSL202")


def test_pyproject_discovered_upward(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.dslint]\nworld-size = 8\nfail-level = "error"\nignore = ["dsl302"]\n'
        '[tool.dslint.per-file-ignores]\n"tests/*" = ["DSL101"]\n')
    (tmp_path / "src" / "deep").mkdir(parents=True)
    settings = load_settings(None, [tmp_path / "src" / "deep"])
    assert settings.world_size == 8 and settings.fail_level is Severity.ERROR and settings.ignore == ["DSL302"]
    assert settings.ignored_for(str(tmp_path / "tests" / "t.py")) == {"DSL101"}
    assert settings.ignored_for(str(tmp_path / "src" / "t.py")) == set()


def test_file_level_suppression_in_a_real_run():
    report = check_texts({"a.py": "# dslint: ignore-file[DSL001]\n" + BROKEN})
    assert report.findings == []
    report = check_texts({"a.py": "# dslint: ignore-file[DSL101]\n" + BROKEN})
    assert [f.code for f in report.findings] == ["DSL001"]


class _Crashing(Rule):
    code = "DSL998"
    name = "crashing"
    summary = "crashes"
    kinds = frozenset({"python"})

    def check(self, ctx):
        raise KeyError("boom")


class _Reporting(Rule):
    code = "DSL999"
    name = "reporting"
    summary = "reports every file"
    kinds = frozenset({"python"})

    def check(self, ctx):
        yield Diagnostic("seen", (1, 1))


def test_a_crashing_rule_does_not_lose_other_findings():
    from dslint.sources import PythonSource
    sources = [PythonSource("a.py", "x = 1\n"), PythonSource("b.py", "y = 2\n")]
    report = Checker(Settings(), [_Crashing(), _Reporting()]).check_sources(sources)
    assert [f.path for f in report.findings] == ["a.py", "b.py"]
    assert len(report.errors) == 2 and all("KeyError" in e.message and e.code == "DSL998" for e in report.errors)


def test_unused_suppressions_are_reported_only_when_selected():
    text = ("import torch.distributed as dist\n"
            "if dist.get_rank() == 0:\n"
            "    dist.barrier()  # dslint: ignore[DSL101]\n"
            "x = 1  # dslint: ignore[DSL102]\n"
            "# dslint: ignore[DSL999]\n"
            "y = 2\n")
    assert check_texts({"a.py": text}).findings == []
    report = check_texts({"a.py": text}, Settings(select=["DSL002", "DSL1"]))
    assert [(f.code, f.line) for f in report.findings] == [("DSL002", 4)]   # DSL999 never ran: not judged
    assert "DSL102" in report.findings[0].message


def test_select_dsl002_alone_judges_with_the_default_rules_and_reports_only_dsl002():
    """README: `--select DSL002` reports only the unused suppressions; the other rules run to judge them (a
    used `ignore[DSL101]` is not reported), their findings are not shown. An ignored family is not judged."""
    text = ("import torch.distributed as dist\n"
            "def save():\n"
            "    if dist.get_rank() == 0:\n"
            "        dist.barrier()  # dslint: ignore[DSL101]\n"
            "def load():\n"
            "    if dist.get_rank() == 0:\n"
            "        dist.all_reduce(t)\n"
            "x = 1  # dslint: ignore[DSL102]\n"
            '"""\n\n')      # an unterminated string: DSL001, also not shown
    assert [f.code for f in check_texts({"a.py": text.replace('"""\n\n', "")}).findings] == ["DSL101"]
    report = check_texts({"a.py": text.replace('"""\n\n', "")}, Settings(select=["DSL002"]))
    assert [(f.code, f.line) for f in report.findings] == [("DSL002", 8)]
    both = check_texts({"a.py": text.replace('"""\n\n', "")}, Settings(select=["DSL1", "DSL002"]))
    assert [(f.code, f.line) for f in both.findings] == [("DSL101", 7), ("DSL002", 8)]
    ignored = check_texts({"a.py": text.replace('"""\n\n', "")}, Settings(select=["DSL002"], ignore=["DSL1"]))
    assert ignored.findings == []
    broken = check_texts({"a.py": text}, Settings(select=["DSL002"]))
    assert [f.code for f in broken.findings] == []
