"""The address grammar: one string form, a strict total parser, refusals that say what was meant."""

from __future__ import annotations

import pytest
from _raises import raises_saying
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interp_core.address import Address, to_address
from interp_core.errors import AddressError, UnknownCoordinate, UnknownPoint
from interp_core.points import Scope, get_point, point_names

LAYER_POINTS = [n for n in point_names() if get_point(n).scope is Scope.LAYER]
TRUNK_POINTS = [n for n in point_names() if get_point(n).scope is Scope.TRUNK]
STREAM_POINTS = [n for n in point_names() if get_point(n).accepts_stream]

EXAMPLES = settings(max_examples=3_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- generators of valid addresses ----------------------------------------------------------------
_index = st.integers(min_value=0, max_value=10**6)
_segment = st.one_of(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), _index.map(str))

valid_addresses = st.one_of(
    st.sampled_from(TRUNK_POINTS).map(Address),
    st.builds(Address, st.sampled_from(LAYER_POINTS), _index),
    st.builds(Address, st.sampled_from(STREAM_POINTS), _index, _index),
    st.lists(_segment, min_size=1, max_size=6).map(lambda s: Address.module(".".join(s))),
)


@EXAMPLES
@given(valid_addresses)
def test_format_then_parse_is_the_identity(address: Address) -> None:
    text = str(address)
    assert Address.parse(text) == address
    assert str(Address.parse(text)) == text
    assert hash(Address.parse(text)) == hash(address)


@EXAMPLES
@given(st.text(max_size=40))
def test_arbitrary_text_parses_or_raises_address_error(text: str) -> None:
    try:
        address = Address.parse(text)
    except AddressError as error:
        assert str(error)  # every refusal says something
    else:
        assert str(address) == text  # anything accepted round-trips exactly


_near_miss_alphabet = st.sampled_from(
    [*point_names(), ".", "-", "stream", "stream-", "path", "path.", "0", "1", "07", "-1", "_", ":"]
)


@EXAMPLES
@given(st.lists(_near_miss_alphabet, max_size=6).map("".join))
def test_near_miss_strings_parse_or_raise_address_error(text: str) -> None:
    # Random text rarely gets past the first check; these pieces probe the deep branches.
    try:
        address = Address.parse(text)
    except AddressError:
        return
    assert str(address) == text


# --- the string form ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("resid_post.10", Address("resid_post", 10)),
        ("embeddings", Address("embeddings")),
        ("resid_post.5.stream-2", Address("resid_post", 5, 2)),
        ("path.model.layers.3.mlp", Address("path.model.layers.3.mlp")),
        ("attn_probs.0", Address("attn_probs", 0)),
    ],
)
def test_known_forms(text: str, expected: Address) -> None:
    assert Address.parse(text) == expected
    assert str(expected) == text


def test_path_addresses_expose_the_module_path() -> None:
    address = Address.module("model.layers.3.mlp")
    assert address.is_path and address.module_path == "model.layers.3.mlp"
    assert not Address("resid_post", 1).is_path and Address("resid_post", 1).module_path is None


def test_addresses_are_frozen_and_hashable() -> None:
    address = Address("resid_post", 1)
    with pytest.raises(AttributeError):
        address.layer = 2  # type: ignore[misc]
    assert {address: 1}[Address.parse("resid_post.1")] == 1


# --- refusals and their hints -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("resid_post:5", "did you mean resid_post.5?"),
        ("resid_post[5]", "did you mean resid_post.5?"),
        ("resid_post 5", "did you mean resid_post.5?"),
        ("Resid_Post.5", "did you mean resid_post?"),
        ("resid_pots.5", "did you mean resid_post"),
        ("resid_post", "did you mean resid_post.0"),
        ("embeddings.3", "did you mean embeddings?"),
        ("resid_post.-1", "negative"),
        ("resid_post.05", "did you mean resid_post.5?"),
        ("resid_post.layer5", "did you mean resid_post.5?"),
        ("resid_post.5.stream2", "did you mean resid_post.5.stream-2?"),
        ("resid_post.5.stream-1.stream-2", "twice"),
        ("resid_post.5.6", "only one layer"),
        ("resid_post..5", "empty component"),
        ("resid_post.5.", "empty component"),
        ("model.layers.3.mlp", "did you mean path.model.layers.3.mlp?"),
        ("path.", "needs a module"),
        ("path", "needs a module"),
        ("path.model.01", "leading zeros"),
        ("mlp_out.3.stream-1", "takes no stream"),
        ("resid_streams.3.stream-1", "already covers every stream"),
        (" resid_post.5", "whitespace"),
        ("", "empty string"),
        ("résid_post.5", "characters an address never has"),
    ],
)
def test_malformed_addresses_say_what_was_meant(text: str, hint: str) -> None:
    with raises_saying(AddressError, hint):
        Address.parse(text)


