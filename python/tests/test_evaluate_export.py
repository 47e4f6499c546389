"""Evaluation, metrics, export and savings: the tool's results through Python."""

import hashlib
import json

import pytest

import typedecide as td
from conftest import CRITERIA, DEMO, HELDOUT, TICKET, cli

TIMING = ("wall_seconds", "rows_per_second")


def untimed(results):
    r = json.loads(json.dumps(results))
    for k in TIMING:
        r["cost"].pop(k, None)
    return r


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    p = tmp_path_factory.mktemp("eval") / "fixture.jsonl"
    with open(HELDOUT, encoding="utf-8") as f:
        p.write_text("".join(f.readlines()[:48]), encoding="utf-8")
    return p


@pytest.mark.parametrize("debias", ["none", "cyclic"])
def test_evaluate_equals_cli(demo, fixture, tmp_path, debias):
    out, preds = tmp_path / "results.json", tmp_path / "preds.jsonl"
    cli("evaluate", fixture, "--model", DEMO, "--debias", debias, "--out", out, "--predictions", preds, "--quiet")
    with open(out) as f:
        expected = json.load(f)
    seen = []
    ev = demo.evaluate(str(fixture), debias=debias, model_name=DEMO, fixture_name=str(fixture),
                       progress=lambda done, n: seen.append((done, n)))
    assert untimed(ev.results) == untimed(expected)
    assert ev.metrics["mean_family_balanced_accuracy"] == expected["mean_family_balanced_accuracy"]
    assert seen and seen[-1][0] == seen[-1][1] == expected["evidence_groups"]
    mine = tmp_path / "mine.jsonl"
    ev.write_predictions(mine)
    expected_metrics = json.loads(cli("metrics", "--predictions", preds).stdout)
    assert untimed(td.metrics(mine)) == untimed(expected_metrics)


def test_export_equals_cli(demo, tmp_path):
    a, b = tmp_path / "py.gguf", tmp_path / "cli.gguf"
    sm = demo.export(a, quant="q8_0", prune_letters="ABCD", name="demo")
    r = cli("export", "--model", DEMO, "--quant", "q8_0", "--prune-head", "ABCD", "--name", "demo", "-o", b)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    assert isinstance(sm, td.SlotMap) and sm.letters == "ABCD" and len(sm) == 4
    pruned = td.Model(a)
    assert not pruned.can_generate and pruned.head_rows == 4 and pruned.slot_map == sm
    with pytest.raises(td.StateError):
        pruned.logits([1, 2])
    lines = cli("decide", "--json", "--quiet", "--model", b, "--evidence", TICKET, "--criteria", CRITERIA).stdout
    with open(TICKET, encoding="utf-8") as f:
        ds = pruned.decide(f.read(), CRITERIA)
    assert [json.loads(d.json()) for d in ds] == [{k: v for k, v in json.loads(x).items() if k != "ms"}
                                                   for x in lines.splitlines()]
    assert demo.export(tmp_path / "full.gguf", quant="f16") is None


@pytest.mark.parametrize("args,kw", [(["--preset", "qwen3-8b"], {"preset": "qwen3-8b"}),
                                     (["--preset", "qwen3-0.6b", "--letters", "2", "--untied"],
                                      {"preset": "qwen3-0.6b", "letters": 2, "tied": False}),
                                     (["--model", DEMO], {"model": DEMO}),
                                     (["--model", DEMO, "--untied"], {"model": DEMO, "tied": False})])
def test_savings_equal_cli(args, kw):
    expected = json.loads(cli("savings", "--json", *args).stdout)
    got = td.savings(**kw)
    assert got.pop("head_share") == pytest.approx(expected.pop("head_share"), rel=1e-9)
    assert got == expected


def test_describe_and_properties(demo):
    d = demo.describe()
    assert d["tied_embedding"] is True and demo.arch == "qwen3" and demo.n_params == 5640192
    assert demo.n_vocab == demo.head_rows == 8192 and demo.can_generate and not demo.is_hybrid
    assert demo.stop_ids == demo.generation_config["eos_token_id"]
    assert demo.kernels == td.cpu_kernels()
    assert td.library_version() == td.__version__
