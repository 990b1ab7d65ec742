"""The TCLIService calls of proxy/hs2/frontend.py's Service, one module per kind of call (each a
mixin over Service's registries and helpers): sessions, metadata pass-through, operation
calls, and the statements the proxy runs itself."""
