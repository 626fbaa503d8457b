"""The deployed graph API (Aegra): authentication, backpressure, metrics and the served graphs."""
