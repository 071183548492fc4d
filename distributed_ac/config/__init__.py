"""The one typed Config (schema), the run plan resolved from it, and the presets."""
