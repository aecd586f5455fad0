"""The IR: avals, graph data types, staging, printing, checking, interpretation."""
