"""The kernel call: `PackedDecodeCall` (`packed_call`), the call a deployment makes on each rank (`expected`), the
engine's state pools (`pools`) and a recorded call read back (`recording`)."""
