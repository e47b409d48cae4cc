"""What the gateway tells operators about itself: metrics, the request log and traces."""
