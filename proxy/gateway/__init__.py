"""The client-facing listeners: accept, transports, authentication."""
