"""HTTP/1.1 pieces every listener of the proxy shares: the wire format and the read loop."""
