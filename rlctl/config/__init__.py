"""The typed recipe: sections, loading with precedence, cross-field checks, derived numbers."""
