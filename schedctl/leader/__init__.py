"""The scheduler side: the lease that elects one leader, and the leader's loop that plans ticks and inserts
their run rows (it never runs a job)."""
