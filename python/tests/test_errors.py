"""Failures raise typedecide.Error subclasses that carry the library's message (the tool prints the same one)."""

import pytest

import typedecide as td
from conftest import BIN, CRITERIA, DEMO, TICKET, cli


def test_missing_model_is_a_file_error():
    with pytest.raises(td.FileError) as e:
        td.Model("/nonexistent/model")
    r = cli("decide", "--json", "--model", "/nonexistent/model", "--evidence", TICKET, "--criteria", CRITERIA,
            check=False)
    assert r.returncode != 0 and str(e.value) in r.stderr
    assert e.value.status == 2 and e.value.status_name == "i/o error" and isinstance(e.value, OSError)


def test_bad_criteria_name_the_line(demo, ticket, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q", "options": [{"id": "x", "description": "X"}]}\n'
                   '{"id": "b", "question": "q", "options": []}\n', encoding="utf-8")
    with pytest.raises(td.FormatError) as e:
        demo.decide(ticket, str(bad))
    assert str(bad) + ":2:" in str(e.value)
    r = cli("decide", "--json", "--model", DEMO, "--evidence", TICKET, "--criteria", bad, check=False)
    assert r.returncode != 0 and str(e.value) in r.stderr
    with pytest.raises(td.FormatError, match=r"^criteria:1: "):
        demo.decide(ticket, [{"id": "c", "question": "q", "options": [{"id": "x"}]}])


def test_errors_of_calls(demo, ticket):
    with pytest.raises(td.FormatError, match="UTF-8"):
        demo.tokenize(b"abc\xff")
    with pytest.raises(td.RangeError, match="outside"):
        demo.logits([1, 2, 99999999])
    with pytest.raises(td.RangeError, match="negative"):
        demo.detokenize([5, -1])
    with pytest.raises(td.InvalidArgumentError, match="precision"):
        td.Model(DEMO, precision="fp8")
    with pytest.raises(td.InvalidArgumentError, match="letters"):
        demo.decide(ticket, CRITERIA, letters="AA")
    with pytest.raises(td.InvalidArgumentError):
        demo.decide(None, CRITERIA)  # no evidence at all
    with pytest.raises(td.Error) as e:
        demo.export("/nonexistent/dir/x.gguf", quant="q8_0")
    assert "/nonexistent/dir/x.gguf" in str(e.value)


def test_cuda_is_refused_with_the_librarys_reason():
    ok, why = td.device_probe("cuda")
    if ok:
        pytest.skip("this machine has a usable GPU: " + why)
    with pytest.raises(td.UnsupportedError) as e:
        td.Model(DEMO, device="cuda")
    assert str(e.value) == why and why


def test_last_error_is_per_thread(demo):
    """A failure in one thread does not leak its message into another's exception."""
    import threading
    msgs = {}

    def fail(k, arg):
        try:
            demo.logits(arg)
        except td.Error as e:
            msgs[k] = str(e)

    ts = [threading.Thread(target=fail, args=(k, [1, 10**8 + k])) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(str(10**8 + k) in msgs[k] for k in range(4)), msgs
