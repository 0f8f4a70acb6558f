"""Every Python the package admits (issue 32, part 4): a user's code is parsed without CPython's warnings about
it reaching dslint's stderr, and TOML is read through `dslint.toml` (`tomllib`, or `tomli` before 3.11). The
other interpreters themselves are exercised by `.ci/run`'s smoke test (tools/smoke_versions.py)."""

import ast
import subprocess
import sys
import warnings

from dslint.sources.astsplice import compile_ast

# invalid escape sequences: a SyntaxWarning from CPython 3.12 on, a DeprecationWarning on 3.11 (shown with -W)
ESCAPES = 'import re\nPATTERN = re.compile("\\d+\\s")\nPATH = "C:\\q"\n'


def test_compile_ast_emits_no_warning():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tree = compile_ast(ESCAPES, "user.py")
    assert isinstance(tree, ast.Module) and len(tree.body) == 3
    assert not [w for w in seen if "escape" in str(w.message)], [str(w.message) for w in seen]
    # the warnings filters are the caller's again afterwards
    with warnings.catch_warnings(record=True) as after:
        warnings.simplefilter("always")
        compile(ESCAPES, "user.py", "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    assert [w for w in after if "escape" in str(w.message)]


def test_check_prints_no_warning_about_user_code(tmp_path, dslint_cli):
    """End to end, with every warning shown (`-W always`): the outline, the role analysis, DSL001's syntax
    check and the fixes' re-parse all go through `compile_ast`."""
    (tmp_path / "train.py").write_text(ESCAPES)
    (tmp_path / "broken.py").write_text(ESCAPES + "def bad(:\n    pass\n")
    env = {"PYTHONWARNINGS": "always"}
    out = dslint_cli("check", "--no-cache", "train.py", "broken.py", cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stderr                       # broken.py's DSL001
    assert "broken.py:4:" in out.stdout
    assert "Warning" not in out.stderr and "escape" not in out.stderr, out.stderr
    diff = dslint_cli("check", "--diff", "train.py", cwd=tmp_path, env=env)
    assert "Warning" not in diff.stderr, diff.stderr


def test_toml_reader_is_the_standard_one():
    from dslint import toml
    if sys.version_info >= (3, 11):
        import tomllib
        assert toml.loads is tomllib.loads and toml.TOMLDecodeError is tomllib.TOMLDecodeError
    else:                                                        # pragma: no cover - 3.10
        import tomli
        assert toml.loads is tomli.loads
    assert toml.loads('[tool.dslint]\nworld-size = 8\n') == {"tool": {"dslint": {"world-size": 8}}}


def test_tomli_is_a_dependency_where_tomllib_is_missing():
    from dslint import toml
    text = open(__file__.rsplit("/tests/", 1)[0] + "/pyproject.toml", encoding="utf-8").read()
    project = toml.loads(text)["project"]
    assert project["requires-python"] == ">=3.10"
    assert any(d.replace(" ", "").startswith("tomli>=") and "python_version<'3.11'" in d.replace(" ", "")
               for d in project["dependencies"])
    # and nothing in dslint imports tomllib but dslint/toml.py
    import pathlib
    root = pathlib.Path(toml.__file__).parent
    users = [p.relative_to(root).as_posix() for p in root.rglob("*.py")
             if "import tomllib" in p.read_text(encoding="utf-8") or "from tomllib" in p.read_text(encoding="utf-8")]
    assert users == ["toml.py"]


def test_pyproject_read_on_this_python(tmp_path, dslint_cli):
    """A folder with a pyproject.toml (the 3.10 crash of issue 32): settings and the DeepSpeed pin are read."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["deepspeed==0.14.0"]\n'
                                             '[tool.dslint]\nworld-size = 4\n')
    (tmp_path / "train.py").write_text("print(1)\n")
    out = dslint_cli("check", "--format", "json", ".", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    import json
    settings = json.loads(out.stdout)["settings"]
    assert settings["deepspeed_version"].startswith("0.14"), settings
