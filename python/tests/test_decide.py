"""Decisions through Python are the tool's, bit for bit."""

import json
import re
import struct

import pytest

import typedecide as td
from conftest import BIN, CRITERIA, DEMO, DEMO35, HELDOUT, TICKET, cli, strip_ms


def cli_decide(*extra, model=DEMO, evidence=TICKET, criteria=CRITERIA):
    args = ["decide", "--json", "--quiet", "--model", model, "--criteria", criteria, *extra]
    if evidence:
        args += ["--evidence", evidence]
    return cli(*args).stdout.splitlines()


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


@pytest.mark.parametrize("model", [DEMO, DEMO35])
def test_decide_equals_cli_json(model, ticket):
    m = td.Model(model, threads=2)
    lines = cli_decide(model=model)
    ds = m.decide(ticket, CRITERIA)
    assert len(ds) == len(lines) == 4
    for d, line in zip(ds, lines):
        expected = strip_ms(line)
        assert json.loads(d.json()) == expected
        assert d.json() == re.sub(r',"ms":[^,}]*}$', "}", line)  # the same bytes
        # and the Python floats are the library's float32 values: the tool prints them exactly (9 digits)
        assert [f32_bits(p) for p in d.probs] == [f32_bits(p) for p in expected["probs"]]
        assert d.answer == expected["answer"] and d.letter == expected["letter"]
        assert d.options == expected["options"] and d.suffix_tokens == expected["suffix_tokens"]


def test_decide_inputs_and_modes(demo, ticket):
    """A list of dicts, JSONL bytes, a Rows and a path decide alike; batch, serial and fresh give the same bits."""
    with open(CRITERIA, encoding="utf-8") as f:
        text = f.read()
    rows = [json.loads(line) for line in text.splitlines()]
    ref = [d.json() for d in demo.decide(ticket, CRITERIA)]
    assert [d.json() for d in demo.decide(ticket, rows)] == ref
    assert [d.json() for d in demo.decide(ticket.encode(), text.encode())] == ref
    assert [d.json() for d in demo.decide(ticket, td.Rows(CRITERIA))] == ref
    for mode in ("serial", "fresh"):
        assert [d.json() for d in demo.decide(ticket, rows, mode=mode)] == ref
    assert [d.json() for d in demo.decide(ticket, rows, threads=1)] == ref


def test_decide_options_equal_cli(demo, ticket):
    """allowed_mass and the letters' logits, as `decide --allowed-mass --show-logits` prints them."""
    lines = cli_decide("--allowed-mass", "--show-logits")
    ds = demo.decide(ticket, CRITERIA, allowed_mass=True)
    assert [json.loads(d.json(logits=True)) for d in ds] == [strip_ms(x) for x in lines]
    assert all(0 < d.allowed_mass <= 1 for d in ds)


def test_rows_with_their_own_evidence_equal_cli(demo, tmp_path):
    """Rows that carry evidence are grouped by it (one prefill each), as the tool groups them."""
    sample = tmp_path / "rows.jsonl"
    with open(HELDOUT, encoding="utf-8") as f:
        sample.write_text("".join(f.readlines()[:30]), encoding="utf-8")
    lines = cli_decide(evidence=None, criteria=sample)
    ds = demo.decide(None, str(sample))
    assert [json.loads(d.json()) for d in ds] == [strip_ms(x) for x in lines]


def test_slot_map_equals_library(demo):
    d = demo.decider()
    r = cli("decide", "--json", "--model", DEMO, "--evidence", TICKET, "--criteria", CRITERIA)
    printed = [x for x in r.stderr.splitlines() if "slot map" in x][0].split("slot map ", 1)[1]
    sm = d.slot_map
    assert sm.to_json() == printed
    assert td.SlotMap.from_dict(json.loads(printed)) == sm
    assert sm.letters == d.letters == "ABCDEFGHIJKLMNOPQRST"
    assert sm.row(sm.token("C")) == 2 and sm.token(0) == sm.keep[0]
    assert demo.tokenize(" A") == [sm.token("A")]
    assert sm.separator == " "


def test_decide_ids(demo, ticket):
    """The readout on ids: the same decisions as on text when the ids are the prompt's."""
    d = demo.decider()
    ds = d.decide_ids([1, 2, 3, 4, 5], [[6, 7, 8], [9, 10]], [4, 2])
    assert [len(x.probs) for x in ds] == [4, 2]
    assert all(abs(sum(x.probs) - 1) < 1e-5 for x in ds)
    assert ds[0].id is None
    with pytest.raises(td.StateError):
        ds[0].json()
    st = d.stats()
    assert st["criteria"] == 2 and st["head_tokens"] == 5
