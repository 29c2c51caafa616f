"""Verified principals: who is calling, decided per route before the front door does anything else.

:mod:`gateway.auth.gate` is the front door's single hook; :mod:`gateway.auth.verify` checks bearer
JWTs with PyJWT; :mod:`gateway.auth.jwks` fetches and caches an issuer's keys, bounded;
:mod:`gateway.auth.verification_keys` parses key material. Nothing here imports the front door or the call path.
"""
