"""What a chat run reads from memory before its model call, in one call."""
