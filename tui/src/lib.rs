//! strobe-tui: arrives with its own issue.
