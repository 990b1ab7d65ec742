"""Replicas: ZooKeeper discovery and the leader lease."""
