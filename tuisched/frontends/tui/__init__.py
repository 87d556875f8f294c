"""The operator console (layer 2): a Textual app hosting the runtime unchanged."""
