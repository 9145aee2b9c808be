"""Pages with ACL and versions, instruction pages, and proposals."""