def test_unknown_point_names_the_nearest_known_points() -> None:
    with raises_saying(UnknownPoint, "mlp_out", "did you mean"):
        Address.parse("mlp_outt.3")


def test_unknown_coordinate_signals_version_skew() -> None:
    with raises_saying(UnknownCoordinate, "newer release") as caught:
        Address.parse("resid_post.5.head-3")
    assert isinstance(caught.value, AddressError)


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (("resid_post", -1), "negative"),
        (("resid_post", True), "must be an int"),
        (("resid_post", "3"), "must be an int"),
        (("resid_post", None), "needs one"),
        (("final_norm", 2), "trunk point"),
        (("path.model", 3), "takes no layer"),
        (("model.layers.0",), "not a point name"),
        ((3,), "must be a str"),
    ],
)
def test_constructor_is_as_strict_as_the_parser(args: tuple[object, ...], hint: str) -> None:
    with raises_saying(AddressError, hint):
        Address(*args)  # type: ignore[arg-type]


def test_to_address_accepts_what_users_write() -> None:
    expected = Address("resid_post", 3)
    assert to_address(expected) is expected
    assert to_address("resid_post.3") == expected
    assert to_address(("resid_post", 3)) == expected
    assert to_address(("resid_post", 3, 1)) == Address("resid_post", 3, 1)
    with pytest.raises(AddressError, match="tuple"):
        to_address(("resid_post", 3, 1, 0))
    with pytest.raises(AddressError, match="cannot read an address"):
        to_address(3.5)


def test_site_drops_the_stream_and_at_moves_the_layer() -> None:
    assert Address("resid_post", 3, 1).site == Address("resid_post", 3)
    assert Address("resid_post", 3).at(7) == Address("resid_post", 7)


def test_a_number_too_long_for_int64_is_refused_before_python_converts_it() -> None:
    # int() refuses strings of more than 4300 digits with a bare ValueError; repr() of such an int
    # raises too. Both must come back as AddressError naming the problem.
    with pytest.raises(AddressError, match=r"5000 digits, beyond 2\*\*63 - 1"):
        Address.parse("resid_post." + "9" * 5000)
    with pytest.raises(AddressError, match=r"40 digits"):
        Address.parse("resid_post.0.stream-" + "1" * 40)
    with pytest.raises(AddressError, match=r"beyond 2\*\*63 - 1"):
        Address.parse(f"resid_post.{2**63}")
    assert Address.parse(f"resid_post.{2**63 - 1}").layer == 2**63 - 1
    with pytest.raises(AddressError, match=r"a 16610-bit number, beyond 2\*\*63 - 1"):
        Address("resid_post", 10**5000)
    with pytest.raises(AddressError, match=r"a 16610-bit number: negative"):
        Address("resid_post", -(10**5000))


def test_to_addresses_reads_a_list_and_refuses_a_lone_address() -> None:
    from interp_core.address import to_addresses
    from interp_core.errors import InvalidArgument

    assert to_addresses(["resid_post.3", ("resid_post", 4)]) == [
        Address("resid_post", 3),
        Address("resid_post", 4),
    ]
    assert to_addresses(()) == []
    assert to_addresses(a for a in ["embeddings"]) == [Address("embeddings")]
    for lone in ("resid_post.3", Address("resid_post", 3), b"resid_post.3"):
        with pytest.raises(InvalidArgument, match=r"pass \['resid_post\.3'\]"):
            to_addresses(lone)
    with pytest.raises(InvalidArgument, match=r"or \[\] for none"):
        to_addresses(None)
    for other in (3, {"resid_post.3": 1}):
        with pytest.raises(InvalidArgument, match=r"pass a list such as"):
            to_addresses(other)
    with pytest.raises(AddressError, match="cannot read an address"):
        to_addresses([3.5])
