"""The worker side: claim queued runs, start each as its job's user in a process group of its own, supervise
it (heartbeat, timeout, checkpoint, SIGTERM hand-back) and record how it ended."""
