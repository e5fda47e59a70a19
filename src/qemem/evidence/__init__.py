"""Evidence construction, verification and time resolution."""
