"""Prometheus metrics: the event observer, the scrape-time collector, the endpoint."""
