//! strobe-schema: arrives with its own issue.
