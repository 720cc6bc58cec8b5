"""Views of runs and machines as plain HTML and text, and state diagrams; no Jupyter imports."""
