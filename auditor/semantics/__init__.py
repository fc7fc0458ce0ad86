"""Kafka's and Raft's log semantics as DataFrame transforms: lineage, leader, EOE, truncation, divergence."""
