"""Prompt templates. The versioned playbook store lives here too once learning exists."""
