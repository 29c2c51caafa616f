"""Between replicas: a retry whose hold lives in another replica is forwarded to it.

The hold of a paused legacy call lives in one replica's memory. Its requestState names that
replica and — sealed, so a client cannot redirect the hop — the address other replicas reach it
at. A replica that receives such a retry forwards the request unchanged to the owner over an
authenticated internal hop (:mod:`gateway.replicas.auth`) and streams the owner's answer back
(:mod:`gateway.replicas.forward`). No shared store is involved; if the owner is gone, the client
gets the retryable ``hold_lost`` error (-32603).
"""
