//! strobe-replayer: arrives with its own issue.
