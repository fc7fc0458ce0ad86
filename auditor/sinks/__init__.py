"""Where results go: the output tables' schemas and the Delta writers."""
