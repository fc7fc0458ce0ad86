"""Reading a snapshot: discovery, the line grammars and parsers, the Snapshot of DataFrames."""
