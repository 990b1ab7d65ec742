"""What a statement is and who answers it: classifier, Router and its decisions, the
session switches."""
