//! strobe-recorder: arrives with its own issue.
