"""Durable notes: saving, listing, and hybrid recall."""
