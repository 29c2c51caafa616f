"""The gateway's own credentials for its backends (``routes[].backend.auth``), resolved on every
backend HTTP request: static secret headers (:mod:`.secrets`), OAuth tokens (:mod:`.tokens`) and the
per-route policy that chooses between them (:mod:`.credentials`). Sits below :mod:`gateway.legacy`
(whose HTTP sessions ask it for headers) and imports only ``config``, ``errors`` and aiohttp."""
