"""The runtime floor: what talks to the world (models, storage, sandboxes) and knows no node."""
