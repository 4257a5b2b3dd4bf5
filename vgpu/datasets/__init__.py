"""Training datasets vgpu makes itself: seeded JPEG shards (`vgpu data make`)."""
