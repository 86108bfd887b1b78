"""Protocol v0 (SPEC 5): the request the host writes and the checks on the response it reads."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from runner.errors import MalformedResponse
from runner.policy import Mount
from runner.protocol import PROTOCOL_VERSION, decode_response, encode_request, new_request_id

RID = "0123456789abcdef0123456789abcdef"


def response(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "protocol_version": 0,
        "request_id": RID,
        "ok": True,
        "data_json": '{"echo":"hi"}',
        "stdout": "echo ok",
        "stderr": "",
    }
    body.update(overrides)
    return body


def raw(body: Any) -> bytes:
    return json.dumps(body).encode()


def malformed(data: bytes, request_id: str = RID) -> str:
    with pytest.raises(MalformedResponse) as info:
        decode_response(data, request_id)
    assert info.value.name == "MalformedResponse"
    return info.value.message


# --- requests ------------------------------------------------------------------------------------


def test_new_request_id_is_32_lowercase_hex() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", new_request_id())


def test_new_request_id_differs_between_calls() -> None:
    ids = {new_request_id() for _ in range(100)}
    assert len(ids) == 100


def encoded(args: dict[str, Any] | None = None) -> dict[str, Any]:
    data = encode_request(
        request_id=RID,
        tool="echo",
        args={"text": "hi"} if args is None else args,
        cwd="/workspace",
        mounts=[Mount(".", "/workspace", True), Mount("/tmp/out", "/write/out", False)],
    )
    assert isinstance(data, bytes)
    return json.loads(data)


def test_request_has_zigclaw_keys_in_order() -> None:
    assert list(encoded()) == ["protocol_version", "request_id", "tool", "args_json", "cwd", "mounts"]


def test_request_field_values() -> None:
    request = encoded()
    assert request["protocol_version"] == 0 == PROTOCOL_VERSION
    assert request["request_id"] == RID
    assert request["tool"] == "echo"
    assert request["cwd"] == "/workspace"
    assert request["mounts"] == [
        {"host_path": ".", "guest_path": "/workspace", "read_only": True},
        {"host_path": "/tmp/out", "guest_path": "/write/out", "read_only": False},
    ]
    assert list(request["mounts"][0]) == ["host_path", "guest_path", "read_only"]


def test_args_json_is_a_string_of_compact_json() -> None:
    request = encoded({"text": "hi", "n": [1, 2]})
    assert isinstance(request["args_json"], str)
    assert request["args_json"] == '{"text":"hi","n":[1,2]}'
    assert json.loads(request["args_json"]) == {"text": "hi", "n": [1, 2]}


def test_request_is_one_compact_utf8_json_object() -> None:
    data = encode_request(request_id=RID, tool="echo", args={"text": "é€"}, cwd="/workspace", mounts=[])
    assert b"\n" not in data
    assert b": " not in data and b", " not in data
    assert json.loads(data.decode("utf-8"))["args_json"] == '{"text":"é€"}'


def test_request_matches_spec_example_byte_for_byte() -> None:
    data = encode_request(
        request_id=RID,
        tool="echo",
        args={"text": "hi"},
        cwd="/workspace",
        mounts=[Mount(".", "/workspace", True)],
    )
    assert (
        data
        == (
            '{"protocol_version":0,"request_id":"' + RID + '","tool":"echo",'
            '"args_json":"{\\"text\\":\\"hi\\"}","cwd":"/workspace",'
            '"mounts":[{"host_path":".","guest_path":"/workspace","read_only":true}]}'
        ).encode()
    )


def test_request_refuses_nan_in_args() -> None:
    with pytest.raises(ValueError):
        encode_request(request_id=RID, tool="echo", args={"x": float("nan")}, cwd="/workspace", mounts=[])


# --- responses -----------------------------------------------------------------------------------


def test_valid_response_decodes() -> None:
    decoded = decode_response(raw(response()), RID)
    assert decoded.request_id == RID
    assert decoded.ok is True
    assert decoded.data_json == '{"echo":"hi"}'
    assert decoded.stdout == "echo ok"
    assert decoded.stderr == ""


def test_data_parses_data_json() -> None:
    assert decode_response(raw(response()), RID).data == {"echo": "hi"}


def test_data_falls_back_to_the_raw_string_when_not_json() -> None:
    decoded = decode_response(raw(response(data_json="plain text")), RID)
    assert decoded.data == "plain text"


def test_data_of_deeply_nested_data_json_falls_back_to_the_raw_string() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    decoded = decode_response(raw(response(data_json=deep)), RID)
    assert decoded.data == deep


def test_tool_reported_failure_is_not_malformed() -> None:
    decoded = decode_response(raw(response(ok=False, data_json='{"error":"nope"}')), RID)
    assert decoded.ok is False
    assert decoded.data == {"error": "nope"}


def test_optional_fields_default_to_empty_strings() -> None:
    decoded = decode_response(raw({"protocol_version": 0, "request_id": RID, "ok": True}), RID)
    assert (decoded.data_json, decoded.stdout, decoded.stderr) == ("", "", "")


def test_response_with_surrounding_whitespace_decodes() -> None:
    assert decode_response(b"\n  " + raw(response()) + b"\n", RID).ok is True


def test_huge_but_valid_response_decodes() -> None:
    big = "x" * (8 * 1024 * 1024)
    decoded = decode_response(raw(response(stdout=big, data_json=json.dumps({"echo": big}))), RID)
    assert decoded.stdout == big
    assert decoded.data == {"echo": big}


@pytest.mark.parametrize("data", [b"", b"   \n\t"], ids=["empty", "blank"])
def test_empty_output_is_malformed(data: bytes) -> None:
    assert "no response" in malformed(data)


def test_output_that_is_not_utf8_is_malformed() -> None:
    assert "UTF-8" in malformed(b'{"protocol_version":0,"request_id":"\xff\xfe"}')


@pytest.mark.parametrize("data", [b"echo ok", b"{", b'{"protocol_version":0}{}', b"{'a': 1}"])
def test_output_that_is_not_json_is_malformed(data: bytes) -> None:
    assert "not JSON" in malformed(data)


@pytest.mark.parametrize(
    ("body", "kind"), [([response()], "list"), ("hi", "str"), (0, "int"), (None, "NoneType")]
)
def test_json_that_is_not_an_object_is_malformed(body: Any, kind: str) -> None:
    message = malformed(raw(body))
    assert "must be a JSON object" in message
    assert kind in message


@pytest.mark.parametrize("version", [1, -1, 0.0, "0", True, False, None])
def test_protocol_version_other_than_integer_zero_is_malformed(version: Any) -> None:
    assert "protocol_version" in malformed(raw(response(protocol_version=version)))


def test_missing_protocol_version_is_malformed() -> None:
    body = response()
    del body["protocol_version"]
    assert "protocol_version" in malformed(raw(body))


def test_missing_request_id_is_malformed() -> None:
    body = response()
    del body["request_id"]
    assert "request_id" in malformed(raw(body))


def test_another_request_id_is_malformed() -> None:
    message = malformed(raw(response(request_id="f" * 32)))
    assert "request_id" in message
    assert "does not match" in message


def test_request_id_of_wrong_type_is_malformed() -> None:
    assert "request_id" in malformed(raw(response(request_id=123)))


def test_missing_ok_is_malformed() -> None:
    body = response()
    del body["ok"]
    assert "ok" in malformed(raw(body))


@pytest.mark.parametrize("value", [1, 0, "true", None])
def test_ok_that_is_not_a_bool_is_malformed(value: Any) -> None:
    assert "'ok'" in malformed(raw(response(ok=value)))


@pytest.mark.parametrize("value", [{"echo": "hi"}, ["x"], 1, True, None])
def test_data_json_that_is_not_a_string_is_malformed(value: Any) -> None:
    assert "data_json" in malformed(raw(response(data_json=value)))


@pytest.mark.parametrize("key", ["stdout", "stderr"])
def test_stdout_or_stderr_that_is_not_a_string_is_malformed(key: str) -> None:
    assert key in malformed(raw(response(**{key: 5})))


@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_deeply_nested_json_is_malformed(opener: bytes) -> None:
    malformed(opener * 100_000)


def test_deeply_nested_closed_json_is_malformed() -> None:
    malformed(b"[" * 100_000 + b"]" * 100_000)


def test_a_response_repeating_a_key_is_malformed() -> None:
    rid = "a" * 32
    raw = ('{"protocol_version":0,"request_id":"x","request_id":"' + rid + '","ok":true}').encode()
    with pytest.raises(MalformedResponse, match="repeats a key"):
        decode_response(raw, rid)


def test_lone_surrogates_in_text_fields_are_malformed() -> None:
    rid = "a" * 32
    raw = ('{"protocol_version":0,"request_id":"' + rid + '","ok":true,"stdout":"\\ud800"}').encode()
    with pytest.raises(MalformedResponse, match="surrogate"):
        decode_response(raw, rid)


@pytest.mark.parametrize("data_json", ["NaN", "[Infinity]", '"\\ud800"'])
def test_data_that_is_not_strict_json_stays_the_raw_string(data_json: str) -> None:
    rid = "a" * 32
    body = {"protocol_version": 0, "request_id": rid, "ok": True, "data_json": data_json}
    response = decode_response(json.dumps(body).encode(), rid)
    assert response.data == data_json
    json.dumps(response.data, allow_nan=False).encode("utf-8")  # printable as strict JSON
