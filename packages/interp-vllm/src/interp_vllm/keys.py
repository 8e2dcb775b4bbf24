"""What is a point's site called between vLLM's client and its workers?

One name for one site, built here alone: the client names the sites a request captures and
writes with it, the workers key their resolved sites with it, and the static tier's declared
sets hold it. `resid_post.3` for a layer point, `embeddings` for a trunk point; the workers'
internal sites (`_q_rot.3`) follow the same form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from interp_core.address import Address

__all__ = ["address_key", "site_key"]


def site_key(name: str, layer: int | None) -> str:
    """The wire name of a site: `resid_post.3`, or `embeddings` for a trunk point."""
    return name if layer is None else f"{name}.{layer}"


def address_key(address: Address) -> str:
    """The wire name of the site an address is read or written at (see `site_key`)."""
    return site_key(address.name, address.layer)
