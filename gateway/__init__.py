"""The HTTP + SSE gateway: browsers in, gRPC to the services out. No business state."""
