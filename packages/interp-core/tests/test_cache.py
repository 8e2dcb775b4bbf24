"""ActivationCache: lookups in every address form, and misses that explain themselves."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from fake_backend import FakeTensor

from interp_core.address import Address
from interp_core.cache import ActivationCache
from interp_core.errors import AddressError, InterpError, PointNotCaptured

RESID = FakeTensor([[[1.0, 2.0]]])
EMB = FakeTensor([[[0.5, 0.5]]])
STREAM = FakeTensor([[[3.0, 4.0]]])


@pytest.fixture
def cache() -> ActivationCache:
    return ActivationCache(
        {
            Address("resid_post", 3): RESID,
            "embeddings": EMB,
            ("resid_post", 5, 2): STREAM,
        },
        output={"logits": "native"},
    )


def test_keys_are_addresses_in_capture_order(cache: ActivationCache) -> None:
    assert cache.addresses == (
        Address("resid_post", 3),
        Address("embeddings"),
        Address("resid_post", 5, 2),
    )
    assert list(cache) == list(cache.addresses)
    assert len(cache) == 3
    assert isinstance(cache, Mapping)


@pytest.mark.parametrize("key", [Address("resid_post", 3), "resid_post.3", ("resid_post", 3)])
def test_every_address_form_finds_the_tensor(cache: ActivationCache, key: object) -> None:
    assert cache[key] is RESID
    assert key in cache


def test_get_takes_coordinates(cache: ActivationCache) -> None:
    assert cache.get("resid_post", 3) is RESID
    assert cache.get("embeddings") is EMB
    assert cache.get("resid_post", 5, stream=2) is STREAM
    assert cache.get("resid_post.5.stream-2") is STREAM
    assert cache.get(Address("embeddings")) is EMB


def test_get_with_coordinates_wants_a_name(cache: ActivationCache) -> None:
    with pytest.raises(TypeError, match="takes a point name"):
        cache.get(Address("resid_post", 3), 3)


def test_a_miss_lists_what_was_captured_and_suggests_the_nearest(cache: ActivationCache) -> None:
    with pytest.raises(PointNotCaptured) as excinfo:
        cache["resid_post.4"]
    text = str(excinfo.value)
    assert text.startswith("resid_post.4 was not captured")
    assert "resid_post.3, embeddings, resid_post.5.stream-2" in text  # what was captured
    assert "did you mean resid_post.3?" in text
    assert "include 'resid_post.4' in the points you capture" in text  # what to do
    # A KeyError subclass, so `except KeyError` code keeps working, but it reads as prose.
    assert isinstance(excinfo.value, KeyError)
    assert isinstance(excinfo.value, InterpError)
    assert not text.startswith("'")


def test_get_misses_raise_too_never_none(cache: ActivationCache) -> None:
    with pytest.raises(PointNotCaptured, match=r"mlp_out\.3 was not captured"):
        cache.get("mlp_out", 3)


def test_an_empty_cache_says_so() -> None:
    with pytest.raises(PointNotCaptured, match="this cache is empty"):
        ActivationCache()["embeddings"]


def test_a_malformed_key_is_an_address_error_not_a_miss(cache: ActivationCache) -> None:
    with pytest.raises(AddressError, match=r"did you mean resid_post\.3"):
        cache["resid_post:3"]
    with pytest.raises(AddressError):
        _ = "resid_post:3" in cache


def test_two_keys_for_one_address_are_refused() -> None:
    with pytest.raises(ValueError, match=r"name the same address resid_post\.1"):
        ActivationCache({"resid_post.1": RESID, ("resid_post", 1): EMB})


def test_read_only_views(cache: ActivationCache) -> None:
    assert cache.output == {"logits": "native"}
    with pytest.raises(TypeError):
        cache.tensors[Address("embeddings")] = RESID  # type: ignore[index]
    with pytest.raises(TypeError):
        cache["embeddings"] = RESID  # type: ignore[index]
    with pytest.raises(AttributeError):
        cache.extra = 1  # type: ignore[attr-defined]


def test_layers_and_repr(cache: ActivationCache) -> None:
    assert cache.layers("resid_post") == (3, 5)
    assert cache.layers("mlp_out") == ()
    assert repr(cache) == (
        "ActivationCache({resid_post.3: (1, 1, 2), embeddings: (1, 1, 2), "
        "resid_post.5.stream-2: (1, 1, 2)})"
    )


def test_mapping_equality_compares_contents() -> None:
    one = ActivationCache({"embeddings": EMB})
    two = ActivationCache({Address("embeddings"): EMB})
    assert one == two
    assert dict(one) == {Address("embeddings"): EMB}
