"""The checks of SPEC section 5: the registry, per-replica, leader-vs-follower, over-time, status."""
