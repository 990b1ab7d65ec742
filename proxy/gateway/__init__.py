"""The listeners in front of the HiveServer2 service: the binary port (SASL or NOSASL) and
the http transport, TLS, admission before login, authentication (auth/), SIGHUP reload."""
