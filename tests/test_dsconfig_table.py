"""The generated DeepSpeed config table (dslint/dsconfig/schemas.json, from dslint/dsconfig/gen_schemas.py):

- it is package data and loads through importlib.resources;
- it is consistent with itself (ranges ordered and disjoint, every section's parent has the key, types in the
  grammar, each release's models build);
- the generator reads small synthetic DeepSpeed-like trees (tests/fixtures/dsconfig_gen) right — no mirror needed;
- where the DeepSpeed mirror is present, every release of the committed table equals what the generator reads
  from that release's sources (skipped, saying why, when the mirror or the installed release is absent)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dslint.dsconfig import gen_schemas, table
from dslint.dsconfig.base import field_for, keys_of, section_type
from dslint.dsconfig.check import analyse

GEN = Path(__file__).parent / "fixtures" / "dsconfig_gen"
ROOT = Path(__file__).resolve().parent.parent

# ------------------------------------------------------------------------------------------- package data


def test_table_is_package_data(tmp_path):
    from importlib.resources import files
    assert files("dslint.dsconfig").joinpath("schemas.json").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"dsconfig/schemas.json"' in pyproject


def test_table_loads_from_an_installed_copy(tmp_path):
    """An installed wheel holds the package files only: copy dslint (sources + package data, as the wheel's
    `packages.find` + `package-data` select them) elsewhere and load the table from there."""
    import shutil
    target = tmp_path / "site"
    shutil.copytree(ROOT / "dslint", target / "dslint",
                    ignore=lambda d, names: [n for n in names if n == "__pycache__"])
    code = ("import dslint.dsconfig.table as t, sys; assert t.__file__.startswith(sys.argv[1]), t.__file__; "
            "print(len(t.releases()), t.release_for('0.10.0'), t.release_for(None))")
    out = subprocess.run([sys.executable, "-c", code, str(target)], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(target)})
    assert out.returncode == 0, out.stderr
    n, first, newest = out.stdout.split()
    assert int(n) == len(table.releases()) and first == "0.10.0" and newest == table.releases()[-1]


def test_table_is_in_the_built_wheel(tmp_path):
    """The wheel pyproject.toml builds carries schemas.json, and the table loads from the unpacked wheel."""
    import zipfile
    import shutil
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools in this environment")
    src = tmp_path / "src"            # a copy: the build leaves build/ and *.egg-info beside pyproject.toml
    shutil.copytree(ROOT / "dslint", src / "dslint", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                          "-q", "-w", str(tmp_path / "whl")], capture_output=True, text=True, timeout=280)
    if out.returncode != 0:
        pytest.skip(f"pip could not build the wheel here: {out.stderr[-300:]}")
    [wheel] = (tmp_path / "whl").glob("dslint-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert "dslint/dsconfig/schemas.json" in z.namelist()
        z.extractall(tmp_path / "site")
    code = ("import dslint.dsconfig.table as t, sys; assert t.__file__.startswith(sys.argv[1]), t.__file__; "
            "print(len(t.releases()))")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "site")], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) == len(table.releases())


# ----------------------------------------------------------------------------------------- self-consistency

def test_release_for_picks_the_nearest_release_at_or_below_the_pin():
    releases = table.releases()
    assert releases[0] == "0.10.0"
    assert table.release_for("0.10.0") == "0.10.0"
    assert table.release_for("0.14.0.post1") == "0.14.0"
    assert table.release_for("0.16.10") == max((r for r in releases if r.startswith("0.16.")), key=table.vtuple)
    assert table.release_for(None) == releases[-1]
    assert table.release_for("99.0") == releases[-1]      # newer than the table: its newest release
    assert table.release_for("0.9.5") == releases[0]      # older than the table: its oldest release


TYPE_HEADS = {"list", "lit", "enum", "union"}
SCALARS = {"bool", "int", "float", "str", "none", "dict", "any", "read", "section"}


def _valid_type(t) -> bool:
    if isinstance(t, str):
        return t in SCALARS
    if not isinstance(t, list) or not t or t[0] not in TYPE_HEADS:
        return False
    if t[0] == "list":
        return _valid_type(t[1])
    if t[0] == "union":
        return all(_valid_type(m) for m in t[1])
    return isinstance(t[1], list)


def test_table_is_consistent():
    data = table.table()
    versions = data["versions"]
    assert versions == sorted(versions, key=table.vtuple) and len(set(versions)) == len(versions)
    assert set(data["sources"]) == set(versions)
    index = {v: i for i, v in enumerate(versions)}
    # pydantic majors cover every release once
    covered = [v for run in data["pydantic"] for v in versions[index[run["from"]]:index[run["to"]] + 1]]
    assert covered == versions
    for path, runs in data["sections"].items():
        last = -1
        for run in runs:
            assert index[run["from"]] <= index[run["to"]], path
            assert index[run["from"]] > last, f"{path}: runs overlap or are out of order"
            last = index[run["to"]]
            for key, entry in run["keys"].items():
                assert _valid_type(entry["type"]), (path, key, entry["type"])
        for a, b in zip(runs, runs[1:]):          # compact: adjacent equal schemas are one run
            if index[b["from"]] == index[a["to"]] + 1:
                strip = ("from", "to")
                assert {k: v for k, v in a.items() if k not in strip} != {k: v for k, v in b.items()
                                                                          if k not in strip}, path
    for release in versions:
        secs = table.sections_at(release)
        assert "" in secs, release
        for path in secs:
            if not path:
                continue
            parent, _, key = path.rpartition(".")
            assert parent in secs and key in secs[parent]["keys"], (release, path)
            assert secs[parent]["keys"][key].get("section"), (release, path)


def test_every_release_builds_its_models():
    for release in table.releases():
        root = table.root_model(release)
        assert {"train_batch_size", "zero_optimization", "fp16", "optimizer"} <= set(keys_of(root)), release
        zero = section_type(field_for(root, "zero_optimization")[1])
        assert zero.deepspeed_rejects_unknown and "stage" in keys_of(zero)


def test_facts_of_real_releases():
    """A few facts of DeepSpeed's history the table must hold (each checked in DeepSpeed's sources)."""
    def entry(release, path, key):
        return table.sections_at(release)[path]["keys"].get(key)
    # fp16 read with get_scalar_param up to 0.17.0 (any number, unknown keys ignored), DeepSpeedFP16Config
    # (runtime/precision_config.py, new in 0.17.1) from 0.17.1 on
    assert entry("0.17.0", "fp16", "min_loss_scale")["type"] == "read"
    assert not table.sections_at("0.10.0")["fp16"]["rejects_unknown"]
    assert entry("0.17.1", "fp16", "min_loss_scale")["type"] == "int"
    assert table.sections_at("0.17.1")["fp16"]["rejects_unknown"]
    # pydantic 1 until 0.14.x, 2 from 0.15.0
    assert table.pydantic_major("0.14.0") == 1 and table.pydantic_major("0.15.0") == 2
    # `compile.backend` read by a range of releases only
    assert table.key_history(("compile",), "backend") == [("0.13.2", "0.14.3")]
    # deprecations and aliases of DeepSpeedZeroConfig
    assert entry("0.19.5", "zero_optimization", "cpu_offload")["deprecated"] == "offload_optimizer"
    assert entry("0.19.5", "zero_optimization", "stage3_prefetch_bucket_size")["field"] == "prefetch_bucket_size"


# ------------------------------------------------------------------------------ the generator, synthetic trees

@pytest.fixture(scope="module")
def synthetic():
    return gen_schemas.build(None, [("0.1.0", str(GEN / "r1")), ("0.2.0", str(GEN / "r2"))])


def test_generator_reads_dict_get_and_pydantic_sections(synthetic):
    secs = synthetic["sections"]
    [r1, r2] = secs["fp16"]
    assert (r1["from"], r1["to"], r2["from"], r2["to"]) == ("0.1.0", "0.1.0", "0.2.0", "0.2.0")
    # r1: get_scalar_param through helper functions, constants from `from .constants import *`
    assert r1["keys"] == {"enabled": {"type": "read", "default": False},
                          "min_loss_scale": {"type": "read", "default": 1}}
    assert not r1["rejects_unknown"] and "model" not in r1
    # r2: DeepSpeedFP16Config(**param_dict.get(FP16, {}))
    assert r2["model"] == "DeepSpeedFP16Config" and r2["rejects_unknown"]
    assert r2["keys"]["min_loss_scale"] == {"type": "int", "default": 1}
    # the model's validators by name (knowledge.py applies its equivalents only where the model has them)
    assert r2["validators"] == ["_check_scale"] and "validators" not in r1
    assert [run["major"] for run in synthetic["pydantic"]] == [1, 2]


def test_generator_follows_nested_models_aliases_and_deprecations(synthetic):
    [zero] = synthetic["sections"]["zero_optimization"]           # the same in both releases: one run
    assert (zero["from"], zero["to"]) == ("0.1.0", "0.2.0")
    keys = zero["keys"]
    assert keys["stage"]["type"] == ["enum", [0, 1, 2, 3]]
    assert keys["reduce_bucket_size"] == {"type": "int", "ge": 0, "default": 500000000}
    assert keys["stage3_prefetch_bucket_size"]["field"] == "prefetch_bucket_size"
    assert keys["cpu_offload"]["deprecated"] == "offload_optimizer"
    assert keys["offload_optimizer"]["section"]
    [off] = synthetic["sections"]["zero_optimization.offload_optimizer"]
    assert off["keys"]["device"]["type"] == ["enum", ["none", "cpu"]] and off["rejects_unknown"]


def test_generator_records_added_dropped_removed_and_open_keys(synthetic):
    secs = synthetic["sections"]
    [c1, c2] = secs["compile"]
    assert "backend" in c1["keys"] and "backend" not in c2["keys"] and "deepcompile" in c2["keys"]
    [top1, top2] = secs[""]
    assert "removed" not in top1["keys"]["amp"]
    assert top2["keys"]["amp"]["removed"].startswith("Apex AMP has been removed")
    [amp] = secs["amp"]                      # copy.copy(param_dict[AMP]) handed on whole: its keys are open
    assert amp["open"] and amp["to"] == "0.1.0"
    assert secs["optimizer"][0]["keys"]["params"]["open"]      # optimizer.params goes to the optimizer


def test_generator_output_is_deterministic(synthetic):
    again = gen_schemas.build(None, [("0.1.0", str(GEN / "r1")), ("0.2.0", str(GEN / "r2"))])
    assert gen_schemas.dumps(again) == gen_schemas.dumps(synthetic)


def test_generator_command_writes_and_checks(tmp_path, capsys):
    out = tmp_path / "schemas.json"
    trees = ["--tree", f"0.1.0={GEN / 'r1'}", "--tree", f"0.2.0={GEN / 'r2'}"]
    assert gen_schemas.main(["--repo", "", *trees, "--out", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["versions"] == ["0.1.0", "0.2.0"]
    assert gen_schemas.main(["--repo", "", *trees, "--out", str(out), "--check", "--quiet"]) == 0
    out.write_text(out.read_text().replace('"min_loss_scale"', '"max_loss_scale"'))
    assert gen_schemas.main(["--repo", "", *trees, "--out", str(out), "--check", "--quiet"]) == 1


# ------------------------------------------------------------------------ the committed table = the sources

MIRROR = Path(gen_schemas.MIRROR)
RELEASES = table.releases()
TAGGED = [v for v in RELEASES if table.table()["sources"][v].startswith("tag ")]
TREES = [v for v in RELEASES if v not in TAGGED]


def _strip(sections: dict) -> dict:
    return {p: {k: v for k, v in s.items() if k not in ("from", "to")} for p, s in sections.items()}


@pytest.mark.parametrize("release", TAGGED)
def test_committed_table_matches_the_release_tag(release):
    if not MIRROR.is_dir():
        pytest.skip(f"the DeepSpeed mirror ({MIRROR}) is absent: the table cannot be regenerated here")
    tag = table.table()["sources"][release].split()[1]
    got = gen_schemas.analyse_release(gen_schemas.GitTree(str(MIRROR), tag))
    assert got["pydantic"] == table.pydantic_major(release)
    assert got["sections"] == _strip(table.sections_at(release))


def test_mirror_tags_are_all_in_the_table():
    if not MIRROR.is_dir():
        pytest.skip(f"the DeepSpeed mirror ({MIRROR}) is absent")
    assert [t[1:] for t in gen_schemas.release_tags(str(MIRROR))] == TAGGED


@pytest.mark.parametrize("release", TREES)
def test_committed_table_matches_the_installed_release(release):
    spec = importlib.util.find_spec("deepspeed")       # locates the package; nothing of it is imported
    if spec is None or not spec.origin:
        pytest.skip("no installed DeepSpeed to read the source tree of")
    from importlib.metadata import version
    if version("deepspeed") != release:
        pytest.skip(f"the installed DeepSpeed is {version('deepspeed')}, the table's tree release is {release}")
    root = Path(spec.origin).parent.parent
    got = gen_schemas.analyse_release(gen_schemas.DirTree(str(root)))
    assert got["sections"] == _strip(table.sections_at(release))


# ----------------------------------------------------------------------------------- judged at the release

def test_the_same_config_is_judged_per_release():
    cfg = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True, "min_loss_scale": 0.5}}
    assert analyse(cfg, version="0.10.0").problems == []
    assert analyse(cfg, version="0.17.0").problems == []
    [p] = analyse(cfg, version="0.19.5").of("invalid")
    assert p.path == ("fp16", "min_loss_scale") and "integer" in p.message


def test_a_key_read_by_other_releases_says_which():
    [p] = analyse({"compile": {"backend": "inductor"}}, version="0.19.5").of("unknown")
    assert p.path == ("compile", "backend") and p.deepspeed_fails
    assert "DeepSpeed 0.13.2–0.14.3 read it, 0.19.5 does not" in p.message
    assert analyse({"compile": {"backend": "inductor"}}, version="0.14.0").problems == []


def test_an_ignored_key_says_from_which_release_it_fails():
    [p] = analyse({"fp16": {"enabled": True, "opt_level": "O2"}}, version="0.10.1").of("unknown")
    assert not p.deepspeed_fails
    assert "ignores it silently" in p.message and "from DeepSpeed 0.17.1 on, `deepspeed.initialize` fails" in p.message
    [p] = analyse({"fp16": {"enabled": True, "opt_level": "O2"}}, version="0.17.1").of("unknown")
    assert p.deepspeed_fails and "from DeepSpeed" not in p.message


def test_a_section_given_as_a_scalar_is_invalid_whether_or_not_its_model_is_built():
    # the models are built only for the sections a config holds as mappings; a scalar there fails DeepSpeed
    # (`param_dict[OPTIMIZER][TYPE]`, `DeepSpeedFP16Config(**True)`) in every release
    for release in ("0.10.0", "0.19.8"):
        got = {p.path for p in analyse({"optimizer": "adam", "fp16": True}, version=release).of("invalid")}
        assert got == {("optimizer",), ("fp16",)}, release


def test_pydantic_1_releases_are_lax_where_pydantic_1_was():
    # pydantic 1 truncated a float for an int field and turned a number into a str
    cfg = {"zero_optimization": {"stage": 2, "reduce_bucket_size": 5.5e8 + 0.5}}
    assert analyse(cfg, version="0.14.0").of("invalid") == []
    assert [p.path for p in analyse(cfg, version="0.15.0").of("invalid")] == [("zero_optimization",
                                                                                "reduce_bucket_size")]


def test_table_json_is_compact():
    text = (ROOT / "dslint" / "dsconfig" / "schemas.json").read_text()
    assert "\n" not in text.rstrip("\n") and json.loads(text)["format"] == gen_schemas.FORMAT
    assert len(text) < 400_000
