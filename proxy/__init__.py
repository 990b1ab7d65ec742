"""datamap-proxy: a HiveServer2 (TCLIService) proxy in front of a Spark Thrift Server.

(The architecture page is written by the gateway; see shared docs architecture.md.)
"""
