"""Neuronpedia's inference-server API on `interp serve`, mounted at `/neuronpedia`.

Neuronpedia's webapp talks to an inference server over the contract in `contract.json` (that
server's `openapi.json`). Given `http://HOST:PORT/neuronpedia` as its inference URL, it talks to
this mount instead, with no change of its own: the routes here take and answer the contract's
bodies, and run on the same Service (limits, pricing, metrics) as the rest of the server. The
guide is docs/guides/neuronpedia.md.
"""

from interp_serve.neuronpedia.server import (
    MOUNT,
    REFUSED,
    SECRET_ENV,
    SERVED,
    create_neuronpedia_app,
    secret_from_env,
)

__all__ = ["MOUNT", "REFUSED", "SECRET_ENV", "SERVED", "create_neuronpedia_app", "secret_from_env"]
