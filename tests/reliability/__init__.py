"""Test-side machinery for the reliability and security suites.

* :mod:`tests.reliability.tls`: a CA and certificates made with the ``openssl`` CLI, and
  a TLS terminator (Debian's ``socat``) in front of a plaintext broker.
* :mod:`tests.reliability.sasl_front`: a scripted SASL front (PLAIN, SCRAM-SHA-256/512,
  OAUTHBEARER) that authenticates a connection itself and then splices it to a broker.
* :mod:`tests.reliability.stack`: both put together with an embedded Tansu broker that
  advertises the outermost address, so clients come back through TLS/SASL after
  reading metadata.

None of this code uses the client's protocol layer: the frames the SASL front speaks are
built and parsed with ``struct`` here, so a codec bug cannot cancel itself out.
"""
