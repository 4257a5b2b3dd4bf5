"""`vgpu campaign`: a cluster upgraded host by host, each host gated by its verdict."""
