"""Self-contained HTML pages: the page shell and one page per result kind."""
