"""The proxy's HiveServer2 client to Spark and the caps on its sessions."""
