"""What ExecuteStatement learns about a statement on its way (facts.py), for its event."""
