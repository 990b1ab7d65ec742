"""HiveServer2 wire layer: IDL, generated code, codec and SASL framing (no I/O)."""
